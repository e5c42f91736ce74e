"""The faults every backend meets the same way, one parametrised test each: nothing listening,
a server that does not answer in time, a stream that stalls once it has begun."""

from __future__ import annotations

import pytest

from textagent.backends import ChatAsTextBackend, LlamaCppBackend, OllamaBackend, OpenAICompletionsBackend
from textagent.errors import BackendConnectionError, BackendTimeout

MESSAGES = [{"role": "user", "content": "p"}]
# api: (backend factory, path, a complete answer, a streamed answer's events as bytes)
APIS = {
    "llamacpp": (
        lambda url, **kw: LlamaCppBackend(url, **kw),
        "/completion",
        {"content": "a", "stop_type": "eos"},
        [{"content": "a", "stop": False}, {"content": "b", "stop": True, "stop_type": "eos"}],
    ),
    "completions": (
        lambda url, **kw: OpenAICompletionsBackend(url, model="m", **kw),
        "/v1/completions",
        {"choices": [{"text": "a", "finish_reason": "stop"}]},
        [{"choices": [{"text": "a", "finish_reason": None}]}, {"choices": [{"text": "b", "finish_reason": "stop"}]}],
    ),
    "chat": (
        lambda url, **kw: ChatAsTextBackend(url, model="m", **kw),
        "/v1/chat/completions",
        {"choices": [{"message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"}]},
        [
            {"choices": [{"delta": {"content": "a"}, "finish_reason": None}]},
            {"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]},
        ],
    ),
    "ollama": (
        lambda url, **kw: OllamaBackend(url, model="m", **kw),
        "/api/generate",
        {"response": "a", "done": True},
        [{"response": "a", "done": False}, {"response": "b", "done": True}],
    ),
}


def complete(api, backend, **kw):
    extra = {"messages": MESSAGES} if api == "chat" else {}
    return backend.complete("p", stop=[], max_tokens=5, **extra, **kw)


@pytest.mark.parametrize("api", sorted(APIS))
def test_connection_refused_is_retried_then_explained(api, dead_url):
    make = APIS[api][0]
    with pytest.raises(BackendConnectionError, match="no server at .*textagent serve") as info:
        complete(api, make(dead_url, backoff=0, retries=1))
    assert info.value.retries == 1


@pytest.mark.parametrize("api", sorted(APIS))
def test_no_answer_in_time_is_a_read_timeout_never_retried(api, fake_server):
    make, path, answer, _ = APIS[api]
    fake_server.json(path, answer, delay=30)
    with pytest.raises(BackendTimeout, match="read timeout"):
        complete(api, make(fake_server.url, backoff=0, timeout=(2, 0.3)))
    assert len(fake_server.requests) == 1


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_stream_that_stalls_after_its_headers_is_a_read_timeout(api, fake_server):
    make, path, _, events = APIS[api]
    if api == "ollama":
        fake_server.ndjson(path, events, chunk_delay=30)
    else:
        fake_server.sse(path, events, chunk_delay=30)
    with pytest.raises(BackendTimeout, match="middle of its answer|no event|read timeout"):
        complete(api, make(fake_server.url, backoff=0, timeout=(2, 0.3)), stream=True)


def test_the_runs_deadline_is_its_own_exception_type():
    import time

    from textagent.backends import request_deadline
    from textagent.errors import RunTimeLimit, TextagentError

    assert issubclass(RunTimeLimit, BackendTimeout) and issubclass(RunTimeLimit, TextagentError)
    backend = LlamaCppBackend("http://127.0.0.1:9", retries=0)
    with request_deadline(time.monotonic() - 1), pytest.raises(RunTimeLimit):
        backend.complete("p", stop=[], max_tokens=1)
