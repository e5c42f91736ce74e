"""The proxy in front of a scripted llama.cpp server: conversion, repairs, tool_choice,
streaming, every error status, slots, a client that goes away."""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from httpfake import FakeServer, closed_port_url
from proxykit import said, start

from textagent.protocol import ToolCall
from textagent.proxy import REPAIRS_HEADER, ProxyConfig, ProxyServer, Upstream, UpstreamConfig
from textagent.steps import Step

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def post(proxy: ProxyServer, body, **kw) -> requests.Response:
    return requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=30, **kw)


def prompts_sent(srv: FakeServer) -> list[dict]:
    return srv.bodies("/completion")


def test_a_call_comes_back_as_tool_calls(upstream, proxy):
    upstream.json("/completion", said('Thought: look it up\nTOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"model": "m", "messages": ASK, "tools": [WEATHER, TIME]})
    assert resp.status_code == 200 and resp.headers[REPAIRS_HEADER] == "0"
    data = resp.json()
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert data["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 12,
        "total_tokens": 112,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    sent = prompts_sent(upstream)[0]
    assert "get_weather" in sent["prompt"] and sent["prompt"].endswith(
        "Weather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "OBSERVATION" in sent["stop"] and "grammar" not in sent


def test_the_example_style_reads_the_placeholder_exchanges_for_the_clients_tools(upstream):
    """``ProxyConfig(example_style=)`` (``textagent proxy --example-style``): the worked examples
    for a client's tools without examples are shown in that style; an unknown style is refused
    when the proxy is configured, not at its first request."""
    upstream.json("/completion", said("ANSWER: It is sunny."), repeat=True)
    shown = {}
    for style in ("placeholder", "concrete"):
        proxy = start(upstream, example_style=style)
        try:
            assert post(proxy, {"model": "m", "messages": ASK, "tools": [WEATHER, TIME]}).status_code == 200
        finally:
            proxy.stop()
        shown[style] = prompts_sent(upstream)[-1]["prompt"]
    assert "(what get_weather returned)" in shown["placeholder"] and "The result is 42." not in shown["placeholder"]
    assert "The result is 42." in shown["concrete"] and "returned)" not in shown["concrete"]
    with pytest.raises(ValueError, match="unknown example style 'bracketed'; choose one of placeholder, concrete"):
        ProxyConfig(example_style="bracketed")


def test_the_example_tool_choice_shows_the_tools_closest_to_the_first_question(upstream):
    """``ProxyConfig(example_tool="closest")``: the examples show the client's tool closest to
    the conversation's first user message; a later turn starts with the same examples."""
    upstream.json("/completion", said("ANSWER: It is noon."), repeat=True)
    asked = [{"role": "user", "content": "What time is it in Lima?"}]
    for choice, first in (("first", "get_weather"), ("closest", "get_time")):
        proxy = start(upstream, example_tool=choice)
        try:
            assert post(proxy, {"model": "m", "messages": asked, "tools": [WEATHER, TIME]}).status_code == 200
            later = [*asked, {"role": "assistant", "content": "It is noon."}, {"role": "user", "content": "Rain?"}]
            assert post(proxy, {"model": "m", "messages": later, "tools": [WEATHER, TIME]}).status_code == 200
        finally:
            proxy.stop()
        one, two = (p["prompt"] for p in prompts_sent(upstream)[-2:])
        assert re.search(r"TOOL: (\w+) ARGS", one).group(1) == first
        assert two.startswith(one.rsplit("<|im_start|>assistant", 1)[0])  # the cache holds
    with pytest.raises(ValueError, match="unknown example tool choice 'best'"):
        ProxyConfig(example_tool="best")


def test_an_answer_comes_back_as_content(upstream, proxy):
    upstream.json("/completion", said("ANSWER: It is sunny."))
    data = post(proxy, {"messages": ASK, "tools": [WEATHER]}).json()
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "It is sunny."}
    assert data["choices"][0]["finish_reason"] == "stop"


def test_an_answer_cut_by_max_tokens_finishes_with_length(upstream, proxy):
    upstream.json("/completion", said("ANSWER: It is sun", stop_type="limit"))
    data = post(proxy, {"messages": ASK, "tools": [WEATHER], "max_tokens": 5}).json()
    assert data["choices"][0]["finish_reason"] == "length"
    assert prompts_sent(upstream)[0]["n_predict"] == 5


@pytest.mark.parametrize(
    "bad, expected",
    [
        ('TOOL: get_weather ARGS: {"city": "Paris"', "format error"),  # does not parse
        ('TOOL: get_wether ARGS: {"city": "Paris"}', "unknown tool"),  # no such tool
        ('TOOL: get_weather ARGS: {"town": "Paris"}', "city"),  # fails the schema
    ],
)
def test_a_bad_reply_is_repaired_inside_the_proxy(upstream, proxy, bad, expected):
    upstream.json("/completion", said(bad))
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.headers[REPAIRS_HEADER] == "1"
    call = resp.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    first, second = prompts_sent(upstream)
    feedback = second["prompt"][len(first["prompt"]) :]
    assert feedback.startswith(bad) and expected in feedback
    assert resp.json()["usage"]["completion_tokens"] == 24  # both attempts are counted


def test_a_repair_validates_calls_without_running_anything(upstream, proxy, monkeypatch):
    from textagent.tools import Tool, ToolSet

    ran = []
    monkeypatch.setattr(ToolSet, "execute", lambda self, call, **kw: ran.append(("execute", call)))
    monkeypatch.setattr(Tool, "__call__", lambda self, *a, **kw: ran.append(("call", self.name)))
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris", "days": "two"}'))
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris", "days": 2}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.headers[REPAIRS_HEADER] == "1"
    call = resp.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"city": "Paris", "days": 2}
    first, second = prompts_sent(upstream)
    assert "is not of type 'integer'" in second["prompt"][len(first["prompt"]) :]
    assert ran == []


def test_when_repairs_run_out_the_client_gets_the_words_without_protocol_lines(upstream, proxy):
    for _ in range(3):
        upstream.json("/completion", said('Thought: I will look it up.\nTOOL: nope ARGS: {"x": 1}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.headers[REPAIRS_HEADER] == "2"
    message = resp.json()["choices"][0]["message"]
    assert "tool_calls" not in message and message["content"] == "I will look it up."
    assert resp.json()["choices"][0]["finish_reason"] == "stop"


def test_when_repairs_run_out_with_no_words_the_client_gets_an_empty_answer(upstream, proxy):
    for _ in range(3):
        upstream.json("/completion", said('TOOL: nope ARGS: {"x": 1}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"] == ""
    assert "TOOL" not in resp.text


def test_valid_calls_survive_when_repairs_run_out(upstream, proxy):
    for _ in range(3):
        upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Rome"}\nTOOL: get_weather ARGS: {}'))
    message = post(proxy, {"messages": ASK, "tools": [WEATHER]}).json()["choices"][0]["message"]
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [{"city": "Rome"}]


def test_two_calls_in_one_turn_and_parallel_tool_calls_false(upstream, proxy):
    two = 'TOOL: get_weather ARGS: {"city": "Paris"}\nTOOL: get_time ARGS: {"city": "Paris"}'
    upstream.json("/completion", said(two))
    upstream.json("/completion", said(two))
    calls = post(proxy, {"messages": ASK, "tools": [WEATHER, TIME]}).json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert len({c["id"] for c in calls}) == 2
    calls = post(proxy, {"messages": ASK, "tools": [WEATHER, TIME], "parallel_tool_calls": False}).json()
    assert len(calls["choices"][0]["message"]["tool_calls"]) == 1
    assert "grammar" not in prompts_sent(upstream)[1]  # text mode + auto: free text


def test_tool_choice_none_holds_the_model_to_an_answer(upstream, proxy):
    upstream.json("/completion", said("ANSWER: no tools needed"))
    data = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "none"}).json()
    assert data["choices"][0]["message"]["content"] == "no tools needed"
    grammar = prompts_sent(upstream)[0]["grammar"]
    assert grammar.splitlines()[0].endswith("answer") and "get_weather" not in grammar


def test_tool_choice_none_repairs_a_call_where_no_grammar_holds(upstream, proxy):
    proxy.upstream.takes_grammar = False
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: fine"))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "none"})
    assert resp.headers[REPAIRS_HEADER] == "1" and resp.json()["choices"][0]["message"]["content"] == "fine"
    assert "No tool may be called" in prompts_sent(upstream)[1]["prompt"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_required_and_named_tool_choice_hold_the_model_to_a_call(upstream, proxy, choice):
    upstream.json("/completion", said('TOOL: get_time ARGS: {"city": "Paris"}'))
    data = post(proxy, {"messages": ASK, "tools": [WEATHER, TIME], "tool_choice": choice}).json()
    assert data["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time"
    grammar = prompts_sent(upstream)[0]["grammar"]
    assert grammar.splitlines()[0].endswith("calls")
    assert ("get_weather" in grammar) == (choice == "required")


def test_required_repairs_an_answer_where_no_grammar_holds(upstream, proxy):
    proxy.upstream.takes_grammar = False
    upstream.json("/completion", said("ANSWER: sunny"))
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
    assert resp.headers[REPAIRS_HEADER] == "1"
    assert resp.json()["choices"][0]["finish_reason"] == "tool_calls"


def test_constrained_mode_sends_the_tools_grammar(upstream):
    proxy = start(upstream, mode="constrained")
    try:
        upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
        post(proxy, {"messages": ASK, "tools": [WEATHER], "temperature": 0.5, "seed": 7, "stop": ["END"]})
        sent = prompts_sent(upstream)[0]
        assert "tool-get-weather" in sent["grammar"] and "(calls | answer)" in sent["grammar"]
        assert sent["temperature"] == 0.5 and sent["seed"] == 7 and "END" in sent["stop"]
        assert "OBSERVATION" not in sent["stop"]
    finally:
        proxy.stop()


def test_the_conversation_is_append_only_across_turns(upstream, proxy):
    """Turn 2's prompt starts with turn 1's prompt and the model's own reply (repairs included)."""
    upstream.json("/completion", said("TOOL: get_weather ARGS: {city: Paris"))
    upstream.json("/completion", said('Thought: again\nTOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny in Paris."))
    first = post(proxy, {"messages": ASK, "tools": [WEATHER]}).json()["choices"][0]["message"]
    assert first["content"] is None
    result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "sunny, 24 C"}
    second = post(proxy, {"messages": [*ASK, first, result], "tools": [WEATHER]}).json()
    assert second["choices"][0]["message"]["content"] == "Sunny in Paris."
    sent = [b["prompt"] for b in prompts_sent(upstream)]
    assert sent[2].startswith(sent[1] + 'Thought: again\nTOOL: get_weather ARGS: {"city": "Paris"}')
    assert sent[2].endswith("OBSERVATION (get_weather): sunny, 24 C<|im_end|>\n<|im_start|>assistant\n")
    assert [b["id_slot"] for b in prompts_sent(upstream)] == [0, 0, 0]


def test_each_conversation_keeps_its_own_record_of_the_model_text(upstream, proxy):
    """Two conversations get the same call; only the first needed a repair, and only its next
    turn repeats that repair."""
    call = 'TOOL: get_weather ARGS: {"city": "Paris"}'
    for reply in ("TOOL: get_weather ARGS: {", call, call, "ANSWER: a", "ANSWER: b"):
        upstream.json("/completion", said(reply))
    other = [{"role": "user", "content": "Paris weather, please."}]
    firsts = [post(proxy, {"messages": m, "tools": [WEATHER]}).json()["choices"][0]["message"] for m in (ASK, other)]
    for m, first in zip((ASK, other), firsts):
        result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "sun"}
        post(proxy, {"messages": [*m, first, result], "tools": [WEATHER]})
    sent = [b["prompt"] for b in prompts_sent(upstream)]
    assert sent[3].startswith(sent[1] + call) and "format error" in sent[3]
    assert sent[4].startswith(sent[2] + call) and "format error" not in sent[4]


def test_a_conversation_the_proxy_did_not_see_is_written_canonically(upstream, proxy):
    upstream.json("/completion", said("ANSWER: ok"))
    messages = [
        {"role": "system", "content": "Be brief."},
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "x1", "content": "rain"},
        {"role": "assistant", "content": "Rain."},
        {"role": "user", "content": [{"type": "text", "text": "And?"}]},
    ]
    assert post(proxy, {"messages": messages, "tools": [WEATHER]}).status_code == 200
    prompt = prompts_sent(upstream)[0]["prompt"]
    assert "Be brief." in prompt.split("<|im_end|>")[0]
    assert 'TOOL: get_weather ARGS: {"city": "Paris"}<|im_end|>' in prompt
    assert "OBSERVATION (get_weather): rain" in prompt and "ANSWER: Rain.<|im_end|>" in prompt


def sse_events(resp: requests.Response) -> list:
    events = []
    for line in resp.iter_lines():
        if line.startswith(b"data: "):
            data = line[6:].decode()
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_streamed_tool_calls_in_openai_delta_format(upstream, proxy):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(
        proxy,
        {"messages": ASK, "tools": [WEATHER], "stream": True, "stream_options": {"include_usage": True}},
        stream=True,
    )
    assert resp.headers["content-type"].startswith("text/event-stream") and resp.headers[REPAIRS_HEADER] == "0"
    events = sse_events(resp)
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [
        e["choices"][0]["delta"]["tool_calls"][0]
        for e in events[:-1]
        if e["choices"] and "tool_calls" in e["choices"][0]["delta"]
    ]
    assert deltas[0]["id"].startswith("call_") and deltas[0]["function"]["name"] == "get_weather"
    assert json.loads("".join(d["function"]["arguments"] for d in deltas)) == {"city": "Paris"}
    assert events[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["total_tokens"] == 112


def test_streamed_content(upstream, proxy):
    text = "word " * 40
    upstream.json("/completion", said("ANSWER: " + text))
    events = sse_events(post(proxy, {"messages": ASK, "stream": True}, stream=True))
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1] if e["choices"])
    assert content == text.strip() and events[-2]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in e for e in events[:-1])


# -- errors -----------------------------------------------------------------------------------


def error_of(resp: requests.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert "Traceback" not in resp.text
    return error


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"messages": ASK, "n": 2}, "n"),
        (
            {
                "messages": ASK,
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}},
                        },
                    }
                ],
            },
            "tools[0].function",
        ),
        (
            {
                "messages": ASK,
                "tools": [
                    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": "a"}}}
                ],
            },
            "tools[0].function",
        ),
        ({"messages": []}, "messages"),
        (
            {"messages": ASK, "tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"messages": [*ASK, {"role": "tool", "tool_call_id": "nobody", "content": "1"}]}, "messages[1].tool_call_id"),
        ({"messages": ASK, "temperature": "hot"}, "temperature"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0].content[0]",
        ),
    ],
)
def test_bad_requests_are_400_with_the_parameter(upstream, proxy, body, param):
    assert error_of(post(proxy, body), 400)["param"] == param
    assert not prompts_sent(upstream)


def test_malformed_json_is_400(proxy):
    resp = requests.post(
        proxy.url + "/v1/chat/completions",
        data=b'{"messages": [',
        timeout=10,
        headers={"content-type": "application/json"},
    )
    assert error_of(resp, 400)["code"] == "invalid_json"


def test_a_body_over_the_limit_is_413(upstream):
    proxy = start(upstream, max_body_bytes=1000)
    try:
        error_of(post(proxy, {"messages": [{"role": "user", "content": "x" * 2000}]}), 413)
        chunked = requests.post(proxy.url + "/v1/chat/completions", data=iter([b"{" + b" " * 600] * 3), timeout=10)
        error_of(chunked, 413)
    finally:
        proxy.stop()


def test_a_body_that_stops_arriving_is_408(upstream):
    proxy = start(upstream, body_timeout=0.5)
    try:
        host, port = proxy.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"mess')
            answer = b""
            while b"request_timeout" not in answer:  # the answer may come in several pieces
                piece = sock.recv(65536)
                if not piece:
                    break
                answer += piece
        assert answer.startswith(b"HTTP/1.1 408") and b'"code":"request_timeout"' in answer
    finally:
        proxy.stop()


def test_the_api_key_is_required_when_set(upstream):
    proxy = start(upstream, api_key="sekret")
    try:
        upstream.json("/completion", said("ANSWER: hi"))
        error_of(post(proxy, {"messages": ASK}), 401)
        error_of(post(proxy, {"messages": ASK}, headers={"Authorization": "Bearer wrong"}), 401)
        error_of(requests.get(proxy.url + "/v1/models", timeout=10), 401)
        assert post(proxy, {"messages": ASK}, headers={"Authorization": "Bearer sekret"}).status_code == 200
        assert requests.get(proxy.url + "/health", timeout=10).status_code == 200
    finally:
        proxy.stop()


def test_an_upstream_error_is_502(upstream, proxy):
    upstream.json("/completion", {"error": {"message": "boom"}}, status=500, repeat=True)
    assert error_of(post(proxy, {"messages": ASK}), 502)["code"] == "upstream_error"


def test_an_upstream_timeout_is_504(upstream):
    proxy = start(upstream, timeout=0.3)
    try:
        upstream.json("/completion", said("ANSWER: late"), delay=2, repeat=True)
        assert error_of(post(proxy, {"messages": ASK}), 504)["code"] == "upstream_timeout"
    finally:
        proxy.stop()


def test_an_upstream_that_went_away_is_503(upstream, proxy):
    proxy.upstream.backend.url = closed_port_url()
    proxy.upstream.backend.retries = 0
    assert error_of(post(proxy, {"messages": ASK}), 503)["code"] == "upstream_unreachable"


def test_health_answers_while_the_upstream_is_down_and_requests_get_503(caplog):
    # long enough to be seen starting on a busy machine; the test waits the start out, so that
    # its failure is logged here and not into a later test's output
    up = Upstream(UpstreamConfig(endpoint=closed_port_url(), chat_format="chatml", timeout=8))
    with ProxyServer(up) as proxy:
        health = requests.get(proxy.url + "/health", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "starting"
        assert health.json()["upstream"]["state"] == "starting"
        assert error_of(post(proxy, {"messages": ASK}), 503)["code"] == "upstream_starting"
        up.state = "failed"
        assert error_of(post(proxy, {"messages": ASK}), 503)["code"] == "upstream_failed"
        assert error_of(requests.get(proxy.url + "/v1/nothing", timeout=5), 404)
        assert error_of(requests.get(proxy.url + "/v1/chat/completions", timeout=5), 405)
        assert up.wait(60) and up.state == "failed" and "no server at" in up.detail
    assert "upstream failed to start: no server at" in caplog.text


def test_models_and_health(upstream, proxy):
    assert requests.get(proxy.url + "/v1/models", timeout=5).json()["data"][0]["object"] == "model"
    assert requests.get(proxy.url + "/health", timeout=5).json() == {
        "status": "ok",
        "upstream": {"state": "ready", "url": upstream.url},
    }


# -- concurrency and clients that go away -------------------------------------------------------


def test_requests_in_flight_use_the_upstream_slots(upstream):
    proxy = start(upstream, parallel=2, timeout=30)
    try:
        upstream.json("/completion", said("ANSWER: a"), delay=8)
        upstream.json("/completion", said("ANSWER: b"), delay=8)
        results = []
        asks = [[{"role": "user", "content": q}] for q in ("one?", "two?")]
        threads = [threading.Thread(target=lambda m=m: results.append(post(proxy, {"messages": m}))) for m in asks]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert time.monotonic() - started < 14  # both at once: one after the other takes 16 s
        assert all(r.status_code == 200 for r in results)
        assert sorted(b["id_slot"] for b in prompts_sent(upstream)) == [0, 1]
    finally:
        proxy.stop()


def test_a_proxy_given_slots_uses_those_alone(upstream):
    upstream.json("/props", {"total_slots": 3}, repeat=True)
    upstream.json("/completion", said("ANSWER: a"), repeat=True)
    proxy = start(upstream, slots=(2,))
    try:
        for q in ("one?", "two?"):
            assert post(proxy, {"messages": [{"role": "user", "content": q}]}).status_code == 200
        assert [b["id_slot"] for b in prompts_sent(upstream)] == [2, 2]
    finally:
        proxy.stop()


@pytest.mark.parametrize(
    "api, slots, said_",
    [
        ("llamacpp", (1, 2), "the server has slots 0 to 1"),
        ("completions", (0,), "needs a llama.cpp upstream"),
    ],
)
def test_slots_the_upstream_cannot_pin_fail_the_upstream_with_the_reason(upstream, api, slots, said_):
    upstream.json("/props", {"total_slots": 2}, repeat=True)
    up = Upstream(UpstreamConfig(endpoint=upstream.url, api=api, model="m", chat_format="chatml", slots=slots))
    up.start()
    assert up.wait(10) and up.state == "failed" and said_ in up.detail


def test_a_request_that_finds_no_free_slot_in_time_is_503(upstream):
    proxy = start(upstream, parallel=1, slot_wait=0.2, timeout=30)
    try:
        upstream.json("/completion", said("ANSWER: slow"), delay=3.0)
        first = threading.Thread(target=post, args=(proxy, {"messages": ASK}))
        first.start()
        deadline = time.monotonic() + 10  # the first request holds the slot: it reached the upstream
        while not any(r.path == "/completion" for r in upstream.requests) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert error_of(post(proxy, {"messages": ASK}), 503)["code"] == "upstream_busy"
        first.join()
    finally:
        proxy.stop()


def test_a_bug_is_a_500_with_an_openai_body_not_a_traceback(upstream, proxy, monkeypatch):
    monkeypatch.setattr(proxy.upstream, "options", lambda slot: 1 / 0)
    assert error_of(post(proxy, {"messages": ASK}), 500)["type"] == "server_error"


def test_a_client_that_disconnects_mid_stream_frees_the_slot(upstream, proxy):
    slow = (
        [{"content": "ANSWER: ", "stop": False}]
        + [{"content": "x", "stop": False}] * 300
        + [{"content": "", "stop": True, "stop_type": "eos"}]
    )
    upstream.sse("/completion", slow, chunk_delay=0.1)
    body = json.dumps({"messages": ASK, "stream": True}).encode()
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        time.sleep(0.5)
    # the only slot is free again long before the 30 s stream would have ended (bound generously)
    upstream.json("/completion", said("ANSWER: next"))
    started = time.monotonic()
    resp = post(proxy, {"messages": ASK})
    assert resp.json()["choices"][0]["message"]["content"] == "next"
    assert time.monotonic() - started < 15


def test_a_trace_per_request(upstream, tmp_path):
    proxy = start(upstream, trace_dir=tmp_path)
    try:
        upstream.json("/completion", said("TOOL: nope"))
        upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Oslo"}'))
        resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
        (path,) = tmp_path.iterdir()
        trace = json.loads(path.read_text())
        assert path.stem == resp.json()["id"] and trace["repairs"] == 1 and trace["status"] == 200
        first, second = trace["attempts"]
        assert [a["type"] for a in trace["attempts"]] == ["step", "step"] and [first["step"], second["step"]] == [1, 2]
        assert [first["raw"], second["raw"]] == ["TOOL: nope", 'TOOL: get_weather ARGS: {"city": "Oslo"}']
        assert first["calls"] == [{"name": "nope", "args": {}}] and first["parse_error"] is None
        assert len(first["observations"]) == 1 and "unknown tool" in first["observations"][0]
        assert first["usage"]["completion_tokens"] == 12 and first["finish_reason"] == "stop"
        call = resp.json()["choices"][0]["message"]["tool_calls"][0]
        assert second["calls"] == [{"name": "get_weather", "args": {"city": "Oslo"}}] and not second["observations"]
        assert second["details"] == {
            "accepted": [{"id": call["id"], "name": "get_weather", "arguments": call["function"]["arguments"]}]
        }
    finally:
        proxy.stop()


def test_the_trace_of_a_422_holds_the_attempts_that_failed(upstream, tmp_path):
    """Hardening round 4, O1: `attempts: null` in exactly the trace whose attempts are needed."""
    proxy = start(upstream, trace_dir=tmp_path, max_repairs=2)
    try:
        for _ in range(3):
            upstream.json("/completion", said("ANSWER: I will not call anything."))
        resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
        assert resp.status_code == 422 and resp.json()["error"]["code"] == "tool_choice_not_met"
        (path,) = tmp_path.iterdir()
        trace = json.loads(path.read_text())
    finally:
        proxy.stop()
    assert trace["status"] == 422 and trace["repairs"] == 2 and "response" not in trace
    assert [a["raw"] for a in trace["attempts"]] == ["ANSWER: I will not call anything."] * 3
    assert trace["error"]["code"] == "tool_choice_not_met"


def test_a_trace_attempt_reads_back_as_a_step(upstream, tmp_path):
    proxy = start(upstream, trace_dir=tmp_path, max_repairs=1)
    try:
        upstream.json("/completion", said('TOOL: get_weather ARGS: {"town": "Oslo"}'))
        upstream.json("/completion", said("Let me see.\nTOOL: get_weather ARGS: {"))
        resp = post(proxy, {"messages": ASK, "tools": [WEATHER]})
        assert resp.json()["choices"][0]["message"]["content"] == "Let me see."
        (path,) = tmp_path.iterdir()
        records = json.loads(path.read_text())["attempts"]
    finally:
        proxy.stop()
    first, last = (Step.from_record(r) for r in records)
    assert first.index == 1 and first.calls == [ToolCall("get_weather", {"town": "Oslo"})] and first.parse_error is None
    assert "city" in first.observations[0] and first.details == {}  # sent back: the repair
    assert last.index == 2 and last.reply is None and last.parse_error.label == "unbalanced_braces"
    assert last.details == {"feedback_sent": False} and last.observations  # no repair left to send it
    assert [s.to_record() for s in (first, last)] == records


def test_an_openai_completions_upstream_has_no_grammar_and_the_repairs_hold_tool_choice():
    with FakeServer() as srv:
        up = Upstream(
            UpstreamConfig(endpoint=srv.url, api="completions", model="m", chat_format="chatml", parallel=1, timeout=5)
        )
        with ProxyServer(up) as proxy:
            assert up.wait(10) and up.state == "ready" and not up.takes_grammar
            for text in ("ANSWER: sunny", 'TOOL: get_weather ARGS: {"city": "Paris"}'):
                srv.json(
                    "/v1/completions",
                    {
                        "choices": [{"text": text, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 5},
                    },
                )
            resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
            assert resp.headers[REPAIRS_HEADER] == "1"
            assert resp.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
            sent = srv.bodies("/v1/completions")
            assert all("grammar" not in b and b["model"] == "m" for b in sent)
            assert "This reply must call a tool" in sent[1]["prompt"]


def test_a_made_up_argument_name_is_repaired_when_the_schema_lists_the_names(upstream, proxy):
    """Issue 40, fault 4: create_ticket(..., priority=2) went through unrepaired."""
    upstream.json("/completion", said('TOOL: get_time ARGS: {"city": "Oslo", "units": "metric"}'))
    upstream.json("/completion", said('TOOL: get_time ARGS: {"city": "Oslo"}'))
    resp = post(proxy, {"messages": ASK, "tools": [TIME]})  # its schema lists `city`, says nothing of others
    assert resp.headers[REPAIRS_HEADER] == "1", resp.text
    (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    feedback = upstream.bodies("/completion")[1]["prompt"]
    assert "unexpected argument `units`" in feedback and "valid arguments: city" in feedback
