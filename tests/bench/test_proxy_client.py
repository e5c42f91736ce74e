"""bench/proxy_client.py: the `proxy` mode, function calling asked of a real `textagent proxy` by the
official openai client, in front of a scripted llama.cpp upstream (no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("starlette")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "proxy"))
from proxykit import proxy, said, upstream  # noqa: F401 - fixtures

from textagent import Agent
from textagent.bench.proxy_client import OpenAIClientChat, ProxyClientMode
from textagent.toolkits import demo


def test_an_fc_client_run_through_the_proxy(upstream, proxy):
    upstream.json("/completion", said('TOOL: calculate ARGS: {"expression": "17 * 24"}'))
    upstream.json("/completion", said("ANSWER: 408"))
    backend = OpenAIClientChat(proxy.url)
    result = Agent(backend, demo.demo_tools(), mode=ProxyClientMode()).run("What's 17 times 24?")
    assert result.answer == "408" and result.mode == "proxy"
    assert [(o.name, o.output) for s in result.steps for o in s.outcomes] == [("calculate", "408")]
    # the proxy got an FC client's request: tools, then the tool message with the result
    second = upstream.bodies("/completion")[1]["prompt"]
    assert "OBSERVATION (calculate): 408" in second


def test_a_422_from_the_proxy_is_an_empty_reply_not_a_backend_error(upstream, proxy):
    upstream.json("/completion", said("TOOL: nope"), repeat=True)  # never a valid call: the repairs run out
    backend = OpenAIClientChat(proxy.url)
    reply = backend.chat(
        [{"role": "user", "content": "Weather?"}],
        tools=demo.demo_tools().to_openai(),
        tool_choice="required",
        max_tokens=64,
    )
    assert reply.text == "" and reply.message == {"role": "assistant", "content": ""}


def test_bfcl_multi_turn_ground_truth_through_the_proxy_scores_right(upstream, proxy):
    from textagent.bench.bfcl import multi_turn as mt
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.episode import run_multi_turn
    from textagent.bench.episode import Settings
    from textagent.protocol import ToolCall, render_call

    sys.path.insert(0, str(Path(__file__).resolve().parent / "bfcl"))
    from test_multi_turn import _calls

    fetch_wheel()
    item = mt.load_multi_turn("multi_turn_base")[0]
    for turn in item.ground_truth:
        calls = _calls(item, list(turn))
        upstream.json("/completion", said("\n".join(render_call(ToolCall(n, a)) for n, a in calls)))
        upstream.json("/completion", said("ANSWER: done"))
    out = run_multi_turn(
        item, "proxy", OpenAIClientChat(proxy.url), chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    assert out["error"] is None and out["success"], json.dumps(out["multi_turn"])[:500]


def test_the_bench_gives_each_worker_slot_a_proxy_of_its_own(upstream):
    """With the proxy beside other modes on one server, each worker's proxy episodes use that
    worker's slot alone, as its other modes do, so no mode evicts another's conversation."""
    from textagent.bench.backends import BackendFactory, Slot
    from textagent.bench.cli import _start_proxies, build_parser
    from textagent.bench.episode import run_episode
    from textagent.bench.tasks import load_tasks

    upstream.json("/props", {"total_slots": 2}, repeat=True)
    upstream.json("/completion", said("ANSWER: 408"), repeat=True)
    args = build_parser().parse_args(["--endpoint", upstream.url, "--chat-format", "chatml", "--modes", "proxy"])
    factory = BackendFactory(api="llamacpp", chat_format="chatml")
    workers = [Slot(upstream.url, 0), Slot(upstream.url, 1)]
    proxies = _start_proxies(args, workers, factory)
    try:
        assert sorted(factory.proxies) == [(upstream.url, 0), (upstream.url, 1)]
        assert len(set(factory.proxies.values())) == 2
        task = next(t for t in load_tasks() if t.id == "single-calc-mul")
        for slot in (1, 0, 1):
            backend, chat_format = factory("proxy", Slot(upstream.url, slot))
            record = run_episode(task, "proxy", backend, chat_format=chat_format, slot=slot).to_record()
            assert record["stop_reason"] == "answer", record["error"]
        assert [b["id_slot"] for b in upstream.bodies("/completion")] == [1, 0, 1]
    finally:
        for p in proxies:
            p.stop()


def test_the_bench_proxy_shows_the_runs_example_style(upstream):
    """``--example-style`` reaches the proxy the bench starts, as it reaches the text modes: the
    proxy writes the placeholder exchanges for the client's tools in that style."""
    from textagent.bench.backends import BackendFactory, Slot
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks
    from textagent.bench.cli import _start_proxies, build_parser
    from textagent.bench.episode import run_episode

    fetch_wheel()
    item = bfcl_tasks("bfcl:simple_python")[1]  # tools without examples of their own
    upstream.json("/props", {"total_slots": 1}, repeat=True)
    upstream.json("/completion", said("ANSWER: 120"), repeat=True)
    argv = ["--endpoint", upstream.url, "--chat-format", "chatml", "--modes", "proxy", "--example-style", "concrete"]
    factory = BackendFactory(api="llamacpp", chat_format="chatml")
    proxies = _start_proxies(build_parser().parse_args(argv), [Slot(upstream.url, 0)], factory)
    try:
        backend, chat_format = factory("proxy", Slot(upstream.url, 0))
        run_episode(item, "proxy", backend, chat_format=chat_format, slot=0)
    finally:
        for p in proxies:
            p.stop()
    prompt = upstream.bodies("/completion")[0]["prompt"]
    assert "ANSWER: The result is 42." in prompt and "returned)" not in prompt
