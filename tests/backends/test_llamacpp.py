"""LlamaCppBackend against a scripted llama-server."""

from __future__ import annotations

import time

import pytest

from textagent.backends.base import Backend, Usage
from textagent.backends.llamacpp import LlamaCppBackend
from textagent.errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendResponseError,
    BackendTimeout,
)

FINAL = {
    "content": 'TOOL: add ARGS: {"a": 1}',
    "id_slot": 0,
    "stop": True,
    "tokens_predicted": 9,
    "tokens_evaluated": 120,
    "tokens_cached": 128,  # everything in the slot after the request, NOT the reused prefix
    "stop_type": "word",
    "stopping_word": "\nOBSERVATION:",
    "truncated": False,
    "timings": {
        "cache_n": 100,
        "prompt_n": 20,
        "prompt_ms": 40.5,
        "prompt_per_second": 493.8,
        "predicted_n": 9,
        "predicted_ms": 90.0,
        "predicted_per_second": 100.0,
    },
}


def backend(srv, **kw):
    kw.setdefault("backoff", 0)
    return LlamaCppBackend(srv.url, **kw)


def test_is_a_backend():
    assert isinstance(LlamaCppBackend("http://127.0.0.1:1"), Backend)


def test_request_body(fake_server):
    fake_server.json("/completion", FINAL)
    fake_server.json("/completion", FINAL)
    b = backend(fake_server, temperature=0.0, seed=42)
    b.complete("PROMPT", stop=["\nOBSERVATION:"], max_tokens=64)
    b.complete("P2", stop=[], max_tokens=8, grammar='root ::= "x"', id_slot=1, temperature=0.7, seed=7)
    first, second = fake_server.bodies("/completion")
    assert first == {
        "prompt": "PROMPT",
        "n_predict": 64,
        "stop": ["\nOBSERVATION:"],
        "temperature": 0.0,
        "seed": 42,
        "cache_prompt": True,
        "stream": False,
    }
    assert second["grammar"] == 'root ::= "x"' and second["id_slot"] == 1
    assert second["temperature"] == 0.7 and second["seed"] == 7 and second["n_predict"] == 8
    assert fake_server.requests[0].method == "POST"


def test_no_seed_no_grammar_no_slot_by_default_and_params_merged(fake_server):
    fake_server.json("/completion", FINAL)
    backend(fake_server, params={"top_k": 1}).complete("p", stop=["x"], max_tokens=1)
    body = fake_server.bodies()[0]
    assert "seed" not in body and "grammar" not in body and "id_slot" not in body
    assert body["top_k"] == 1


def test_parses_completion_and_usage(fake_server):
    fake_server.json("/completion", FINAL)
    c = backend(fake_server).complete("p", stop=["\nOBSERVATION:"], max_tokens=64)
    assert c.text == FINAL["content"]
    assert c.finish_reason == "stop"
    assert c.stop_word == "\nOBSERVATION:"
    assert c.usage == Usage(prompt_tokens=120, prompt_evaluated=20, prompt_cached=100, completion_tokens=9)
    assert c.timings["prompt_ms"] == 40.5 and c.timings["predicted_per_second"] == 100.0
    assert c.timings["wall_ms"] > 0
    assert c.retries == 0 and c.message is None


def test_usage_on_servers_without_cache_n(fake_server):
    data = {**FINAL, "timings": {"prompt_n": 20, "prompt_ms": 1.0}}
    fake_server.json("/completion", data)
    c = backend(fake_server).complete("p", stop=[], max_tokens=64)
    assert c.usage == Usage(prompt_tokens=120, prompt_evaluated=20, prompt_cached=100, completion_tokens=9)


@pytest.mark.parametrize(
    "fields, finish, stop_word",
    [
        ({"stop_type": "eos", "stopping_word": ""}, "stop", None),
        ({"stop_type": "limit", "stopping_word": ""}, "length", None),
        ({"stop_type": "word", "stopping_word": "\nOBS"}, "stop", "\nOBS"),
        ({"stop_type": "none"}, None, None),
        # servers from before stop_type
        ({"stop_type": None, "stopped_eos": True, "stopping_word": ""}, "stop", None),
        ({"stop_type": None, "stopped_limit": True, "stopping_word": ""}, "length", None),
        ({"stop_type": None, "stopped_word": True, "stopping_word": "X"}, "stop", "X"),
    ],
)
def test_finish_reasons(fake_server, fields, finish, stop_word):
    data = {k: v for k, v in {**FINAL, **fields}.items() if v is not None}
    fake_server.json("/completion", data)
    c = backend(fake_server).complete("p", stop=["\nOBS"], max_tokens=5)
    assert (c.finish_reason, c.stop_word) == (finish, stop_word)


def test_empty_content_is_a_valid_completion(fake_server):
    fake_server.json("/completion", {"content": "", "stop_type": "eos", "tokens_evaluated": 3})
    c = backend(fake_server).complete("p", stop=[], max_tokens=5)
    assert c.text == "" and c.finish_reason == "stop" and c.usage.prompt_tokens == 3


def test_missing_content_is_a_response_error(fake_server):
    fake_server.json("/completion", {"choices": [{"text": "hi"}]})
    with pytest.raises(BackendResponseError, match="without a 'content' string"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_one_megabyte_reply(fake_server):
    big = "a" * (1024 * 1024)
    fake_server.json("/completion", {**FINAL, "content": big})
    assert backend(fake_server).complete("p", stop=[], max_tokens=5).text == big


# -- streaming -------------------------------------------------------------------------------
def stream_events(*pieces, final=None):
    events = [{"content": p, "stop": False, "id_slot": 0} for p in pieces]
    events.append(final or {**FINAL, "content": ""})
    return events


def test_streaming_with_keep_alives(fake_server):
    events = stream_events("TOOL: ", "add", " ARGS: {}")
    events.insert(1, ": keep-alive")
    events.insert(3, ": keep-alive")
    fake_server.sse("/completion", events, chunk_delay=0.005)
    c = backend(fake_server, stream=True).complete("p", stop=["\nOBSERVATION:"], max_tokens=64)
    assert c.text == "TOOL: add ARGS: {}"
    assert c.finish_reason == "stop" and c.stop_word == "\nOBSERVATION:"
    assert c.usage == Usage(120, 20, 100, 9)
    body = fake_server.bodies()[0]
    assert body["stream"] is True and body["cache_prompt"] is True


def test_stream_option_overrides_default(fake_server):
    fake_server.sse("/completion", stream_events("a"))
    fake_server.json("/completion", FINAL)
    b = backend(fake_server)
    assert b.complete("p", stop=[], max_tokens=5, stream=True).text == "a"
    assert backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5, stream=False).text == FINAL["content"]
    assert [r["stream"] for r in fake_server.bodies()] == [True, False]


def test_stream_falls_back_to_json_answer(fake_server):
    # a server (or proxy) that ignores stream=true and answers one JSON object
    fake_server.json("/completion", FINAL)
    c = backend(fake_server).complete("p", stop=[], max_tokens=5, stream=True)
    assert c.text == FINAL["content"]


def test_early_stop_via_on_text(fake_server):
    pieces = ["TOOL: add", " ARGS: {}\n", "OBSERVATION: 3", " more", " and more"]
    events = stream_events(*pieces)
    events[2]["timings"] = {"prompt_n": 20, "cache_n": 100, "predicted_n": 3, "predicted_ms": 3.0}
    fake_server.sse("/completion", events, chunk_delay=0.01)
    seen = []

    def on_text(text):
        seen.append(text)
        return "OBSERVATION:" in text

    c = backend(fake_server).complete("p", stop=[], max_tokens=64, on_text=on_text)
    assert c.finish_reason == "early_stop"
    assert c.text == "TOOL: add ARGS: {}\nOBSERVATION: 3"
    assert seen == ["TOOL: add", "TOOL: add ARGS: {}\n", "TOOL: add ARGS: {}\nOBSERVATION: 3"]
    assert c.usage == Usage(prompt_tokens=120, prompt_evaluated=20, prompt_cached=100, completion_tokens=3)
    assert c.stop_word is None
    body = fake_server.bodies()[0]
    assert body["stream"] is True  # on_text implies streaming


def test_on_text_false_reads_to_the_end(fake_server):
    fake_server.sse("/completion", stream_events("a", "b"))
    c = backend(fake_server).complete("p", stop=[], max_tokens=5, on_text=lambda t: False)
    assert c.text == "ab" and c.finish_reason == "stop"


def test_early_stop_closes_connection_promptly(fake_server):
    # the server would take 30 s to finish; closing must not wait for it (bound generously:
    # a shared 2-core machine may be slow, but not 30 s slow)
    fake_server.sse("/completion", stream_events("x", *["y"] * 300), chunk_delay=0.1)
    started = time.perf_counter()
    c = backend(fake_server).complete("p", stop=[], max_tokens=64, on_text=lambda t: True)
    assert c.text == "x" and c.finish_reason == "early_stop"
    assert time.perf_counter() - started < 10


def test_final_event_content_is_kept(fake_server):
    fake_server.sse("/completion", stream_events("a", final={**FINAL, "content": "b"}))
    assert backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5).text == "ab"


def test_stream_cut_off_mid_event(fake_server):
    fake_server.sse("/completion", [{"content": "a", "stop": False}, b'data: {"content": "b", "st'], cut=True)
    with pytest.raises(BackendResponseError, match="cut off"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_stream_ends_without_final_event(fake_server):
    fake_server.sse("/completion", [{"content": "a", "stop": False}])
    with pytest.raises(BackendResponseError, match="without the final one"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_empty_stream(fake_server):
    fake_server.sse("/completion", [])
    with pytest.raises(BackendResponseError, match="empty stream"):
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)


def test_error_mid_stream(fake_server):
    fake_server.sse(
        "/completion",
        [{"content": "a", "stop": False}, {"error": {"code": 500, "message": "failed to decode the batch"}}],
    )
    with pytest.raises(BackendHTTPError, match="failed to decode the batch") as info:
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)
    assert info.value.status == 500


def test_error_field_mid_stream(fake_server):
    fake_server.sse(
        "/completion",
        [{"content": "a", "stop": False}, 'error: {"code": 400, "message": "context size exceeded"}'],
    )
    with pytest.raises(BackendHTTPError, match="context size exceeded") as info:
        backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5)
    assert info.value.status == 400


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"error": {"code": 500, "message": "boom"}}, None])
def test_http_500_with_and_without_json(fake_server, body):
    if body is None:
        fake_server.add("/completion", status=500, body="")
    else:
        fake_server.add("/completion", status=500, json=body)
    with pytest.raises(BackendHTTPError) as info:
        backend(fake_server).complete("p", stop=[], max_tokens=5)
    assert info.value.status == 500 and info.value.retries == 0
    assert ("boom" in str(info.value)) == (body is not None)
    assert len(fake_server.requests) == 1


def test_503_retried_then_succeeds_and_counts(fake_server):
    fake_server.add("/completion", status=503, json={"error": {"code": 503, "message": "Loading model"}})
    fake_server.add("/completion", status=503, body="")
    fake_server.json("/completion", FINAL)
    c = backend(fake_server).complete("p", stop=[], max_tokens=5)
    assert c.text == FINAL["content"] and c.retries == 2


def test_malformed_json(fake_server):
    fake_server.add("/completion", body="{'content': 'python repr'}")
    with pytest.raises(BackendResponseError, match="malformed JSON"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_empty_reply(fake_server):
    fake_server.add("/completion", body="")
    with pytest.raises(BackendResponseError, match="empty response"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


def test_not_an_object(fake_server):
    fake_server.json("/completion", ["a"])
    with pytest.raises(BackendResponseError, match="not an object"):
        backend(fake_server).complete("p", stop=[], max_tokens=5)


# -- health / template / props / tokenize ---------------------------------------------------
def test_health_ok_and_loading(fake_server):
    fake_server.json("/health", {"status": "ok"})
    fake_server.add(
        "/health", status=503, json={"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    )
    b = backend(fake_server)
    assert b.health() == {"status": "ok"}
    with pytest.raises(BackendHTTPError) as info:
        b.health()
    assert info.value.status == 503
    assert len(fake_server.requests) == 2  # health() never retries


def test_wait_healthy_waits_through_loading(fake_server):
    loading = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
    for _ in range(3):
        fake_server.add("/health", status=503, json=loading)
    fake_server.add("/health", status=503, json={"status": "loading model"})  # older servers
    fake_server.json("/health", {"status": "ok"})
    messages = []
    result = backend(fake_server).wait_healthy(timeout=5, on_wait=messages.append, interval=0.01)
    assert result == {"status": "ok"}
    assert len(fake_server.requests) == 5
    assert messages and all("loading the model" in m for m in messages)
    assert len(messages) == 1  # reported once, not on every poll


def test_wait_healthy_waits_for_a_starting_server(fake_server, dead_url):
    # nothing listens at first: keep polling, then give up with a connection error
    checks = []
    started = time.perf_counter()
    with pytest.raises(BackendConnectionError, match="no server at .* after waiting"):
        LlamaCppBackend(dead_url).wait_healthy(timeout=0.3, interval=0.05, check=lambda: checks.append(1))
    assert time.perf_counter() - started >= 0.3  # it waited the whole timeout ...
    assert len(checks) >= 3  # ... polling, not in one long request


def test_wait_healthy_gives_up_while_loading(fake_server):
    fake_server.add("/health", status=503, json={"error": {"message": "Loading model"}}, repeat=True)
    with pytest.raises(BackendTimeout, match="still loading the model after 0.3 s") as info:
        backend(fake_server).wait_healthy(timeout=0.3, interval=0.05)
    assert isinstance(info.value, BackendError)


def test_wait_healthy_check_can_abort(fake_server, dead_url):
    class Died(Exception):
        pass

    def check():
        raise Died("llama-server exited")

    with pytest.raises(Died):
        LlamaCppBackend(dead_url).wait_healthy(timeout=5, check=check)


def test_wait_healthy_raises_on_other_errors(fake_server):
    fake_server.add("/health", status=404, body="not found")
    with pytest.raises(BackendHTTPError) as info:
        backend(fake_server).wait_healthy(timeout=5, interval=0.01)
    assert info.value.status == 404


def test_apply_template_is_cached(fake_server):
    fake_server.json("/apply-template", {"prompt": "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\n"})
    fake_server.json("/apply-template", {"prompt": "other"})
    b = backend(fake_server)
    msgs = [{"role": "system", "content": "S"}]
    first = b.apply_template(msgs)
    assert first.startswith("<|im_start|>system")
    assert b.apply_template([dict(m) for m in msgs]) == first
    assert len(fake_server.requests) == 1
    assert fake_server.bodies()[0] == {"messages": msgs}
    assert b.apply_template(msgs, add_generation_prompt=False) == "other"
    assert fake_server.bodies()[1]["add_generation_prompt"] is False


def test_apply_template_errors(fake_server):
    fake_server.json("/apply-template", {"nope": 1})
    fake_server.add("/apply-template", status=404, json={"error": {"code": 404, "message": "File Not Found"}})
    b = backend(fake_server)
    with pytest.raises(BackendResponseError, match="'prompt'"):
        b.apply_template([{"role": "user", "content": "x"}])
    with pytest.raises(BackendHTTPError, match="no such endpoint"):
        b.apply_template([{"role": "user", "content": "y"}])


def test_props_and_tokenize(fake_server):
    fake_server.json("/props", {"chat_template": "{{x}}", "default_generation_settings": {"n_ctx": 4096}})
    fake_server.json("/tokenize", {"tokens": [1, 2, 3]})
    fake_server.json("/tokenize", {"tokens": [{"id": 5, "piece": "a"}]})
    fake_server.json("/tokenize", {"tokens": ["x"]})
    b = backend(fake_server)
    assert b.props()["chat_template"] == "{{x}}"
    assert b.tokenize("abc") == [1, 2, 3]
    assert fake_server.bodies("/tokenize")[0] == {"content": "abc", "add_special": False}
    assert b.tokenize("a") == [5]
    with pytest.raises(BackendResponseError):
        b.tokenize("x")


def test_the_chat_backend_talks_to_the_same_server_with_the_same_settings():
    from textagent.backends.chat import ChatAsTextBackend
    from textagent.backends.http_settings import HttpSettings

    backend = LlamaCppBackend("http://127.0.0.1:9", http=HttpSettings(timeout=7, retries=0), temperature=0.3, seed=4)
    chat = backend.chat_backend()
    assert isinstance(chat, ChatAsTextBackend) and chat.url == backend.url + "/v1" and chat.session is backend.session
    assert (chat.http, chat.temperature, chat.seed) == (backend.http, 0.3, 4) and chat.http.retries == 0


def test_token_probs_asks_for_the_first_tokens_alternatives_before_sampling(fake_server):
    top = [{"id": 1, "token": "ANSWER", "logprob": -0.5}, {"id": 2, "token": "TOOL", "logprob": -1.2}]
    fake_server.json(
        "/completion", {**FINAL, "completion_probabilities": [{"id": 1, "token": "ANSWER", "top_logprobs": top}]}
    )
    fake_server.json("/completion", FINAL)
    b = backend(fake_server)
    completion = b.complete("P", stop=[], max_tokens=1, token_probs=5)
    assert [t for t, _ in completion.top_tokens] == ["ANSWER", "TOOL"]
    assert completion.top_tokens[0][1] == pytest.approx(0.6065, abs=1e-4)
    assert b.complete("P", stop=[], max_tokens=1).top_tokens == ()
    asked, plain = fake_server.bodies("/completion")
    assert asked["n_probs"] == 5 and asked["post_sampling_probs"] is False
    assert "n_probs" not in plain and b.capabilities.token_probs


@pytest.mark.parametrize(
    "entry",
    [
        {"probs": [{"tok_str": "TOOL", "prob": 0.3}, {"tok_str": "ANSWER", "prob": 0.7}]},  # servers before 2025
        {"top_probs": [{"token": "ANSWER", "prob": 0.7}, {"token": "TOOL", "prob": 0.3}]},  # post-sampling
        {
            "top_logprobs": [
                {"token": "ANSWER", "logprob": -0.35667},
                {"token": "TOOL", "logprob": -1.20397},
                {"token": 7, "logprob": -1},
                {"token": "x", "logprob": 3},
                {"token": "y"},
                "junk",
            ]
        },
    ],
)
def test_top_tokens_read_from_every_form_servers_send_likeliest_first(fake_server, entry):
    fake_server.json("/completion", {**FINAL, "completion_probabilities": [entry]})
    top = backend(fake_server).complete("P", stop=[], max_tokens=1, token_probs=2).top_tokens
    assert [t for t, _ in top] == ["ANSWER", "TOOL"] and top[1][1] == pytest.approx(0.3, abs=1e-4)


@pytest.mark.parametrize("probabilities", [None, [], "x", [None], [{"top_logprobs": "x"}]])
def test_no_top_tokens_from_an_answer_without_them(fake_server, probabilities):
    fake_server.json("/completion", {**FINAL, "completion_probabilities": probabilities})
    assert backend(fake_server).complete("P", stop=[], max_tokens=1, token_probs=2).top_tokens == ()
