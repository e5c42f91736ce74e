"""The openai SDK, unchanged, against the proxy and a scripted llama.cpp upstream: chat
completions plain, streamed, with response_format through ``.parse()``, and the Responses API
plain and streamed."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")
pytest.importorskip("uvicorn")

from proxykit import said  # noqa: E402

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
RESPONSES_WEATHER = {"type": "function", **WEATHER["function"]}


@pytest.fixture
def client(proxy):
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="-", max_retries=0)


def test_a_tool_round_trip(upstream, client):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny,\n24 C."))
    messages: list = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}]
    second = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "Sunny,\n24 C."


def test_streamed_content_and_calls(upstream, client):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: one\n", "stop": False},
            {"content": "two", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    chunks = list(
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "count"}], stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one\ntwo"
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Rome"}'))
    with client.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "Rome?"}], tools=[WEATHER]
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.tool_calls[0].function.name == "get_weather"


class Report(pydantic.BaseModel):
    city: str
    temp: int


def test_parse_with_a_pydantic_model(upstream, client):
    upstream.json("/completion", said('ANSWER: {"city": "Paris", "temp": 24}'))
    parsed = client.chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "Paris report"}], response_format=Report
    )
    assert parsed.choices[0].message.parsed == Report(city="Paris", temp=24)
    assert "grammar" in upstream.bodies("/completion")[0]


def test_required_that_cannot_be_met_raises(upstream, client, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said("ANSWER: no"))
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], tools=[WEATHER], tool_choice="required"
        )
    assert caught.value.body["code"] == "tool_choice_not_met"


def test_the_responses_api_with_a_function_tool(upstream, client):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny in Paris."))
    first = client.responses.create(
        model="m", input="Weather in Paris?", tools=[RESPONSES_WEATHER], instructions="Be brief."
    )
    (call,) = first.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"city": "Paris"}
    assert first.usage.input_tokens == 100 and first.status == "completed"
    second = client.responses.create(
        model="m",
        tools=[RESPONSES_WEATHER],
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
    )
    assert second.output_text == "Sunny in Paris."
    prompts = [b["prompt"] for b in upstream.bodies("/completion")]
    assert "Be brief." in prompts[0] and "OBSERVATION (get_weather): sunny" in prompts[1]


def test_the_responses_api_streamed(upstream, client):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: Hello", "stop": False},
            {"content": " there, how are you today?", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    events = list(client.responses.create(model="m", input="hi", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert (
        "".join(e.delta for e in events if e.type == "response.output_text.delta") == "Hello there, how are you today?"
    )
    assert events[-1].response.output_text == "Hello there, how are you today?"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Oslo"}'))
    with client.responses.stream(model="m", input="Oslo?", tools=[RESPONSES_WEATHER]) as stream:
        final = stream.get_final_response()
    assert final.output[0].type == "function_call" and final.output[0].name == "get_weather"


def test_the_responses_api_refuses_what_it_cannot_keep(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input="hi", previous_response_id="resp_1")
    assert caught.value.body["param"] == "previous_response_id"


@pytest.mark.integration
def test_a_tool_round_trip_and_a_streamed_answer_on_the_real_model(real_proxy):
    client = openai.OpenAI(base_url=real_proxy.url + "/v1", api_key="-", max_retries=0, timeout=180)
    messages: list = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    first = client.chat.completions.create(
        model="m", messages=messages, tools=[WEATHER], tool_choice="required", temperature=0
    )
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and isinstance(json.loads(call.function.arguments)["city"], str)
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"}]
    chunks = list(
        client.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], tool_choice="none", temperature=0, stream=True
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.strip() and "ANSWER:" not in content and "TOOL:" not in content
    answer = client.responses.create(model="m", input="Say hello in French.", temperature=0)
    assert answer.output_text.strip() and "ANSWER:" not in answer.output_text
