"""The shared HTTP plumbing: timeouts, retries, error translation, body caps, SSE / NDJSON."""

from __future__ import annotations

import json
import time

import pytest
import requests

from textagent.backends._http import (
    DEFAULT_TIMEOUT,
    DONE,
    HTTPBackend,
    normalize_timeout,
    openai_usage,
    server_error_message,
)
from textagent.backends.base import Usage
from textagent.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendResponseError,
    BackendTimeout,
)


def make(url, **kw):
    kw.setdefault("backoff", 0)
    return HTTPBackend(url, **kw)


def get_json(backend, path="/x", payload=None):
    return backend._request_json("POST" if payload is not None else "GET", path, payload)


def sse(backend, path="/s"):
    resp, retries = backend._open("POST", path, payload={})
    return list(backend._iter_sse(resp, resp.url, retries))


def ndjson(backend, path="/n"):
    resp, retries = backend._open("POST", path, payload={})
    return list(backend._iter_ndjson(resp, resp.url, retries))


# -- configuration ---------------------------------------------------------------------------
def test_normalize_timeout():
    assert normalize_timeout(None) == DEFAULT_TIMEOUT == (5.0, 300.0)
    assert normalize_timeout(2) == (2.0, 2.0)
    assert normalize_timeout((1, 30)) == (1.0, 30.0)
    for bad in ((1, 2, 3), "5", True):
        with pytest.raises(TypeError):
            normalize_timeout(bad)
    with pytest.raises(ValueError):
        normalize_timeout(0)
    with pytest.raises(ValueError):
        normalize_timeout((1, -1))


def test_constructor_validation_and_url():
    b = HTTPBackend("localhost:8080/")
    assert b.url == "http://localhost:8080"
    assert b.timeout == (5.0, 300.0) and b.retries == 2
    with pytest.raises(ValueError):
        HTTPBackend("http://x", retries=-1)
    with pytest.raises(ValueError):
        HTTPBackend("http://x", backoff=-1)
    with pytest.raises(ValueError):
        HTTPBackend("http://x", max_response_bytes=0)


def test_api_key_and_headers_are_sent(fake_server):
    fake_server.json("/x", {"ok": True})
    b = make(fake_server.url, api_key="sk-test", headers={"X-Extra": "1"})
    assert get_json(b) == ({"ok": True}, 0)
    headers = fake_server.requests[0].headers
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["x-extra"] == "1"


def test_close_and_context_manager(fake_server):
    fake_server.json("/x", {"ok": 1})
    with make(fake_server.url) as b:
        assert get_json(b)[0] == {"ok": 1}
    with pytest.raises(BackendError, match="closed"):
        get_json(b)
    b.close()  # idempotent


def test_external_session_is_not_closed(fake_server):
    session = requests.Session()
    closed = []
    session.close = lambda: closed.append(True)  # type: ignore[method-assign]
    b = make(fake_server.url, session=session)
    assert b.session is session
    b.close()
    assert closed == []


def test_each_backend_owns_its_session():
    a, b = HTTPBackend("http://x"), HTTPBackend("http://x")
    assert isinstance(a.session, requests.Session) and a.session is not b.session


# -- connection errors and retries -----------------------------------------------------------
def test_connection_refused_is_retried_then_explained(dead_url):
    b = make(dead_url, retries=2)
    started = time.perf_counter()
    with pytest.raises(BackendConnectionError) as info:
        get_json(b)
    assert time.perf_counter() - started < 10  # two retries, no long waits (a hang would show)
    err = info.value
    assert err.retries == 2
    assert f"no server at {dead_url}" in str(err)
    assert "textagent serve" in str(err) and "--endpoint" in str(err)
    assert "connection refused" in str(err)
    assert isinstance(err.__cause__, requests.exceptions.ConnectionError)
    assert err.url == dead_url + "/x"


def test_backoff_is_exponential(dead_url):
    b = HTTPBackend(dead_url, retries=2, backoff=0.05)
    started = time.perf_counter()
    with pytest.raises(BackendConnectionError):
        get_json(b)
    assert time.perf_counter() - started >= 0.05 + 0.1


def test_no_retries_when_disabled(dead_url):
    with pytest.raises(BackendConnectionError) as info:
        get_json(make(dead_url, retries=0))
    assert info.value.retries == 0
    assert "gave up" not in str(info.value)


def test_dropped_connection_before_answer_is_retried(fake_server):
    fake_server.add("/x", close=True)
    fake_server.json("/x", {"ok": True})
    assert get_json(make(fake_server.url)) == ({"ok": True}, 1)
    assert len(fake_server.requests) == 2


def test_dropped_connection_is_not_called_no_server(fake_server):
    fake_server.add("/x", close=True)
    with pytest.raises(BackendConnectionError) as info:
        get_json(make(fake_server.url, retries=0))
    message = str(info.value)
    assert "no server" not in message
    assert "failed before an answer arrived" in message and "textagent serve" in message


@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_statuses_are_retried_and_counted(fake_server, status):
    fake_server.add("/x", status=status, json={"error": "busy"})
    fake_server.add("/x", status=status, body="")
    fake_server.json("/x", {"ok": True})
    assert get_json(make(fake_server.url, retries=2)) == ({"ok": True}, 2)
    assert len(fake_server.requests) == 3


def test_503_gives_up_after_retries(fake_server):
    fake_server.add("/x", status=503, json={"error": {"code": 503, "message": "Loading model"}}, repeat=True)
    with pytest.raises(BackendHTTPError) as info:
        get_json(make(fake_server.url, retries=2))
    err = info.value
    assert err.status == 503 and err.retries == 2
    assert "Loading model" in str(err) and "2 retries" in str(err)
    assert len(fake_server.requests) == 3


def test_500_is_not_retried(fake_server):
    fake_server.add("/x", status=500, json={"error": {"code": 500, "message": "boom"}}, repeat=True)
    with pytest.raises(BackendHTTPError) as info:
        get_json(make(fake_server.url, retries=2))
    assert info.value.status == 500 and info.value.retries == 0
    assert len(fake_server.requests) == 1


# -- HTTP error bodies -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "body, expected",
    [
        (
            {"error": {"code": 400, "message": "the request exceeds the available context size"}},
            "exceeds the available",
        ),
        ({"error": "model 'x' not found"}, "model 'x' not found"),
        ({"object": "error", "message": "vllm says no", "code": 400}, "vllm says no"),
        ({"detail": "fastapi says no"}, "fastapi says no"),
    ],
)
def test_http_error_includes_server_json_message(fake_server, body, expected):
    fake_server.add("/x", status=400, json=body)
    with pytest.raises(BackendHTTPError) as info:
        get_json(make(fake_server.url))
    err = info.value
    assert err.status == 400
    assert expected in str(err)
    assert "HTTP 400" in str(err) and "/x" in str(err)
    assert json.loads(err.body) == body


def test_http_error_without_json_body(fake_server):
    fake_server.add("/x", status=500, body="segfault in sampler", headers={"Content-Type": "text/plain"})
    fake_server.add("/x", status=500, body="")
    fake_server.add("/x", status=500, body="<html><body>nginx 500</body></html>", headers={"Content-Type": "text/html"})
    b = make(fake_server.url)
    with pytest.raises(BackendHTTPError, match="segfault in sampler") as info:
        get_json(b)
    assert info.value.body == "segfault in sampler"
    with pytest.raises(BackendHTTPError) as info:
        get_json(b)
    assert info.value.body == "" and str(info.value).endswith("/x")
    with pytest.raises(BackendHTTPError) as info:
        get_json(b)
    assert "<html>" not in str(info.value) and "<html>" in info.value.body


def test_http_error_body_excerpt_is_bounded(fake_server):
    fake_server.add("/x", status=500, json={"error": {"message": "x" * 100_000}})
    with pytest.raises(BackendHTTPError) as info:
        get_json(make(fake_server.url))
    assert len(str(info.value)) < 1000
    assert len(info.value.body) <= 2000


@pytest.mark.parametrize("status, hint", [(401, "API key"), (404, "no such endpoint"), (503, "loading the model")])
def test_http_error_hints(fake_server, status, hint):
    fake_server.add("/x", status=status, json={"error": "nope"})
    with pytest.raises(BackendHTTPError, match=hint):
        get_json(make(fake_server.url, retries=0))


# -- timeouts --------------------------------------------------------------------------------
def test_read_timeout_before_answer(fake_server):
    fake_server.json("/x", {"late": True}, delay=30)
    started = time.perf_counter()
    with pytest.raises(BackendTimeout) as info:
        get_json(make(fake_server.url, timeout=(1, 0.2)))
    assert time.perf_counter() - started < 15  # the server would answer after 30 s
    assert "0.2 s" in str(info.value) and "read timeout" in str(info.value)
    assert isinstance(info.value.__cause__, requests.exceptions.ReadTimeout)
    assert len(fake_server.requests) == 1  # a timeout is never retried


def test_read_timeout_mid_stream(fake_server):
    fake_server.sse("/s", [{"a": 1}, {"b": 2}], chunk_delay=30)
    b = make(fake_server.url, timeout=(1, 0.2))
    started = time.perf_counter()
    with pytest.raises(BackendTimeout, match="middle of its answer"):
        sse(b)
    assert time.perf_counter() - started < 15  # the stream would go on for 60 s


# -- bodies ----------------------------------------------------------------------------------
def test_malformed_json(fake_server):
    fake_server.add("/x", body='{"content": "unterminated')
    with pytest.raises(BackendResponseError, match="malformed JSON") as info:
        get_json(make(fake_server.url))
    assert isinstance(info.value.__cause__, ValueError)


def test_empty_body(fake_server):
    fake_server.add("/x", body="")
    with pytest.raises(BackendResponseError, match="empty response"):
        get_json(make(fake_server.url))


def test_one_megabyte_body_is_fine(fake_server):
    big = "y" * (1024 * 1024)
    fake_server.json("/x", {"content": big})
    fake_server.add("/x", chunks=[json.dumps({"content": big}).encode()], chunked=True)
    b = make(fake_server.url)
    assert get_json(b)[0]["content"] == big
    assert get_json(b)[0]["content"] == big


def test_oversized_body_is_refused(fake_server):
    payload = json.dumps({"content": "z" * 5000}).encode()
    fake_server.add("/x", body=payload)  # Content-Length announced
    fake_server.add("/x", chunks=[payload[:3000], payload[3000:]], chunked=True)  # no length up front
    b = make(fake_server.url, max_response_bytes=4096)
    with pytest.raises(BackendResponseError, match="announced a response of .* limit"):
        get_json(b)
    with pytest.raises(BackendResponseError, match="larger than the 4 KiB limit"):
        get_json(b)


def test_body_cut_short(fake_server):
    fake_server.add("/x", body='{"content": "abc"}', cut=True)
    with pytest.raises(BackendResponseError, match="closed the connection"):
        get_json(make(fake_server.url))


# -- SSE -------------------------------------------------------------------------------------
def test_sse_events_comments_and_done(fake_server):
    fake_server.sse(
        "/s",
        [": keep-alive", {"n": 1}, b"retry: 100\nid: 7\n\n", {"n": 2}, b":\n\n", "data: [DONE]"],
        chunk_delay=0.01,
    )
    assert sse(make(fake_server.url)) == [{"n": 1}, {"n": 2}, DONE]


def test_sse_crlf_and_multiline_data_and_split_chunks(fake_server):
    raw = b'data: {"a":\r\ndata: 1}\r\n\r\ndata: {"b": 2}\r\n\r\n'
    fake_server.add(
        "/s",
        chunks=[raw[i : i + 3] for i in range(0, len(raw), 3)],
        chunked=True,
        headers={"Content-Type": "text/event-stream"},
    )
    assert sse(make(fake_server.url)) == [{"a": 1}, {"b": 2}]


def test_sse_last_event_without_blank_line_is_accepted(fake_server):
    fake_server.sse("/s", [{"n": 1}, b'data: {"n": 2}'])
    assert sse(make(fake_server.url)) == [{"n": 1}, {"n": 2}]


def test_sse_cut_mid_event(fake_server):
    fake_server.sse("/s", [{"n": 1}, b'data: {"content": "ab'])
    with pytest.raises(BackendResponseError, match="middle of an event"):
        sse(make(fake_server.url))


def test_sse_connection_dropped_mid_stream(fake_server):
    fake_server.sse("/s", [{"n": 1}, b'data: {"conte'], cut=True)
    with pytest.raises(BackendResponseError, match="cut off"):
        sse(make(fake_server.url))


@pytest.mark.parametrize(
    "event",
    [
        {"error": {"code": 500, "message": "slot crashed", "type": "server_error"}},
        'error: {"code": 500, "message": "slot crashed", "type": "server_error"}',
        'event: error\ndata: {"message": "slot crashed", "code": 500}',
    ],
)
def test_sse_error_event_raises(fake_server, event):
    fake_server.sse("/s", [{"n": 1}, event, {"n": 2}])
    backend = make(fake_server.url)
    resp, retries = backend._open("POST", "/s", payload={})
    events = backend._iter_sse(resp, resp.url, retries)
    assert next(events) == {"n": 1}
    with pytest.raises(BackendHTTPError, match="slot crashed") as info:
        next(events)
    assert info.value.status == 500
    assert "middle of the stream" in str(info.value)


def test_sse_malformed_event(fake_server):
    fake_server.sse("/s", ["data: {nope}"])
    with pytest.raises(BackendResponseError, match="malformed JSON in a stream event"):
        sse(make(fake_server.url))


def test_sse_invalid_utf8(fake_server):
    fake_server.sse("/s", [b'data: {"a": "\xff"}\n\n'])
    with pytest.raises(BackendResponseError, match="not UTF-8"):
        sse(make(fake_server.url))


def test_sse_stream_over_cap(fake_server):
    fake_server.sse("/s", [{"content": "x" * 1000}] * 10)
    with pytest.raises(BackendResponseError, match="limit"):
        sse(make(fake_server.url, max_response_bytes=4096))


def test_sse_generator_close_closes_response(fake_server):
    fake_server.sse("/s", [{"n": i} for i in range(5)])
    b = make(fake_server.url)
    resp, retries = b._open("POST", "/s", payload={})
    events = b._iter_sse(resp, resp.url, retries)
    assert next(events) == {"n": 0}
    events.close()
    assert resp.raw.closed


# -- NDJSON ----------------------------------------------------------------------------------
def test_ndjson_lines(fake_server):
    fake_server.ndjson("/n", [{"a": 1}, "\n", {"b": 2}, b'{"c": 3}'])
    assert ndjson(make(fake_server.url)) == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_ndjson_error_line(fake_server):
    fake_server.ndjson("/n", [{"a": 1}, {"error": "out of memory"}])
    with pytest.raises(BackendHTTPError, match="out of memory"):
        ndjson(make(fake_server.url))


def test_ndjson_cut_mid_line(fake_server):
    fake_server.ndjson("/n", [{"a": 1}, b'{"respo'])
    with pytest.raises(BackendResponseError, match="middle of an event"):
        ndjson(make(fake_server.url))


# -- helpers ---------------------------------------------------------------------------------
def test_server_error_message_shapes():
    assert server_error_message({"error": {"message": "m"}}) == "m"
    assert server_error_message({"error": "e"}) == "e"
    assert server_error_message({"message": "v"}) == "v"
    assert server_error_message({"detail": [{"loc": 1}]}) == '[{"loc": 1}]'
    assert server_error_message({"other": 1}) is None
    assert server_error_message([1]) is None


def test_openai_usage():
    assert openai_usage(None) == Usage()
    assert openai_usage({"prompt_tokens": 10, "completion_tokens": 3}) == Usage(10, None, None, 3)
    assert openai_usage(
        {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}}
    ) == Usage(10, 2, 8, 3)
    # llama.cpp's extra timings
    assert openai_usage({"prompt_tokens": 10, "completion_tokens": 3}, {"prompt_n": 4, "cache_n": 6}) == Usage(
        10, 4, 6, 3
    )
    assert openai_usage({"prompt_tokens": True, "completion_tokens": -1}) == Usage()


# -- deeply nested JSON (#16 item 3) -----------------------------------------------------------
_DEEP = "[" * 100_000


def _deep_agent(fake_server, api):
    from textagent import Agent
    from textagent.backends.chat import ChatAsTextBackend
    from textagent.backends.llamacpp import LlamaCppBackend
    from textagent.backends.ollama import OllamaBackend
    from textagent.backends.openai import OpenAICompletionsBackend

    if api == "llamacpp":
        fake_server.add("/completion", body=_DEEP)
        backend, options = LlamaCppBackend(fake_server.url, backoff=0), {}
    elif api == "llamacpp-stream":
        fake_server.sse("/completion", ["data: " + _DEEP + "\n\n"])
        backend, options = LlamaCppBackend(fake_server.url, backoff=0), {"stream": True}
    elif api == "completions":
        fake_server.add("/v1/completions", body=_DEEP)
        backend, options = OpenAICompletionsBackend(fake_server.url, model="m", backoff=0), {}
    elif api == "ollama":
        fake_server.ndjson("/api/generate", [_DEEP + "\n"])
        backend, options = OllamaBackend(fake_server.url, model="m", backoff=0), {"stream": True}
    else:
        fake_server.add("/v1/chat/completions", body=_DEEP)
        backend, options = ChatAsTextBackend(fake_server.url, model="m", backoff=0), {}
    return Agent(backend, [], max_steps=2, **options)


@pytest.mark.parametrize("api", ["llamacpp", "llamacpp-stream", "completions", "ollama", "chat"])
def test_deeply_nested_json_from_the_server_is_a_backend_error(fake_server, api):
    result = _deep_agent(fake_server, api).run("hi")
    assert result.stop_reason == "backend_error", result
    assert isinstance(result.error, BackendResponseError)
    assert "nest" in str(result.error)


def test_deeply_nested_error_body_still_gives_the_http_error(fake_server):
    fake_server.add("/x", status=500, body=_DEEP)
    with pytest.raises(BackendHTTPError) as info:
        get_json(make(fake_server.url))
    assert info.value.status == 500


# -- the run's time limit bounds every request; keep-alives are no progress (#16 item 7) -----------
def _completion(text):
    return {"content": text, "stop": True, "stop_type": "eos", "tokens_evaluated": 5, "tokens_predicted": 2}


def test_max_seconds_cuts_a_slow_request(fake_server):
    from textagent import Agent
    from textagent.backends.llamacpp import LlamaCppBackend

    fake_server.json("/completion", _completion("ANSWER: 1"), delay=30)
    started = time.monotonic()
    result = Agent(LlamaCppBackend(fake_server.url, backoff=0), [], max_seconds=1).run("q")
    elapsed = time.monotonic() - started
    assert result.stop_reason == "time_limit" and result.error is None, result
    assert elapsed < 15, f"{elapsed:.1f} s"  # cut long before the server's 30 s


def test_max_seconds_cuts_a_stream_that_keeps_sending(fake_server):
    from textagent import Agent
    from textagent.backends.llamacpp import LlamaCppBackend

    events = [{"content": "word "} for _ in range(20)] + [_completion("")]
    fake_server.sse("/completion", events, chunk_delay=1.5)
    started = time.monotonic()
    result = Agent(LlamaCppBackend(fake_server.url, backoff=0), [], max_seconds=1.5, stream=True).run("q")
    elapsed = time.monotonic() - started
    assert result.stop_reason == "time_limit", result
    assert elapsed < 15, f"{elapsed:.1f} s"  # the stream would run 30 s


def test_max_seconds_cuts_a_native_chat_request(fake_server):
    from textagent import Agent
    from textagent.backends.chat import ChatAsTextBackend

    fake_server.json(
        "/v1/chat/completions",
        {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]},
        delay=30,
    )
    started = time.monotonic()
    result = Agent(ChatAsTextBackend(fake_server.url, model="m", backoff=0), [], mode="native", max_seconds=1).run("q")
    assert result.stop_reason == "time_limit" and time.monotonic() - started < 15, result


def test_keep_alives_alone_do_not_keep_a_stream_within_its_timeout(fake_server):
    from textagent.backends.llamacpp import LlamaCppBackend

    fake_server.sse("/completion", [": keep-alive"] * 12 + [_completion("late")], chunk_delay=1)
    backend = LlamaCppBackend(fake_server.url, timeout=2, backoff=0, stream=True)
    started = time.monotonic()
    with pytest.raises(BackendTimeout, match="keep-alive|no event"):
        backend.complete("q", stop=[], max_tokens=8)
    assert time.monotonic() - started < 10  # the keep-alives would go on for 12 s


def test_a_stream_with_events_outlives_its_read_timeout(fake_server):
    from textagent.backends.llamacpp import LlamaCppBackend

    fake_server.sse("/completion", [{"content": "a"}] * 6 + [_completion("")], chunk_delay=0.5)
    backend = LlamaCppBackend(fake_server.url, timeout=1.2, backoff=0, stream=True)
    assert backend.complete("q", stop=[], max_tokens=8).text == "aaaaaa"


# -- a lone surrogate never reaches the server (h66 #8) ------------------------------------------------
_SURROGATE_REPLIES = {
    "llamacpp": ("/completion", {"content": "ANSWER: ok", "stop": True, "stop_type": "eos"}),
    "completions": ("/v1/completions", {"choices": [{"text": "ANSWER: ok", "finish_reason": "stop"}]}),
    "chat": ("/v1/chat/completions", {"choices": [{"message": {"content": "ANSWER: ok"}, "finish_reason": "stop"}]}),
    "ollama": ("/api/generate", {"response": "ANSWER: ok", "done": True, "done_reason": "stop"}),
}


@pytest.mark.parametrize("api", list(_SURROGATE_REPLIES))
def test_a_lone_surrogate_is_sent_as_the_replacement_character_by_every_backend(fake_server, api):
    """A file name os.listdir could not decode (caf\\udce9) as a tool's result, and a question typed
    on a Latin-1 terminal: the body is UTF-8 with U+FFFD, never the "\\udce9" escape llama.cpp refuses."""
    from textagent import Agent
    from textagent.backends import connect

    path, reply = _SURROGATE_REPLIES[api]
    fake_server.json(path, {**reply, **({"content": 'TOOL: ls ARGS: {"dir": "."}'} if api == "llamacpp" else {})})
    fake_server.json(path, reply)

    def ls(dir: str) -> str:
        """List a folder."""
        return "caf\udce9.txt"

    agent = Agent(connect(api, fake_server.url, model="m", chat=api == "chat", retries=0), [ls], max_steps=3)
    assert agent.run("what is in caf\udce9 and \ud83d\ude00?").answer == "ok"
    for recorded in fake_server.requests:
        text = recorded.body.decode("utf-8")  # strict: no surrogate written as UTF-8 either
        assert "\\udce9" not in text and "\\ud83d" not in text.lower()
        assert "caf\ufffd" in text and "\U0001f600" in text, text
    if api == "llamacpp":  # the tool's result went back in the second request
        assert "caf\ufffd.txt" in fake_server.requests[1].json["prompt"]


def test_a_body_holding_nan_is_a_backend_error_before_anything_is_sent(fake_server):
    with pytest.raises(BackendError, match="no JSON"):
        get_json(make(fake_server.url), payload={"temperature": float("nan")})
    assert fake_server.requests == []
