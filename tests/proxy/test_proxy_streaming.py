"""Real streaming: an answer's content reaches the client while the model writes it; calls once
complete and valid; what would change a streamed answer ends it; errors before the stream are
statuses, after it an error event."""

from __future__ import annotations

import json
import time

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from proxykit import ASK, WEATHER, said

from textagent.proxy import REPAIRS_HEADER


def pieces(*texts: str) -> list[dict]:
    """A llama.cpp /completion stream of ``texts``."""
    return [
        *({"content": t, "stop": False} for t in texts),
        {
            "content": "",
            "stop": True,
            "stop_type": "eos",
            "tokens_evaluated": 50,
            "tokens_predicted": len(texts),
            "timings": {"prompt_n": 50, "cache_n": 0, "predicted_n": len(texts)},
        },
    ]


def stream(proxy, body) -> tuple[requests.Response, list]:
    """The response and its events, each as (seconds since the request, data)."""
    started = time.monotonic()
    resp = requests.post(proxy.url + "/v1/chat/completions", json={**body, "stream": True}, stream=True, timeout=60)
    events: list = []
    if not resp.headers["content-type"].startswith("text/event-stream"):
        resp.content  # an error status: read as a whole
        return resp, events
    for line in resp.iter_lines():
        if line.startswith(b"data: "):
            data = line[6:].decode()
            events.append((time.monotonic() - started, data if data == "[DONE]" else json.loads(data)))
    return resp, events


def content_of(events) -> str:
    return "".join(
        e["choices"][0]["delta"].get("content") or "" for _, e in events if isinstance(e, dict) and e.get("choices")
    )


def test_content_flows_while_the_model_writes(upstream, proxy):
    words = [f"word{i} " for i in range(60)]
    upstream.sse("/completion", pieces("ANSWER: ", *words), chunk_delay=0.05)
    resp, events = stream(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.status_code == 200 and resp.headers[REPAIRS_HEADER] == "0"
    first = next(
        t for t, e in events if isinstance(e, dict) and e["choices"] and e["choices"][0]["delta"].get("content")
    )
    last = events[-1][0]
    assert last >= 2.5 and first < last / 2  # the first words long before the last
    assert content_of(events) == "".join(words).strip()
    assert events[-2][1]["choices"][0]["finish_reason"] == "stop" and events[-1][1] == "[DONE]"


def test_thoughts_are_not_streamed_and_a_multi_line_answer_arrives_whole(upstream, proxy):
    text = "Here:\n```python\nprint('hi')\n```\n\nDone."
    upstream.sse("/completion", pieces("Thought: I know this.\n", "ANSWER: ", *text), chunk_delay=0.01)
    _, events = stream(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert content_of(events) == text


def test_a_call_line_after_a_streamed_answer_ends_the_answer(upstream, proxy):
    upstream.sse(
        "/completion",
        pieces("ANSWER: It is sunny in Paris today.\n", 'TOOL: get_weather ARGS: {"city": "Paris"}\n', *["x"] * 200),
        chunk_delay=0.02,
    )
    started = time.monotonic()
    _, events = stream(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert content_of(events) == "It is sunny in Paris today."
    assert not any("tool_calls" in e["choices"][0]["delta"] for _, e in events if isinstance(e, dict) and e["choices"])
    assert time.monotonic() - started < 3  # the upstream stream was closed, not read to its end


def test_only_the_valid_call_of_a_repaired_reply_is_streamed(upstream, proxy):
    upstream.sse("/completion", pieces('TOOL: get_weather ARGS: {"town": "Paris"}'))
    upstream.sse("/completion", pieces('TOOL: get_weather ARGS: {"city": "Paris"}'))
    resp, events = stream(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.headers[REPAIRS_HEADER] == "1"
    deltas = [
        e["choices"][0]["delta"]["tool_calls"][0]
        for _, e in events
        if isinstance(e, dict) and e["choices"] and "tool_calls" in e["choices"][0]["delta"]
    ]
    assert len([d for d in deltas if "id" in d]) == 1
    assert json.loads("".join(d["function"]["arguments"] for d in deltas)) == {"city": "Paris"}
    assert events[0][1]["choices"][0]["delta"] == {"role": "assistant", "content": None}


def test_a_streamed_prefill_sends_only_what_the_model_added(upstream, proxy):
    upstream.sse("/completion", pieces(" Paris", ", on the Seine, a city of many bridges."), chunk_delay=0.01)
    _, events = stream(
        proxy,
        {
            "messages": [
                {"role": "user", "content": "Capital of France?"},
                {"role": "assistant", "content": "The capital is"},
            ]
        },
    )
    assert content_of(events) == " Paris, on the Seine, a city of many bridges."


def test_a_failure_before_the_stream_is_an_error_status(upstream, proxy):
    upstream.json("/completion", {"error": {"message": "boom"}}, status=500, repeat=True)
    resp, _ = stream(proxy, {"messages": ASK})
    assert resp.status_code == 502 and resp.json()["error"]["code"] == "upstream_error"


def test_required_never_met_while_streaming_is_an_error_status(upstream, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said("ANSWER: no"))
    resp, _ = stream(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "tool_choice_not_met"


def test_a_failure_after_the_stream_began_is_an_error_event(upstream, proxy):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: the first words of a long answer", "stop": False},
            {"content": " and more of it", "stop": False},
        ],
        cut=True,
        chunk_delay=0.05,
    )
    resp, events = stream(proxy, {"messages": ASK})
    assert resp.status_code == 200
    assert content_of(events).startswith("the first words")
    errors = [e for _, e in events if isinstance(e, dict) and "error" in e]
    assert errors and errors[0]["error"]["type"] in ("upstream_error", "upstream_unavailable")
    assert events[-1][1] == "[DONE]"
