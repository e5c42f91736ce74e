"""The proxy against hostile or odd requests, replies and clients (docs/hardening.md): each
fault here once gave a 500, a 502, a client-visible non-JSON, a blocked event loop or an open
door for web pages; the scripted upstream is tests/httpfake.py's FakeServer, as in
test_proxy_scripted.py."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from httpfake import FakeServer, closed_port_url
from proxykit import said, start

from textagent.proxy import REPAIRS_HEADER, ProxyServer
from textagent.tools import Tool

ASK = [{"role": "user", "content": "Weather in Paris?"}]
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def function(name: str = "get_weather", parameters: dict | None = None, description=None) -> dict:
    spec: dict = {"name": name, "parameters": CITY if parameters is None else parameters}
    if description is not None:
        spec["description"] = description
    return {"type": "function", "function": spec}


def post(proxy: ProxyServer, body, **kw) -> requests.Response:
    kw.setdefault("timeout", 60)
    return requests.post(proxy.url + "/v1/chat/completions", json=body, **kw)


def post_raw(proxy: ProxyServer, data: bytes, headers: dict | None = None) -> requests.Response:
    return requests.post(
        proxy.url + "/v1/chat/completions",
        data=data,
        timeout=60,
        headers={"content-type": "application/json", **(headers or {})},
    )


def prompts_sent(srv: FakeServer) -> list[dict]:
    return srv.bodies("/completion")


def error_of(resp: requests.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert "Traceback" not in resp.text
    return error


def strict(text: str | bytes):
    """JSON as RFC 8259 has it (json.loads takes NaN and Infinity)."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def call_of(resp: requests.Response) -> dict:
    assert resp.status_code == 200, resp.text
    (call,) = strict(resp.content)["choices"][0]["message"]["tool_calls"]
    return call["function"]


# -- P1: boolean subschemas ----------------------------------------------------------------------


def test_a_tool_with_boolean_subschemas_is_usable(upstream, proxy):
    schema = {
        "type": "object",
        "properties": {
            "a": True,
            "b": False,
            "c": {"type": "array", "items": True},
            "d": {"anyOf": [True, {"type": "string"}]},
        },
        "required": ["a"],
    }
    upstream.json("/completion", said('TOOL: f ARGS: {"a": 1'))  # a format error: feedback reads the schema
    upstream.json("/completion", said('TOOL: f ARGS: {"a": [1], "c": [2]}'))
    resp = post(proxy, {"messages": ASK, "tools": [function("f", schema)]})
    assert resp.headers[REPAIRS_HEADER] == "1"
    assert strict(call_of(resp)["arguments"]) == {"a": [1], "c": [2]}
    prompt = prompts_sent(upstream)[0]["prompt"]
    assert "    a (any)\n" in prompt and "    d (any or string, optional)\n" in prompt
    assert "    b (" not in prompt  # `false`: a key that must not be passed is not listed
    # and in constrained mode, under the tools' grammar
    constrained = start(upstream, mode="constrained")
    try:
        upstream.json("/completion", said('TOOL: f ARGS: {"a": "x"}'))
        assert strict(call_of(post(constrained, {"messages": ASK, "tools": [function("f", schema)]}))["arguments"]) == {
            "a": "x"
        }
    finally:
        constrained.stop()


# -- P2: tool_choice naming a function with a list or an object ------------------------------------


@pytest.mark.parametrize("name", [["get_weather"], {"n": "get_weather"}, 3, None])
def test_a_tool_choice_name_that_is_not_a_string_is_400(upstream, proxy, name):
    resp = post(
        proxy, {"messages": ASK, "tools": [function()], "tool_choice": {"type": "function", "function": {"name": name}}}
    )
    assert error_of(resp, 400)["param"] == "tool_choice.function.name"
    assert not prompts_sent(upstream)


# -- P3: tool call arguments nested 5,000 deep ---------------------------------------------------


@pytest.mark.parametrize("as_string", [True, False])
def test_deeply_nested_arguments_in_the_conversation_are_400(upstream, proxy, as_string):
    depth = 5000 if as_string else 200  # a 5,000-deep object would not get past the body's own JSON reader
    deep = "[" * depth + "]" * depth
    arguments = '{"city": %s}' % deep
    messages = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments if as_string else json.loads(arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
    ]
    error = error_of(post_raw(proxy, json.dumps({"messages": messages, "tools": [function()]}).encode()), 400)
    assert error["param"] == "messages[1].tool_calls[0].function.arguments" and "nested too deeply" in error["message"]
    assert not prompts_sent(upstream)


def test_a_body_nested_too_deeply_to_read_is_400(proxy):
    error = error_of(post_raw(proxy, b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 400)
    assert error["code"] == "invalid_json"


# -- P4: schemas nested 150 levels of properties, 100 of anyOf -------------------------------------


def nested(levels: int, key: str) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}} if key == "properties" else {"anyOf": [schema]}
    return {"type": "object", "properties": {"a": schema}}


@pytest.mark.parametrize("levels, key", [(150, "properties"), (100, "anyOf"), (5000, "properties")])
def test_a_schema_nested_too_deep_is_a_clear_400(upstream, proxy, levels, key):
    with pytest.raises(ValueError, match="nested too deep"):
        Tool.from_openai(function("f", nested(levels, key)))
    with pytest.raises(ValueError, match="nested too deep"):
        Tool("f", "", nested(levels, key))
    if levels < 1000:  # deeper does not get past the body's JSON reader (a 400 too)
        error = error_of(post(proxy, {"messages": ASK, "tools": [function("f", nested(levels, key))]}), 400)
        assert "nested too deep" in error["message"] and error["param"] == "tools[0].function"
    assert not prompts_sent(upstream)


def test_a_schema_within_the_depth_limit_still_works(upstream, proxy):
    upstream.json("/completion", said("ANSWER: ok"))
    schema = nested(20, "properties")
    assert Tool.from_openai(function("f", schema)).name == "f"
    assert post(proxy, {"messages": ASK, "tools": [function("f", schema)]}).status_code == 200


# -- P5: a tool name the text protocol cannot write ----------------------------------------------


def test_a_tool_name_the_protocol_cannot_write_is_mapped_and_back(upstream, proxy):
    tools = [function("погода", description="Weather for a city."), function("tool"), function("get weather")]
    upstream.json("/completion", said('TOOL: tool_2 ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"messages": ASK, "tools": tools})
    call = call_of(resp)
    assert call["name"] == "погода" and strict(call["arguments"]) == {"city": "Paris"}
    prompt = prompts_sent(upstream)[0]["prompt"]
    assert "tool_2" in prompt and "погода" in prompt and "get_weather" in prompt  # the model reads both names
    # the next turn: the client sends the call back under its own name; the prompt grows append-only
    first = strict(resp.content)["choices"][0]["message"]
    upstream.json("/completion", said('TOOL: tool_2 ARGS: {"city": "Rome"}'))
    result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "sun"}
    again = post(
        proxy,
        {
            "messages": [*ASK, first, result],
            "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": "погода"}},
        },
    )
    assert call_of(again)["name"] == "погода"
    assert again.headers[REPAIRS_HEADER] == "0"
    sent = [b["prompt"] for b in prompts_sent(upstream)]
    assert sent[1].startswith(sent[0] + 'TOOL: tool_2 ARGS: {"city": "Paris"}')
    assert "OBSERVATION (tool_2): sun" in sent[1]


def test_a_name_only_a_line_end_makes_unwritable_is_mapped_like_any_other(upstream, proxy):
    """The proxy keeps a client's name as written only when the protocol's one rule takes it
    (protocol.types.is_tool_name): ``grep\\n`` is written ``grep``, not refused as a bad tool."""
    upstream.json("/completion", said('TOOL: grep ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"messages": ASK, "tools": [function("grep\n")]})
    assert resp.status_code == 200, resp.text
    assert call_of(resp)["name"] == "grep\n"


def test_two_tools_with_one_name_are_400(proxy):
    assert (
        error_of(post(proxy, {"messages": ASK, "tools": [function("погода"), function("погода")]}), 400)["param"]
        == "tools"
    )


# -- P6: a description that is not a string --------------------------------------------------------


@pytest.mark.parametrize("description", [{"text": "x"}, ["x"], 3, True])
def test_a_description_that_is_not_a_string_is_400_naming_it(upstream, proxy, description):
    error = error_of(post(proxy, {"messages": ASK, "tools": [function(description=description)]}), 400)
    assert error["param"] == "tools[0].function.description" and "description" in error["message"]
    with pytest.raises(TypeError, match="description"):
        Tool.from_openai(function(description=description))
    assert not prompts_sent(upstream)


# -- P7: lone surrogates ---------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_message_or_an_argument_does_not_crash(upstream, proxy):
    upstream.json("/completion", said("ANSWER: ok"))
    ask = [{"role": "user", "content": "what is \ud800?"}]  # sent as its \ud800 escape
    assert post(proxy, {"messages": ask}).status_code == 200
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Par\\ud800is"}'))
    resp = post(proxy, {"messages": ask, "tools": [function()]})
    call = call_of(resp)
    assert strict(call["arguments"]) == {"city": "Par\ud800is"}
    assert "\ud800" not in call["arguments"]  # the arguments text itself is valid Unicode
    # streamed, and sent back on the next turn (the key of the remembered reply)
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "\\udc00"}'))
    streamed = post(proxy, {"messages": ask, "tools": [function()], "stream": True}, stream=True)
    assert streamed.status_code == 200 and b"[DONE]" in streamed.content
    first = strict(resp.content)["choices"][0]["message"]
    upstream.json("/completion", said("ANSWER: done"))
    result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "\udfff"}
    assert post(proxy, {"messages": [*ask, first, result], "tools": [function()]}).status_code == 200
    sent = [b["prompt"] for b in prompts_sent(upstream)]
    assert sent[3].startswith(sent[1] + 'TOOL: get_weather ARGS: {"city": "Par\\ud800is"}')


# -- P8: NaN in the request ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_a_temperature_that_is_not_a_json_number_is_400(upstream, proxy, value):
    body = b'{"messages": [{"role": "user", "content": "hi"}], "temperature": ' + value + b"}"
    error_of(post_raw(proxy, body), 400)
    assert not prompts_sent(upstream)


# -- P9: NaN or 1e999 written by the model --------------------------------------------------------


@pytest.mark.parametrize("written", ["NaN", "1e999", "-Infinity"])
def test_the_client_never_gets_arguments_that_are_not_json(upstream, proxy, written):
    schema = {"type": "object", "properties": {"x": {}}, "required": ["x"]}
    upstream.json("/completion", said('TOOL: f ARGS: {"x": %s}' % written))
    upstream.json("/completion", said('TOOL: f ARGS: {"x": 2.5}'))
    resp = post(proxy, {"messages": ASK, "tools": [function("f", schema)]})
    assert resp.headers[REPAIRS_HEADER] == "1" and strict(call_of(resp)["arguments"]) == {"x": 2.5}
    first, second = prompts_sent(upstream)
    assert "not a JSON number" in second["prompt"][len(first["prompt"]) :]
    # when the repairs run out with nothing usable: an empty answer, still no non-JSON arguments
    for _ in range(3):
        upstream.json("/completion", said('TOOL: f ARGS: {"x": [1, %s]}' % written))
    resp = post(proxy, {"messages": ASK, "tools": [function("f", schema)]})
    message = strict(resp.content)["choices"][0]["message"]
    assert resp.status_code == 200 and message == {"role": "assistant", "content": ""}


# -- P10: a long conversation costs linear time --------------------------------------------------


def test_the_transcript_of_a_long_conversation_is_linear(monkeypatch):
    from textagent.proxy.convert import parse_request
    from textagent.proxy.memory import ReplyMemory
    from textagent.proxy.transcript import transcript

    def conversation(turns: int) -> dict:
        messages = []
        for i in range(turns // 2):
            messages += [
                {"role": "user", "content": f"question {i} " + "x" * 30},
                {"role": "assistant", "content": f"answer {i} " + "y" * 30},
            ]
        return {"messages": [*messages, {"role": "user", "content": "last"}], "tools": [function()]}

    written = [0]
    dumps = json.dumps

    def counting(*args, **kwargs):
        text = dumps(*args, **kwargs)
        written[0] += len(text)
        return text

    def work(turns: int) -> int:
        request = parse_request(conversation(turns))
        written[0] = 0
        with monkeypatch.context() as patch:
            patch.setattr(json, "dumps", counting)
            out = transcript(request, ReplyMemory())
        assert len(out) > turns
        return written[0]

    small, large = work(500), work(2000)
    assert large <= 6 * small, (small, large)  # linear: 4x; it was 16x (every key re-wrote all turns)
    started = time.process_time()
    transcript(parse_request(conversation(2000)), ReplyMemory())
    assert time.process_time() - started < 5.0  # CPU seconds, not wall time: the load of the machine does not count


# -- P11/P12: the event loop is never blocked -------------------------------------------------------


def timed_health(proxy: ProxyServer) -> float:
    started = time.monotonic()
    assert requests.get(proxy.url + "/health", timeout=60).status_code == 200
    return time.monotonic() - started


def test_health_answers_while_thousands_of_tools_are_checked(upstream, proxy):
    tools = [
        function(
            f"tool_{i}",
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "enum": ["x", "y"]},
                    "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                },
            },
        )
        for i in range(3000)
    ]
    upstream.json("/completion", said("ANSWER: ok"), repeat=True)
    done: list[float] = []
    big = threading.Thread(
        target=lambda: (post(proxy, {"messages": ASK, "tools": tools}), done.append(time.monotonic()))
    )
    big.start()
    time.sleep(0.3)
    took = timed_health(proxy)
    answered = time.monotonic()
    big.join()
    # by events: /health answered while the big request was still being checked (the bound is
    # generous for a loaded 2-core machine; a blocked event loop waits the whole check out)
    assert answered < done[0] and took < 10, (took, done)


def test_health_answers_while_many_requests_wait_for_the_one_slot(upstream):
    proxy = start(upstream, parallel=1)
    try:
        upstream.json("/completion", said("ANSWER: slow"), delay=3)
        upstream.json("/completion", said("ANSWER: quick"), repeat=True)
        results: list[int] = []
        waiting = [
            threading.Thread(
                target=lambda i=i: results.append(
                    post(proxy, {"messages": [{"role": "user", "content": f"q{i}"}]}).status_code
                )
            )
            for i in range(44)
        ]
        for t in waiting:
            t.start()
        upstream.wait_for_requests(1, "/completion")  # one holds the slot, the others wait
        assert timed_health(proxy) < 1.0
        for t in waiting:
            t.join()
        assert results == [200] * 44
    finally:
        proxy.stop()


def test_a_full_queue_is_503_at_once(upstream):
    proxy = start(upstream, parallel=1, max_queue=2)
    try:
        upstream.json("/completion", said("ANSWER: slow"), delay=2)
        upstream.json("/completion", said("ANSWER: next"), repeat=True)
        results: list[int] = []
        first = threading.Thread(target=lambda: results.append(post(proxy, {"messages": ASK}).status_code))
        first.start()
        upstream.wait_for_requests(1, "/completion")  # the first holds the slot
        queued = [
            threading.Thread(target=lambda: results.append(post(proxy, {"messages": ASK}).status_code))
            for _ in range(2)
        ]
        for t in queued:
            t.start()
        time.sleep(0.4)
        started = time.monotonic()
        resp = post(proxy, {"messages": ASK})
        assert error_of(resp, 503)["code"] == "proxy_busy" and time.monotonic() - started < 1.0
        assert resp.headers["retry-after"]
        for t in [first, *queued]:
            t.join()
        assert results == [200, 200, 200]
    finally:
        proxy.stop()


# -- P13: a client that goes away while queued ---------------------------------------------------


def test_a_client_that_disconnects_while_queued_is_never_sent_upstream(upstream):
    proxy = start(upstream, parallel=1)
    try:
        upstream.json("/completion", said("ANSWER: slow"), delay=1.5)
        upstream.json("/completion", said("ANSWER: next"), repeat=True)
        first = threading.Thread(target=post, args=(proxy, {"messages": ASK}))
        first.start()
        upstream.wait_for_requests(1, "/completion")  # the first holds the slot
        body = json.dumps({"messages": [{"role": "user", "content": "gone?"}]}).encode()
        host, port = proxy.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            time.sleep(0.3)
        first.join()
        time.sleep(1.0)
        assert [b["prompt"].count("gone?") for b in prompts_sent(upstream)] == [0]
        assert post(proxy, {"messages": ASK}).json()["choices"][0]["message"]["content"] == "next"
    finally:
        proxy.stop()


# -- P16: web pages (CSRF, DNS rebinding) ---------------------------------------------------------


def test_a_web_page_of_another_origin_cannot_use_the_proxy(upstream, proxy):
    upstream.json("/completion", said("ANSWER: ok"), repeat=True)
    body = json.dumps({"messages": ASK}).encode()
    evil = requests.post(
        proxy.url + "/v1/chat/completions",
        data=body,
        timeout=10,
        headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
    )
    assert error_of(evil, 403)["code"] == "origin_not_allowed"
    rebound = requests.post(
        proxy.url + "/v1/chat/completions",
        data=body,
        timeout=10,
        headers={"Content-Type": "application/json", "Host": "evil.example:8000"},
    )
    assert error_of(rebound, 403)["code"] == "host_not_allowed"
    assert error_of(requests.get(proxy.url + "/health", headers={"Host": "evil.example"}, timeout=10), 403)
    plain = requests.post(
        proxy.url + "/v1/chat/completions", data=body, timeout=10, headers={"Content-Type": "text/plain"}
    )
    assert error_of(plain, 415)["code"] == "unsupported_media_type"
    assert error_of(requests.post(proxy.url + "/v1/chat/completions", data={"messages": "x"}, timeout=10), 415)
    assert not prompts_sent(upstream)
    # what is still served: no Origin (SDKs, curl), a page on localhost, loopback Host names
    for headers in (
        {},
        {"Origin": "http://localhost:5173"},
        {"Origin": "http://127.0.0.1:3000"},
        {"Host": "localhost:1234"},
        {"Host": "[::1]:8000"},
    ):
        assert post(proxy, {"messages": ASK}, headers=headers).status_code == 200, headers


def test_an_api_key_or_an_allowed_origin_lets_a_page_in(upstream):
    upstream.json("/completion", said("ANSWER: ok"), repeat=True)
    for config, headers in (
        ({"api_key": "k"}, {"Authorization": "Bearer k"}),
        ({"allowed_origins": ("https://app.example",)}, {}),
    ):
        proxy = start(upstream, **config)
        try:
            assert (
                post(proxy, {"messages": ASK}, headers={"Origin": "https://app.example", **headers}).status_code == 200
            )
            assert proxy.config.api_key or error_of(
                post(proxy, {"messages": ASK}, headers={"Origin": "https://other.example"}), 403
            )
        finally:
            proxy.stop()


def test_an_allowed_origin_gets_cors_so_a_browser_can_use_it(upstream):
    """Hardening round 4, O2: the preflight got 405 and no Access-Control-Allow-Origin."""
    upstream.json("/completion", said("ANSWER: ok"), repeat=True)
    proxy = start(upstream, allowed_origins=("https://app.example",))
    try:
        preflight = requests.options(
            proxy.url + "/v1/chat/completions",
            timeout=30,
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "content-type" in preflight.headers["access-control-allow-headers"]
        resp = post(proxy, {"messages": ASK}, headers={"Origin": "https://app.example"})
        assert resp.status_code == 200 and resp.headers["access-control-allow-origin"] == "https://app.example"
        denied = requests.options(
            proxy.url + "/v1/chat/completions",
            timeout=30,
            headers={"Origin": "https://other.example", "Access-Control-Request-Method": "POST"},
        )
        assert denied.status_code == 403 and "access-control-allow-origin" not in denied.headers
        plain = post(proxy, {"messages": ASK})  # no Origin: no CORS headers
        assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers
    finally:
        proxy.stop()


def test_listening_beyond_loopback_without_a_key_warns(monkeypatch, capsys):
    import signal

    import uvicorn

    from textagent.proxy.cli import exposure_warning, main

    assert exposure_warning("0.0.0.0", None) and exposure_warning("192.168.1.5", None)
    assert exposure_warning("0.0.0.0", "key") is None and exposure_warning("127.0.0.1", None) is None
    assert exposure_warning("localhost", None) is None and exposure_warning("::1", None) is None
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)  # never listens
    monkeypatch.setattr("textagent.proxy.cli._access_log", lambda on: None)  # leaves the logger as it is
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    monkeypatch.delenv("TEXTAGENT_PROXY_API_KEY", raising=False)
    main(
        ["--api", "completions", "--endpoint", closed_port_url(), "--host", "0.0.0.0", "--port", "0", "--no-access-log"]
    )
    assert "warning: listening on 0.0.0.0 without --api-key" in capsys.readouterr().err
    main(
        [
            "--api",
            "completions",
            "--endpoint",
            closed_port_url(),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--api-key",
            "k",
            "--no-access-log",
        ]
    )
    assert "warning" not in capsys.readouterr().err


# -- P17: credentials in the upstream URL ---------------------------------------------------------


def test_the_upstream_password_is_never_shown(upstream):
    secret = "s3cr%40t-pw"
    with_password = upstream.url.replace("http://", f"http://user:{secret}@")
    proxy = start(upstream, endpoint=with_password)
    try:
        health = requests.get(proxy.url + "/health", timeout=10)
        assert health.status_code == 200 and "s3cr" not in health.text and "***@127.0.0.1" in health.text
        proxy.upstream.backend.url = closed_port_url().replace("http://", f"http://user:{secret}@")
        proxy.upstream.backend.retries = 0
        error = error_of(post(proxy, {"messages": ASK}), 503)
        assert "s3cr" not in json.dumps(error) and "s3cr@t" not in json.dumps(error)
        proxy.upstream.state, proxy.upstream.detail = "failed", f"no server at {with_password}"
        assert "s3cr" not in requests.get(proxy.url + "/health", timeout=10).text
        assert "s3cr" not in post(proxy, {"messages": ASK}).text
    finally:
        proxy.stop()


def test_redact_hides_userinfo_and_known_secrets():
    from textagent.proxy.errors import redact

    assert redact("at http://u:p@ss@host:1/x and https://tok@h") == "at http://***@host:1/x and https://***@h"
    assert redact("key=abcdef", ["abcdef"]) == "key=***"


def test_headers_trickled_a_byte_at_a_time_are_cut_off(upstream):
    proxy = start(upstream, header_timeout=1.0)
    try:
        host, port = proxy.url.rsplit("/", 1)[-1].split(":")
        sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in range(5)]
        request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        closed = set()
        deadline = time.monotonic() + 20
        for byte in request:  # one byte every 0.3 s: 30 s for the headers
            if len(closed) == len(sockets) or time.monotonic() > deadline:
                break
            for i, sock in enumerate(sockets):
                if i in closed:
                    continue
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    closed.add(i)
            time.sleep(0.3)
            for i, sock in enumerate(sockets):
                if i not in closed:
                    sock.setblocking(False)
                    try:
                        if sock.recv(1024) == b"":
                            closed.add(i)
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed.add(i)
                    sock.setblocking(True)
        assert len(closed) == len(sockets), f"{len(sockets) - len(closed)} trickling connections still open"
        # a client that sends its request at once is served as ever
        assert requests.get(proxy.url + "/health", timeout=10).status_code == 200
    finally:
        for sock in sockets:
            sock.close()
        proxy.stop()


@pytest.mark.parametrize("ref", ["http://127.0.0.1:9/x.json", "file:///etc/passwd"])
def test_a_remote_ref_in_a_tool_or_response_format_is_400_and_never_fetched(upstream, proxy, ref):
    schema = {"type": "object", "properties": {"city": {"$ref": ref}}}
    error = error_of(post(proxy, {"messages": ASK, "tools": [function("f", schema)]}), 400)
    assert "never fetched" in error["message"] and error["param"] == "tools[0].function"
    body = {"messages": ASK, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}
    error = error_of(post(proxy, body), 400)
    assert "never fetched" in error["message"] and error["param"] == "response_format.json_schema.schema"
    assert prompts_sent(upstream) == []


def test_a_conversation_longer_than_the_context_is_a_clear_400(upstream, proxy):
    """Issue 40, fault 5: llama.cpp refuses a prompt past a slot's context; the client is told so."""
    upstream.json(
        "/completion",
        {
            "error": {
                "code": 400,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9001,
                "n_ctx": 8192,
                "message": "request (9001 tokens) exceeds the available context size (8192 tokens)",
            }
        },
        status=400,
    )
    error = error_of(post(proxy, {"messages": ASK}), 400)
    assert error["code"] == "context_length_exceeded" and "9001 tokens" in error["message"]
    assert "--ctx-size" in error["message"]


def test_the_embedded_server_is_sized_from_the_command_line(monkeypatch, capsys):
    import uvicorn

    import textagent.local
    from textagent.proxy.cli import main

    made = {}

    class Sized:
        def __init__(self, gguf, **kw):
            made.update(kw)
            raise SystemExit(0)  # enough: the server was asked for with these settings

    monkeypatch.setattr(textagent.local, "LocalServer", Sized)
    monkeypatch.setattr(textagent.local, "running_server", lambda: None)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)
    monkeypatch.setattr("textagent.proxy.cli._access_log", lambda on: None)
    import signal

    monkeypatch.setattr(signal, "signal", lambda *args: None)
    from textagent.proxy.upstream import Upstream

    monkeypatch.setattr(Upstream, "start", lambda self: self._connect())
    with pytest.raises(SystemExit):
        main(["--ctx-size", "16384", "--server-arg=--poll", "--server-arg=0", "--port", "0", "--no-access-log"])
    assert made["ctx_size"] == 16384 and made["extra_args"] == ["--poll", "0"]
    assert main(["--endpoint", "http://127.0.0.1:9", "--ctx-size", "4096"]) == 2
    assert "--ctx-size and --server-arg size the embedded server" in capsys.readouterr().err
