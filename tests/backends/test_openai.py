"""OpenAICompletionsBackend against a scripted OpenAI-compatible server."""

from __future__ import annotations

import pytest

from textagent.backends.base import Backend, Usage
from textagent.backends.openai import OpenAICompletionsBackend, openai_root
from textagent.errors import (
    BackendHTTPError,
    BackendResponseError,
    ModeNotSupported,
)

PATH = "/v1/completions"
REPLY = {
    "id": "cmpl-1",
    "object": "text_completion",
    "model": "m",
    "choices": [{"index": 0, "text": "ANSWER: 42", "finish_reason": "stop", "logprobs": None}],
    "usage": {"prompt_tokens": 50, "completion_tokens": 4, "total_tokens": 54},
}


def backend(srv, suffix="", **kw):
    kw.setdefault("backoff", 0)
    return OpenAICompletionsBackend(srv.url + suffix, **kw)


def chunk(text, finish=None, **extra):
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}], **extra}


def test_is_a_backend():
    assert isinstance(OpenAICompletionsBackend("http://x"), Backend)


@pytest.mark.parametrize(
    "url", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/", "http://h:1/v1/completions"]
)
def test_url_with_or_without_v1(url):
    assert openai_root(url) == "http://h:1/v1"
    assert OpenAICompletionsBackend(url).url == "http://h:1/v1"


@pytest.mark.parametrize("suffix", ["", "/v1"])
def test_request_body(fake_server, suffix):
    fake_server.json(PATH, REPLY)
    b = backend(fake_server, suffix, model="qwen", api_key="sk-1", seed=3)
    b.complete("PROMPT", stop=["\nOBSERVATION:"], max_tokens=256)
    req = fake_server.requests[0]
    assert req.path == PATH
    assert req.json == {
        "model": "qwen",
        "max_tokens": 256,
        "stop": ["\nOBSERVATION:"],
        "temperature": 0.0,
        "seed": 3,
        "prompt": "PROMPT",
        "stream": False,
    }
    assert req.headers["authorization"] == "Bearer sk-1"


def test_max_tokens_always_sent_and_optional_fields_omitted(fake_server):
    fake_server.json(PATH, REPLY)
    backend(fake_server).complete("p", stop=[], max_tokens=16)
    body = fake_server.bodies()[0]
    assert body["max_tokens"] == 16
    assert "model" not in body and "stop" not in body and "seed" not in body
    assert "authorization" not in fake_server.requests[0].headers


def test_parses_text_finish_and_usage(fake_server):
    fake_server.json(PATH, {**REPLY, "usage": {**REPLY["usage"], "prompt_tokens_details": {"cached_tokens": 40}}})
    c = backend(fake_server).complete("p", stop=[], max_tokens=16)
    assert c.text == "ANSWER: 42" and c.finish_reason == "stop"
    assert c.usage == Usage(prompt_tokens=50, prompt_evaluated=10, prompt_cached=40, completion_tokens=4)
    assert c.timings["wall_ms"] > 0 and c.retries == 0


def test_usage_without_cache_details(fake_server):
    fake_server.json(PATH, REPLY)
    c = backend(fake_server).complete("p", stop=[], max_tokens=16)
    assert c.usage == Usage(prompt_tokens=50, completion_tokens=4)


def test_llamacpp_timings_and_vllm_stop_reason(fake_server):
    reply = {
        **REPLY,
        "choices": [{"index": 0, "text": "x", "finish_reason": "length", "stop_reason": "\nOBS"}],
        "timings": {"prompt_n": 5, "cache_n": 45, "prompt_ms": 3.0, "predicted_ms": 7.0},
    }
    fake_server.json(PATH, reply)
    c = backend(fake_server).complete("p", stop=[], max_tokens=16)
    assert c.finish_reason == "length" and c.stop_word == "\nOBS"
    assert c.usage == Usage(50, 5, 45, 4)
    assert c.timings["prompt_ms"] == 3.0


def test_grammar_needs_grammar_field(fake_server):
    with pytest.raises(ModeNotSupported, match="grammar_field='grammar'"):
        backend(fake_server).complete("p", stop=[], max_tokens=5, grammar='root ::= "a"')
    assert fake_server.requests == []
    fake_server.json(PATH, REPLY)
    backend(fake_server, grammar_field="grammar").complete("p", stop=[], max_tokens=5, grammar='root ::= "a"')
    assert fake_server.bodies()[0]["grammar"] == 'root ::= "a"'


def test_missing_choices_or_text(fake_server):
    fake_server.json(PATH, {"content": "llama native"})
    fake_server.json(PATH, {"choices": [{"message": {"content": "chat"}}]})
    b = backend(fake_server)
    with pytest.raises(BackendResponseError, match="without choices"):
        b.complete("p", stop=[], max_tokens=5)
    with pytest.raises(BackendResponseError, match="'text'"):
        b.complete("p", stop=[], max_tokens=5)


def test_models(fake_server):
    fake_server.json("/v1/models", {"object": "list", "data": [{"id": "a"}, {"id": "b"}]})
    assert backend(fake_server).models() == ["a", "b"]


# -- streaming -------------------------------------------------------------------------------
def test_streaming_with_usage_chunk_and_done(fake_server):
    events = [
        chunk("ANS"),
        ": ping",
        chunk("WER: 4"),
        chunk("2", "stop"),
        {
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}},
        },
        "data: [DONE]",
    ]
    fake_server.sse(PATH, events)
    c = backend(fake_server, stream=True).complete("p", stop=["X"], max_tokens=8)
    assert c.text == "ANSWER: 42" and c.finish_reason == "stop"
    assert c.usage == Usage(9, 1, 8, 3)
    body = fake_server.bodies()[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_stream_usage_can_be_disabled(fake_server):
    fake_server.sse(PATH, [chunk("a", "length"), "data: [DONE]"])
    c = backend(fake_server, stream=True, stream_usage=False).complete("p", stop=[], max_tokens=1)
    assert c.finish_reason == "length" and c.usage == Usage()
    assert "stream_options" not in fake_server.bodies()[0]


def test_stream_without_done_but_finished_is_accepted(fake_server):
    fake_server.sse(PATH, [chunk("a"), chunk("b", "stop")])
    assert backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5).text == "ab"


def test_early_stop(fake_server):
    fake_server.sse(PATH, [chunk("TOOL: x ARGS: {}\n"), chunk("OBSERVATION:"), chunk(" fake"), chunk("", "stop")])
    c = backend(fake_server).complete("p", stop=[], max_tokens=5, on_text=lambda t: "OBSERVATION:" in t)
    assert c.finish_reason == "early_stop" and c.text == "TOOL: x ARGS: {}\nOBSERVATION:"


def test_stream_cut_off(fake_server):
    fake_server.sse(PATH, [chunk("a"), b'data: {"choices": [{"te'], cut=True)
    with pytest.raises(BackendResponseError, match="cut off"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_stream_ends_without_done_or_finish(fake_server):
    fake_server.sse(PATH, [chunk("a")])
    with pytest.raises(BackendResponseError, match="without \\[DONE\\]"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_empty_stream(fake_server):
    fake_server.sse(PATH, [])
    with pytest.raises(BackendResponseError, match="empty stream"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_error_mid_stream(fake_server):
    fake_server.sse(PATH, [chunk("a"), {"error": {"message": "engine dead", "code": 500}}])
    with pytest.raises(BackendHTTPError, match="engine dead"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


# -- faults ----------------------------------------------------------------------------------


def test_http_errors(fake_server):
    fake_server.add(PATH, status=500, json={"object": "error", "message": "CUDA OOM", "code": 500})
    fake_server.add(PATH, status=500, body="")
    fake_server.add(PATH, status=404, json={"object": "error", "message": "The model `x` does not exist."})
    fake_server.add(PATH, status=404, body="Not Found")
    b = backend(fake_server)
    with pytest.raises(BackendHTTPError, match="CUDA OOM"):
        b.complete("p", stop=[], max_tokens=5)
    with pytest.raises(BackendHTTPError, match="HTTP 500"):
        b.complete("p", stop=[], max_tokens=5)
    with pytest.raises(BackendHTTPError, match="does not exist.*model=") as info:
        b.complete("p", stop=[], max_tokens=5)
    assert info.value.status == 404
    with pytest.raises(BackendHTTPError, match="choose the matching --api"):
        b.complete("p", stop=[], max_tokens=5)
    assert len(fake_server.requests) == 4  # no retries for 500 / 404


def test_503_retried(fake_server):
    fake_server.add(PATH, status=503, body="")
    fake_server.json(PATH, REPLY)
    assert backend(fake_server).complete("p", stop=[], max_tokens=5).retries == 1


def test_malformed_and_empty(fake_server):
    fake_server.add(PATH, body="data: not json")
    fake_server.add(PATH, body="")
    b = backend(fake_server)
    with pytest.raises(BackendResponseError, match="malformed JSON"):
        b.complete("p", stop=[], max_tokens=5)
    with pytest.raises(BackendResponseError, match="empty"):
        b.complete("p", stop=[], max_tokens=5)


def test_one_megabyte_reply(fake_server):
    big = "b" * (1024 * 1024)
    fake_server.json(PATH, {**REPLY, "choices": [{"index": 0, "text": big, "finish_reason": "length"}]})
    assert backend(fake_server).complete("p", stop=[], max_tokens=5).text == big


def test_token_probs_asks_for_logprobs_at_most_five_and_reads_the_first_tokens(fake_server):
    logprobs = {"tokens": ["ANSWER"], "top_logprobs": [{"TOOL": -1.6094, "ANSWER": -0.2231, "x": "junk"}]}
    fake_server.json(PATH, {**REPLY, "choices": [{**REPLY["choices"][0], "logprobs": logprobs}]})
    fake_server.json(PATH, REPLY)
    b = backend(fake_server)
    top = b.complete("P", stop=[], max_tokens=1, token_probs=10).top_tokens
    assert [t for t, _ in top] == ["ANSWER", "TOOL"] and top[1][1] == pytest.approx(0.2, abs=1e-4)
    assert b.complete("P", stop=[], max_tokens=1).top_tokens == ()  # logprobs: None
    asked, plain = fake_server.bodies(PATH)
    assert asked["logprobs"] == 5 and "logprobs" not in plain
    assert b.capabilities.token_probs


def test_top_tokens_in_llama_cpps_form_of_the_completions_logprobs(fake_server):
    top = [{"id": 1, "token": "ANSWER", "logprob": -0.2231}, {"id": 2, "token": "TOOL", "logprob": -1.6094}]
    logprobs = {"content": [{"id": 1, "token": "ANSWER", "logprob": -0.2231, "top_logprobs": top}]}
    fake_server.json(PATH, {**REPLY, "choices": [{**REPLY["choices"][0], "logprobs": logprobs}]})
    top_tokens = backend(fake_server).complete("P", stop=[], max_tokens=1, token_probs=2).top_tokens
    assert [t for t, _ in top_tokens] == ["ANSWER", "TOOL"] and top_tokens[1][1] == pytest.approx(0.2, abs=1e-4)
