"""The parts a user of a local model depends on, on the real llama-server: the grammar enforced by
llama.cpp's sampler, a stream closed early, `serve` reused by `run`, llama.cpp's OpenAI-style
/v1/completions, native function calling reaching a call, two slots at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from textagent import Agent, LlamaCppBackend
from textagent.backends import ChatAsTextBackend, OpenAICompletionsBackend
from textagent.modes.text import EarlyStop
from textagent.templates import format_from_renderer
from textagent.toolkits import demo

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("demo_lights")]

QUESTIONS = [
    "What's 17 times 24, then add 100?",
    "What's the weather in Paris, and should I take a coat?",
    "Turn off the kitchen light.",
    "What time is it in Tokyo?",
]


def test_llama_cpp_enforces_the_grammar_on_a_model_that_ignores_the_protocol(smollm_server):
    backend = LlamaCppBackend(smollm_server.url)
    fmt = format_from_renderer(backend.apply_template)
    free = Agent(
        backend, demo.demo_tools(), chat_format=fmt, strict=True, max_steps=1, reply_tokens=96, temperature=0.0, seed=0
    )
    held = Agent(
        backend,
        demo.demo_tools(),
        mode="constrained",
        chat_format=fmt,
        strict=True,
        max_steps=1,
        reply_tokens=256,
        temperature=0.0,
        seed=0,
    )
    unconstrained = [free.run(q).steps[0] for q in QUESTIONS]
    constrained = [held.run(q).steps[0] for q in QUESTIONS]
    # without the grammar SmolLM2 writes no usable reply; under it every reply parses
    assert sum(s.reply is not None for s in unconstrained) < len(QUESTIONS), [s.raw for s in unconstrained]
    assert all(s.reply is not None for s in constrained), [s.raw for s in constrained]
    for step in constrained:
        assert step.calls or step.reply.answer, step.raw
        assert all(c.name in demo.demo_tools() for c in step.calls), step.raw


def test_a_stream_is_closed_once_a_complete_call_is_followed_by_prose(qwen_server):
    backend = LlamaCppBackend(qwen_server.url)
    fmt = format_from_renderer(backend.apply_template)
    messages = [
        {"role": "system", "content": "You write one tool call line, then explain it."},
        {
            "role": "user",
            "content": 'Write exactly this line: TOOL: calculate ARGS: {"expression": "2 + 2"}\n'
            "Then, on the next lines, write three sentences about the number four.",
        },
    ]
    prompt = fmt.render(messages)
    plain = backend.complete(prompt, stop=[], max_tokens=160, temperature=0.0, seed=0)
    watcher = EarlyStop(demo.demo_tools())
    streamed = backend.complete(prompt, stop=[], max_tokens=160, temperature=0.0, seed=0, on_text=watcher)
    assert "TOOL: calculate" in plain.text and len(plain.text.split("\n", 1)[-1].strip()) > 20, plain.text
    assert streamed.finish_reason == "early_stop", streamed.text
    assert plain.text.startswith(streamed.text[: watcher.cut or len(streamed.text)])
    assert streamed.usage.completion_tokens < plain.usage.completion_tokens


def test_run_reuses_the_server_serve_started(smollm_server, tmp_path):
    # (smollm_server: the binary and the model are there, or the test fails in CI)
    env = dict(os.environ, TEXTAGENT_STATE_DIR=str(tmp_path))
    serve = subprocess.Popen(
        [sys.executable, "-m", "textagent", "serve", "--gguf", "smollm2", "--ctx-size", "2048"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = serve.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), serve.stderr.read() if serve.poll() is not None else url
        assert (tmp_path / "server.json").exists()
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "textagent",
                "run",
                "-v",
                "--json",
                "--max-steps",
                "1",
                "--reply-tokens",
                "16",
                "Say hi.",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert "using the server `textagent serve` started at " + url in run.stderr, run.stderr
        assert "starting llama-server" not in run.stderr
        assert json.loads(run.stdout.strip().splitlines()[-1])["steps"] == 1
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
    assert serve.returncode == 0 and not (tmp_path / "server.json").exists()


def test_the_completions_backend_on_llama_cpps_v1_completions(qwen_server):
    backend = OpenAICompletionsBackend(qwen_server.url + "/v1", model="qwen", grammar_field="grammar")
    fmt = format_from_renderer(LlamaCppBackend(qwen_server.url).apply_template)
    result = Agent(backend, demo.demo_tools(), chat_format=fmt, temperature=0.0, seed=0).run(QUESTIONS[0])
    executed = [o for s in result.steps for o in s.outcomes if o.ok]
    assert executed and executed[0].name == "calculate", [s.raw for s in result.steps]
    assert result.stop_reason == "answer" and "508" in result.answer
    assert result.steps[0].usage.prompt_tokens
    # the grammar field reaches llama.cpp: constrained mode over /v1/completions parses every reply
    held = Agent(
        backend, demo.demo_tools(), mode="constrained", chat_format=fmt, max_steps=3, temperature=0.0, seed=0
    ).run(QUESTIONS[0])
    assert all(s.reply is not None for s in held.steps), [s.raw for s in held.steps]


def test_native_function_calling_reaches_a_call(qwen15_server):
    # an action the model is known to call for (on the arithmetic and weather seeds the 1.5B answers
    # from its own head: 508 worked out, a Paris forecast made up)
    backend = ChatAsTextBackend(qwen15_server.url, model="qwen")
    result = Agent(backend, demo.demo_tools(), mode="native+fallback", max_steps=4, temperature=0.0, seed=0).run(
        QUESTIONS[2]
    )
    executed = [o for s in result.steps for o in s.outcomes if o.ok]
    assert executed, [(s.raw, s.details) for s in result.steps]
    assert executed[0].name == "toggle_light" and executed[0].args == {"room": "kitchen", "on": False}
    assert demo.lights["kitchen"] is False
    first = next(s for s in result.steps if s.outcomes)
    assert first.details["native"] == "tool_calls" or first.details.get("fallback"), first.details


def test_two_slots_answer_two_episodes_at_once(qwen_server):
    from textagent.local import LocalServer

    with LocalServer("qwen2.5-coder-0.5b", parallel=2, ctx_size=4096) as server:
        backend = LlamaCppBackend(server.url)
        fmt = format_from_renderer(backend.apply_template)
        results: dict[int, object] = {}
        spans: dict[int, tuple[float, float]] = {}

        def episode(slot: int) -> None:
            started = time.monotonic()
            agent = Agent(backend, demo.demo_tools(), chat_format=fmt, temperature=0.0, seed=0, id_slot=slot)
            results[slot] = agent.run(QUESTIONS[0])
            spans[slot] = (started, time.monotonic())

        threads = [threading.Thread(target=episode, args=(slot,)) for slot in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    assert all(r.stop_reason == "answer" and "508" in r.answer for r in results.values()), results
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert a0 < b1 and b0 < a1  # the episodes overlapped: both slots worked at once
    # the same question on each slot: the same replies
    assert [s.raw for s in results[0].steps] == [s.raw for s in results[1].steps]


def test_a_server_that_dies_of_sigill_while_loading_is_restarted_with_no_repack(tmp_path, smollm_server, monkeypatch):
    """What a CPU that advertises AMX inside a VM that does not grant it does to llama-server (it
    dies of SIGILL in the repacked kernels while loading): here a wrapper around the real binary
    that does so unless it is given --no-repack. The restarted server answers."""
    from textagent.local import LocalServer, find_server_binary

    real = find_server_binary()
    wrapper = tmp_path / "llama-server"
    wrapper.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = --no-repack ] && exec "%s" "$@"; done\n'
        'echo "load_tensors: repacking (this CPU says AMX)"\nkill -ILL $$\n' % real
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", str(wrapper))
    monkeypatch.setenv("TEXTAGENT_STATE_DIR", str(tmp_path / "state"))  # the note is this test's own
    said: list[str] = []
    with LocalServer(smollm_server.model_path, ctx_size=2048, progress=said.append) as server:
        assert server.repack is False and "--no-repack" in server.command()
        reply = LlamaCppBackend(server.url).complete("Hello", stop=[], max_tokens=4, temperature=0.0, seed=0)
        assert reply.usage.completion_tokens
    assert any(s.startswith("llama-server crashed while loading; retrying with --no-repack") for s in said), said
    # the crash is remembered: the next start goes straight to --no-repack, with no crash
    said.clear()
    with LocalServer(smollm_server.model_path, ctx_size=2048, progress=said.append) as server:
        assert "--no-repack" in server.command()
    assert not any("retrying" in s for s in said), said  # no failed start this time
    assert any("starting it with --no-repack" in s for s in said), said  # and it says why


def test_the_first_tokens_odds_on_llama_cpp_and_its_v1_completions(qwen_server):
    from textagent.retry import Retry

    fmt = format_from_renderer(LlamaCppBackend(qwen_server.url).apply_template)
    for backend in (LlamaCppBackend(qwen_server.url), OpenAICompletionsBackend(qwen_server.url + "/v1", model="q")):
        top = backend.complete("The capital of France is", stop=[], max_tokens=1, token_probs=5).top_tokens
        probs = [p for _, p in top]
        assert len(top) == 5 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1.0001, top
    # odds recorded before the first reply; a threshold of almost nothing begins it with a call
    # wherever the likeliest first token does not
    backend = LlamaCppBackend(qwen_server.url)
    for odds in (1.0, 1e-9):
        agent = Agent(backend, demo.demo_tools(), chat_format=fmt, retry=Retry(odds=odds), max_steps=2, seed=0)
        first = agent.run("Who wrote Hamlet?").steps[0]
        facts = first.details["retry"]
        assert 0 <= facts["call_odds"] <= 1, facts
        if odds == 1.0:
            assert "lead" not in facts
        else:  # led, or the model's own call
            assert first.raw.startswith("TOOL") and first.calls, (first.raw, facts)
