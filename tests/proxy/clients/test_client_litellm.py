"""litellm's OpenAI-compatible route, unchanged, against the proxy and a scripted llama.cpp
upstream: tool calls, a tool result, streaming, response_format."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of its price list
litellm = pytest.importorskip("litellm")
pytest.importorskip("uvicorn")

from proxykit import WEATHER, said  # noqa: E402

# litellm's own TypedDicts warn under pydantic 2.12+ on import of its providers
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* the `ReadOnly` qualifier:UserWarning")


@pytest.fixture
def ask(proxy):
    def ask(**kw):
        return litellm.completion(model="openai/m", api_base=proxy.url + "/v1", api_key="-", num_retries=0, **kw)

    return ask


def test_a_call_and_its_result(upstream, ask):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny."))
    messages: list = [{"role": "user", "content": "Weather in Paris?"}]
    first = ask(messages=messages, tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [first.choices[0].message.model_dump(), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    assert ask(messages=messages, tools=[WEATHER]).choices[0].message.content == "Sunny."


def test_streaming(upstream, ask):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: one\n", "stop": False},
            {"content": "two", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    chunks = ask(messages=[{"role": "user", "content": "count"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one\ntwo"


def test_response_format(upstream, ask):
    upstream.json("/completion", said('ANSWER: {"city": "Oslo"}'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    reply = ask(
        messages=[{"role": "user", "content": "Oslo?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    )
    assert json.loads(reply.choices[0].message.content) == {"city": "Oslo"}


@pytest.mark.integration
def test_a_call_and_a_streamed_answer_on_the_real_model(real_proxy):
    ask = dict(
        model="openai/m", api_base=real_proxy.url + "/v1", api_key="-", num_retries=0, temperature=0, timeout=180
    )
    first = litellm.completion(
        messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER], tool_choice="required", **ask
    )
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
    chunks = litellm.completion(messages=[{"role": "user", "content": "Name three colours."}], stream=True, **ask)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() and "ANSWER:" not in text
