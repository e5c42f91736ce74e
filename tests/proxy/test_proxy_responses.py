"""POST /v1/responses on the wire: input items read as the conversation they are, output items,
what is refused."""

from __future__ import annotations

import json

import pytest
import requests

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from proxykit import said

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def post(proxy, body) -> requests.Response:
    return requests.post(proxy.url + "/v1/responses", json=body, timeout=30)


def test_items_become_the_conversation(upstream, proxy):
    upstream.json("/completion", said("ANSWER: Both sunny."))
    data = post(
        proxy,
        {
            "model": "m",
            "instructions": "Be brief.",
            "tools": [WEATHER],
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Paris and Rome?"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
                {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {
                    "type": "function_call_output",
                    "call_id": "c2",
                    "output": [{"type": "input_text", "text": "sunny too"}],
                },
            ],
        },
    ).json()
    assert data["object"] == "response" and data["status"] == "completed"
    (item,) = data["output"]
    assert item["type"] == "message" and item["content"][0] == {
        "type": "output_text",
        "text": "Both sunny.",
        "annotations": [],
        "logprobs": [],
    }
    prompt = upstream.bodies("/completion")[0]["prompt"]
    assert 'TOOL: get_weather ARGS: {"city": "Paris"}\nTOOL: get_weather ARGS: {"city": "Rome"}<|im_end|>' in prompt
    assert "OBSERVATION (get_weather): sunny\nOBSERVATION (get_weather): sunny too" in prompt


def test_calls_and_a_named_tool_choice(upstream, proxy):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Oslo"}'))
    data = post(
        proxy, {"input": "Oslo?", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"}}
    ).json()
    (call,) = data["output"]
    assert call["type"] == "function_call" and call["call_id"].startswith("call_") and call["id"].startswith("fc_")
    assert json.loads(call["arguments"]) == {"city": "Oslo"} and data["tool_choice"] == {
        "type": "function",
        "name": "get_weather",
    }
    assert upstream.bodies("/completion")[0]["grammar"].splitlines()[0].endswith("calls")


def test_an_answer_cut_by_max_output_tokens_is_incomplete(upstream, proxy):
    upstream.json("/completion", said("ANSWER: It is", stop_type="limit"))
    data = post(proxy, {"input": "Weather?", "max_output_tokens": 3}).json()
    assert data["status"] == "incomplete" and data["incomplete_details"] == {"reason": "max_output_tokens"}
    assert upstream.bodies("/completion")[0]["n_predict"] == 3


def test_text_format_json_schema(upstream, proxy):
    upstream.json("/completion", said('ANSWER: {"city": "Oslo"}'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    data = post(
        proxy,
        {"input": "Oslo?", "text": {"format": {"type": "json_schema", "name": "c", "schema": schema, "strict": True}}},
    ).json()
    assert json.loads(data["output"][0]["content"][0]["text"]) == {"city": "Oslo"}


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": []}, "input"),
    ],
)
def test_what_the_proxy_cannot_do_is_400(upstream, proxy, body, param):
    resp = post(proxy, body)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == param
    assert not upstream.bodies("/completion")


@pytest.mark.parametrize(
    "body, param, says",
    [
        ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role", "input[0]"),
        (
            {
                "instructions": "Be brief.",
                "input": [{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}],
            },
            "input[1].role",
            "input[1]",
        ),
        (
            {"input": "x", "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "nonsense"}}}},
            "text.format.schema",
            "text.format",
        ),
        (
            {"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "nonsense"}}]},
            "tools[0]",
            "tools[0]",
        ),
    ],
)
def test_errors_name_the_responses_parameters_not_the_chat_ones(upstream, proxy, body, param, says):
    """Hardening round 4, O3: `messages[1].role` for `input[0]`, `response_format...` for `text.format`."""
    resp = post(proxy, body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == param and says in error["message"] + error["param"]
    assert "messages[" not in error["message"] + error["param"] and "response_format" not in error["message"]
    assert not upstream.bodies("/completion")
