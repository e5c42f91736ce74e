"""OllamaBackend against a scripted /api/generate."""

from __future__ import annotations

import pytest

from textagent.backends.base import Backend, Usage
from textagent.backends.ollama import OllamaBackend
from textagent.errors import (
    BackendHTTPError,
    BackendResponseError,
    ModeNotSupported,
)

PATH = "/api/generate"
FINAL = {
    "model": "qwen",
    "created_at": "2025-01-01T00:00:00Z",
    "response": "",
    "done": True,
    "done_reason": "stop",
    "total_duration": 900_000_000,
    "load_duration": 100_000_000,
    "prompt_eval_count": 40,
    "prompt_eval_duration": 200_000_000,
    "eval_count": 10,
    "eval_duration": 500_000_000,
}


def part(text):
    return {"model": "qwen", "created_at": "2025-01-01T00:00:00Z", "response": text, "done": False}


def backend(srv, **kw):
    kw.setdefault("backoff", 0)
    kw.setdefault("model", "qwen")
    return OllamaBackend(srv.url, **kw)


def test_is_a_backend_and_needs_a_model():
    assert isinstance(OllamaBackend(model="m"), Backend)
    assert OllamaBackend(model="m").url == "http://127.0.0.1:11434"
    assert OllamaBackend("http://h:11434/api/", model="m").url == "http://h:11434"
    with pytest.raises(TypeError, match="model"):
        OllamaBackend("http://h:11434")


def test_request_body_and_streaming(fake_server):
    fake_server.ndjson(PATH, [part("ANSWER"), part(": "), part("4"), FINAL], chunk_delay=0.005)
    c = backend(fake_server, seed=5, num_ctx=4096, keep_alive="5m").complete(
        "RAW PROMPT", stop=["\nOBSERVATION:"], max_tokens=100
    )
    assert fake_server.bodies() == [
        {
            "model": "qwen",
            "prompt": "RAW PROMPT",
            "raw": True,
            "stream": True,
            "options": {"num_predict": 100, "stop": ["\nOBSERVATION:"], "temperature": 0.0, "seed": 5, "num_ctx": 4096},
            "keep_alive": "5m",
        }
    ]
    assert c.text == "ANSWER: 4" and c.finish_reason == "stop"
    assert c.usage == Usage(prompt_tokens=40, completion_tokens=10)
    assert c.timings["prompt_ms"] == 200.0 and c.timings["predicted_ms"] == 500.0
    assert c.timings["load_ms"] == 100.0 and c.timings["total_ms"] == 900.0
    assert c.timings["predicted_per_second"] == pytest.approx(20.0)
    assert c.timings["prompt_per_second"] == pytest.approx(200.0)


def test_cached_count_when_reported(fake_server):
    fake_server.ndjson(PATH, [part("x"), {**FINAL, "prompt_eval_cached_count": 32}])
    c = backend(fake_server).complete("p", stop=[], max_tokens=5)
    assert c.usage == Usage(prompt_tokens=40, prompt_evaluated=8, prompt_cached=32, completion_tokens=10)


def test_non_streaming(fake_server):
    fake_server.json(PATH, {**FINAL, "response": "ANSWER: 4", "done_reason": "length"})
    c = backend(fake_server, stream=False).complete("p", stop=[], max_tokens=5, temperature=0.3)
    body = fake_server.bodies()[0]
    assert body["stream"] is False and body["options"]["temperature"] == 0.3 and "seed" not in body["options"]
    assert c.text == "ANSWER: 4" and c.finish_reason == "length"


def test_grammar_not_supported(fake_server):
    with pytest.raises(ModeNotSupported):
        backend(fake_server).complete("p", stop=[], max_tokens=5, grammar="root ::= x")
    assert fake_server.requests == []


def test_early_stop(fake_server):
    fake_server.ndjson(PATH, [part("TOOL: a ARGS: {}\n"), part("OBSERVATION:"), part(" made up"), FINAL])
    c = backend(fake_server).complete("p", stop=[], max_tokens=5, on_text=lambda t: "OBSERVATION:" in t)
    assert c.finish_reason == "early_stop" and c.text == "TOOL: a ARGS: {}\nOBSERVATION:"


def test_error_line_mid_stream(fake_server):
    fake_server.ndjson(PATH, [part("a"), {"error": "an error was encountered while running the model"}])
    with pytest.raises(BackendHTTPError, match="error was encountered"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_stream_cut_off_mid_line(fake_server):
    fake_server.ndjson(PATH, [part("a"), b'{"model": "qwen", "resp'], cut=True)
    with pytest.raises(BackendResponseError, match="cut off"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_stream_without_done(fake_server):
    fake_server.ndjson(PATH, [part("a"), part("b")])
    with pytest.raises(BackendResponseError, match='without "done": true'):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_empty_stream_and_empty_body(fake_server):
    fake_server.ndjson(PATH, [])
    fake_server.add(PATH, body="")
    with pytest.raises(BackendResponseError, match="empty stream"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)
    with pytest.raises(BackendResponseError, match="empty response"):
        backend(fake_server, stream=False).complete("p", stop=[], max_tokens=5)


def test_malformed_line(fake_server):
    fake_server.ndjson(PATH, [part("a"), "not json\n", FINAL])
    with pytest.raises(BackendResponseError, match="malformed JSON"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_model_not_found_hint(fake_server):
    fake_server.add(PATH, status=404, json={"error": "model 'qwen' not found, try pulling it first"})
    with pytest.raises(BackendHTTPError, match="ollama pull qwen") as info:
        backend(fake_server).complete("p", stop=[], max_tokens=5)
    assert info.value.status == 404


def test_500_not_retried_503_retried(fake_server):
    fake_server.add(PATH, status=500, json={"error": "llama runner process has terminated"})
    fake_server.add(PATH, status=503, json={"error": "server busy"})
    fake_server.ndjson(PATH, [part("ok"), FINAL])
    b = backend(fake_server)
    with pytest.raises(BackendHTTPError, match="runner process has terminated") as info:
        b.complete("p", stop=[], max_tokens=5)
    assert info.value.retries == 0
    assert b.complete("p", stop=[], max_tokens=5).retries == 1


def test_one_megabyte_reply(fake_server):
    big = "c" * (1024 * 1024)
    fake_server.ndjson(PATH, [part(big[: len(big) // 2]), part(big[len(big) // 2 :]), FINAL])
    assert backend(fake_server).complete("p", stop=[], max_tokens=5).text == big
