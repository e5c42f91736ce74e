"""Answers as real clients need them: any length and shape, a prefill, response_format held
and checked, content without protocol keywords, tool_choice that cannot be met, histories
written as text, sampling fields, a truthful /health."""

from __future__ import annotations

import json

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from proxykit import ASK, WEATHER, said, start

from textagent.proxy import REPAIRS_HEADER

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "report", "schema": CITY, "strict": True}}


def post(proxy, body) -> requests.Response:
    return requests.post(proxy.url + "/v1/chat/completions", json=body, timeout=30)


def message(resp: requests.Response) -> dict:
    assert resp.status_code == 200, resp.text
    return resp.json()["choices"][0]["message"]


# -- answers of any length and shape -------------------------------------------------------------

MULTILINE = "Three steps:\n1. boil water\n2. add tea\n\n3. wait"
FENCED = "Here is the code:\n```python\ndef f(x):\n    return x + 1\n```\nCall it with f(1)."


@pytest.mark.parametrize("text", [MULTILINE, FENCED, '{"a": [1,\n  2]}'])
def test_a_multi_line_answer_arrives_whole(upstream, proxy, text):
    upstream.json("/completion", said("ANSWER: " + text))
    assert message(post(proxy, {"messages": ASK}))["content"] == text
    upstream.json("/completion", said("Thought: easy\nANSWER: " + text))
    assert message(post(proxy, {"messages": ASK, "tools": [WEATHER]}))["content"] == text


def test_a_multi_line_answer_is_written_back_whole_on_the_next_turn(upstream, proxy):
    upstream.json("/completion", said("ANSWER: " + FENCED))
    upstream.json("/completion", said("ANSWER: ok"))
    first = message(post(proxy, {"messages": ASK}))
    post(proxy, {"messages": [*ASK, first, {"role": "user", "content": "thanks"}]})
    prompts = [b["prompt"] for b in upstream.bodies("/completion")]
    assert prompts[1].startswith(prompts[0] + "ANSWER: " + FENCED)


def test_a_multi_line_answer_the_proxy_did_not_write_is_kept_whole(upstream, proxy):
    upstream.json("/completion", said("ANSWER: fine"))
    history = [*ASK, {"role": "assistant", "content": FENCED}, {"role": "user", "content": "and?"}]
    post(proxy, {"messages": history})
    assert "ANSWER: " + FENCED in upstream.bodies("/completion")[0]["prompt"]


def test_an_answer_that_repeats_its_keyword_is_clean(upstream, proxy):
    upstream.json("/completion", said("ANSWER: ANSWER: sunny"))
    assert message(post(proxy, {"messages": ASK}))["content"] == "sunny"


@pytest.mark.parametrize(
    "reply, content",
    [("Thought: I know this.\nParis is the capital.", "Paris is the capital."), ("Thought: Paris.", "Paris.")],
)
def test_a_prose_answer_keeps_its_words_not_its_thoughts(upstream, proxy, reply, content):
    upstream.json("/completion", said(reply))
    assert message(post(proxy, {"messages": ASK, "tools": [WEATHER]}))["content"] == content


# -- a conversation ending with an assistant message ---------------------------------------------


def test_a_final_assistant_message_is_continued(upstream, proxy):
    upstream.json("/completion", said(" Paris, on the Seine."))
    resp = post(
        proxy,
        {
            "messages": [
                {"role": "user", "content": "Capital of France?"},
                {"role": "assistant", "content": "The capital is"},
            ]
        },
    )
    assert message(resp)["content"] == " Paris, on the Seine."
    prompt = upstream.bodies("/completion")[0]["prompt"]
    assert prompt.endswith("<|im_start|>assistant\nANSWER: The capital is")


def test_a_prefill_that_turns_into_a_call_gives_the_call(upstream, proxy):
    upstream.json("/completion", said('\nTOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(
        proxy,
        {"messages": [*ASK, {"role": "assistant", "content": "Thought: I should look it up"}], "tools": [WEATHER]},
    )
    assert message(resp)["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_conversation_ending_with_unanswered_calls_is_400(upstream, proxy):
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]
    resp = post(
        proxy, {"messages": [*ASK, {"role": "assistant", "content": None, "tool_calls": calls}], "tools": [WEATHER]}
    )
    assert resp.status_code == 400 and resp.json()["error"]["param"] == "messages"


# -- response_format -----------------------------------------------------------------------------


def test_json_schema_is_held_by_the_grammar_and_checked(upstream, proxy):
    upstream.json("/completion", said('ANSWER: {"city": "Paris", "temp": 21}'))
    resp = post(proxy, {"messages": ASK, "response_format": SCHEMA_FORMAT})
    assert json.loads(message(resp)["content"]) == {"city": "Paris", "temp": 21}
    sent = upstream.bodies("/completion")[0]
    root = sent["grammar"].splitlines()[0]
    assert "structured-answer" in root and 'structured-answer ::= "ANSWER: "' in sent["grammar"]
    assert '"temp"' in sent["prompt"]  # the schema is in the system prompt


def test_an_answer_outside_the_schema_is_repaired(upstream, proxy):
    proxy.upstream.takes_grammar = False
    upstream.json("/completion", said("ANSWER: It is 21 degrees in Paris."))
    upstream.json("/completion", said('ANSWER: {"city": "Paris"}'))
    upstream.json("/completion", said('ANSWER: ```json\n{"city": "Paris", "temp": 21}\n```'))
    resp = post(proxy, {"messages": ASK, "response_format": SCHEMA_FORMAT})
    assert resp.headers[REPAIRS_HEADER] == "2"
    assert message(resp)["content"] == '{"city": "Paris", "temp": 21}'
    prompts = [b["prompt"] for b in upstream.bodies("/completion")]
    assert "not valid JSON" in prompts[1] and "temp" in prompts[2][len(prompts[1]) :]


def test_json_object_wants_an_object(upstream, proxy):
    proxy.upstream.takes_grammar = False
    upstream.json("/completion", said("ANSWER: [1, 2]"))
    upstream.json("/completion", said('ANSWER: {"n": [1, 2]}'))
    resp = post(proxy, {"messages": ASK, "response_format": {"type": "json_object"}})
    assert json.loads(message(resp)["content"]) == {"n": [1, 2]}


def test_response_format_that_is_never_met_is_an_error(upstream, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said("ANSWER: sunny"))
    resp = post(proxy, {"messages": ASK, "response_format": SCHEMA_FORMAT})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "response_format_not_met"


def test_response_format_after_an_answer_asks_for_that_answer_as_json(upstream, proxy):
    """LangGraph's structured response: [user, assistant, tool, assistant] + response_format."""
    upstream.json("/completion", said('ANSWER: {"city": "Paris", "temp": 24}'))
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "24 C"},
        {"role": "assistant", "content": "It is 24 C in Paris."},
    ]
    resp = post(proxy, {"messages": history, "response_format": SCHEMA_FORMAT})
    assert json.loads(message(resp)["content"]) == {"city": "Paris", "temp": 24}
    prompt = upstream.bodies("/completion")[0]["prompt"]
    assert "ANSWER: It is 24 C in Paris.<|im_end|>" in prompt and "as JSON" in prompt.rsplit("<|im_start|>user", 1)[1]


@pytest.mark.parametrize(
    "bad",
    [{"type": "xml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}}],
)
def test_a_malformed_response_format_is_400(upstream, proxy, bad):
    resp = post(proxy, {"messages": ASK, "response_format": bad})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_response_format"


# -- clean content, tool_choice that cannot be met -----------------------------------------------


def test_required_that_is_never_met_is_an_error_not_text(upstream, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said("ANSWER: no"))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "tool_choice_not_met" and "ANSWER" not in resp.text


def test_tool_choice_none_after_repairs_gives_the_words_not_the_call(upstream, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said('Let me check.\nTOOL: get_weather ARGS: {"city": "Paris"}'))
    resp = post(proxy, {"messages": ASK, "tools": [WEATHER], "tool_choice": "none"})
    assert message(resp) == {"role": "assistant", "content": "Let me check."}


# -- histories written as text (smolagents) ------------------------------------------------------


def test_calls_and_observations_written_as_text_are_read_as_calls_and_results(upstream, proxy):
    upstream.json("/completion", said("ANSWER: sunny"))
    text_call = (
        "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': {'name': 'get_weather', "
        "'arguments': {'city': 'Paris'}}}]"
    )
    history = [
        *ASK,
        {"role": "assistant", "content": [{"type": "text", "text": text_call}]},
        {"role": "user", "content": [{"type": "text", "text": "Call id: call_1\nObservation:\nsunny, 24 C"}]},
    ]
    assert message(post(proxy, {"messages": history, "tools": [WEATHER]}))["content"] == "sunny"
    prompt = upstream.bodies("/completion")[0]["prompt"]
    assert 'TOOL: get_weather ARGS: {"city": "Paris"}<|im_end|>' in prompt
    assert "OBSERVATION (get_weather): Observation" not in prompt
    assert "OBSERVATION (get_weather): sunny, 24 C" in prompt and "Calling tools" not in prompt


# -- sampling fields -----------------------------------------------------------------------------


def test_sampling_fields_reach_a_llama_cpp_upstream(upstream, proxy):
    upstream.json("/completion", said("ANSWER: hi"))
    post(
        proxy,
        {"messages": ASK, "top_p": 0.9, "frequency_penalty": 0.5, "presence_penalty": -0.5, "logit_bias": {"42": -100}},
    )
    sent = upstream.bodies("/completion")[0]
    assert (sent["top_p"], sent["frequency_penalty"], sent["presence_penalty"]) == (0.9, 0.5, -0.5)
    assert sent["logit_bias"] == [[42, -100]]
    upstream.json("/completion", said("ANSWER: hi"))
    post(proxy, {"messages": ASK})
    assert "top_p" not in upstream.bodies("/completion")[1]  # one request's fields stay its own


@pytest.mark.parametrize(
    "body, param",
    [
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 3}, "logprobs"),
        ({"top_p": 2}, "top_p"),
        ({"logit_bias": {"x": 1}}, "logit_bias"),
    ],
)
def test_sampling_fields_that_cannot_be_honoured_are_400(upstream, proxy, body, param):
    resp = post(proxy, {"messages": ASK, **body})
    assert resp.status_code == 400 and resp.json()["error"]["param"] == param
    assert not upstream.bodies("/completion")


def test_an_ollama_upstream_refuses_logit_bias():
    from httpfake import FakeServer

    from textagent.proxy import ProxyServer, Upstream, UpstreamConfig

    with FakeServer() as srv:
        up = Upstream(UpstreamConfig(endpoint=srv.url, api="ollama", model="m", chat_format="chatml", timeout=5))
        with ProxyServer(up) as proxy:
            assert up.wait(10) and up.state == "ready"
            resp = post(proxy, {"messages": ASK, "logit_bias": {"1": 2}})
            assert resp.status_code == 400 and resp.json()["error"]["code"] == "unsupported_parameter"
            srv.ndjson("/api/generate", [{"response": "ANSWER: hi", "done": True, "done_reason": "stop"}])
            assert message(post(proxy, {"messages": ASK, "top_p": 0.5}))["content"] == "hi"
            assert srv.bodies("/api/generate")[0]["options"]["top_p"] == 0.5


# -- /health -------------------------------------------------------------------------------------


def test_health_is_503_while_the_upstream_does_not_answer():
    from httpfake import FakeServer

    with FakeServer() as srv:
        for _ in range(2):  # the proxy's start, then the first /health
            srv.json("/health", {"status": "ok"})
        srv.json("/health", {"error": {"message": "down"}}, status=500, repeat=True)
        proxy = start(srv)
        try:
            assert requests.get(proxy.url + "/health", timeout=5).json()["status"] == "ok"
            health = requests.get(proxy.url + "/health", timeout=10)
            assert health.status_code == 503 and health.json()["status"] == "unavailable"
            assert health.json()["upstream"]["state"] == "unavailable"
        finally:
            proxy.stop()


def test_health_of_an_upstream_without_a_health_endpoint_says_whether_it_answers():
    from httpfake import FakeServer

    from textagent.proxy import ProxyServer, Upstream, UpstreamConfig

    srv = FakeServer()
    up = Upstream(UpstreamConfig(endpoint=srv.url, api="completions", model="m", chat_format="chatml", timeout=5))
    with ProxyServer(up) as proxy:
        assert up.wait(10) and up.state == "ready"
        assert requests.get(proxy.url + "/health", timeout=10).json()["status"] == "ok"
        srv.stop()
        health = requests.get(proxy.url + "/health", timeout=10)
        assert health.status_code == 503 and health.json()["upstream"]["state"] == "unavailable"
