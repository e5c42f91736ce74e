"""Reading answers: bodies a server compressed, numbers out of range (backends/_reading, _payload)."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from textagent import Agent
from textagent.backends import LlamaCppBackend, OllamaBackend, OpenAICompletionsBackend
from textagent.errors import BackendResponseError
from textagent.toolkits.demo import demo_tools

COMPRESS = {"gzip": gzip.compress, "deflate": zlib.compress}
ANSWERS = {
    "llamacpp": ("/completion", {"content": "ANSWER: 42", "stop_type": "eos", "tokens_evaluated": 5}),
    "completions": ("/v1/completions", {"choices": [{"text": "ANSWER: 42", "finish_reason": "stop"}]}),
    "ollama": ("/api/generate", {"response": "ANSWER: 42", "done": True}),
}


def make(api, url):
    if api == "llamacpp":
        return LlamaCppBackend(url, backoff=0)
    if api == "completions":
        return OpenAICompletionsBackend(url, model="m", backoff=0)
    return OllamaBackend(url, model="m", backoff=0)


@pytest.mark.parametrize("encoding", sorted(COMPRESS))
@pytest.mark.parametrize("api", sorted(ANSWERS))
def test_a_compressed_answer_is_read(fake_server, api, encoding):
    path, body = ANSWERS[api]
    fake_server.add(
        path,
        body=COMPRESS[encoding](json.dumps(body).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": encoding},
    )
    assert make(api, fake_server.url).complete("p", stop=[], max_tokens=8).text == "ANSWER: 42"


@pytest.mark.parametrize("encoding", sorted(COMPRESS))
def test_a_compressed_stream_is_read(fake_server, encoding):
    events = b"".join(
        f"data: {json.dumps(e)}\n\n".encode()
        for e in [
            {"content": "ANSWER: ", "stop": False},
            {"content": "42", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ]
    )
    fake_server.add(
        "/completion",
        body=COMPRESS[encoding](events),
        chunked=True,
        headers={"Content-Type": "text/event-stream", "Content-Encoding": encoding},
    )
    pieces = []
    completion = LlamaCppBackend(fake_server.url, backoff=0).complete(
        "p", stop=[], max_tokens=8, stream=True, on_text=pieces.append
    )
    assert completion.text == "ANSWER: 42"


def test_a_compressed_body_too_large_when_unpacked_is_refused(fake_server):
    bomb = {"content": "x" * 5_000_000, "stop_type": "eos"}
    fake_server.add(
        "/completion",
        body=gzip.compress(json.dumps(bomb).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    backend = LlamaCppBackend(fake_server.url, backoff=0, max_response_bytes=1_000_000)
    with pytest.raises(BackendResponseError, match="larger than the 1000000 bytes limit"):
        backend.complete("p", stop=[], max_tokens=8)


def test_timings_out_of_range_are_ignored(fake_server):
    huge = int("9" * 400)
    fake_server.json(
        "/completion",
        {
            "content": "ANSWER: 42",
            "stop_type": "eos",
            "tokens_evaluated": huge,
            "timings": {"prompt_ms": huge, "predicted_ms": 1.5, "predicted_n": huge, "prompt_n": 3},
        },
    )
    result = Agent(LlamaCppBackend(fake_server.url, backoff=0), demo_tools(), chat_format="chatml").run("q")
    assert result.stop_reason == "answer" and result.answer == "42"
    step = result.steps[0]
    assert "prompt_ms" not in step.timings and step.timings["predicted_ms"] == 1.5
    assert step.usage.prompt_tokens is None and step.usage.prompt_evaluated == 3
