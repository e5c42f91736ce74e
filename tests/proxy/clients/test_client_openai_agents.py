"""The OpenAI Agents SDK, unchanged, against the proxy and a scripted llama.cpp upstream: its
default model (the Responses API) and its chat-completions model, a tool run, output_type,
streaming."""

from __future__ import annotations

import asyncio

import pytest

agents = pytest.importorskip("agents")
pytest.importorskip("uvicorn")

import openai  # noqa: E402
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool  # noqa: E402
from clientkit import Weather  # noqa: E402
from clientkit import get_weather as weather  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from proxykit import said  # noqa: E402

agents.set_tracing_disabled(True)  # traces would go to OpenAI's servers


get_weather = function_tool(weather)


MODELS = {"responses": OpenAIResponsesModel, "chat": OpenAIChatCompletionsModel}


@pytest.fixture(params=sorted(MODELS))
def model(request, proxy):
    client = AsyncOpenAI(base_url=proxy.url + "/v1", api_key="-", max_retries=0)
    return MODELS[request.param](model="m", openai_client=client)


def test_a_tool_run(upstream, model):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny in Paris, 24 C."))
    agent = Agent(name="weather", instructions="Answer briefly.", tools=[get_weather], model=model)
    result = Runner.run_sync(agent, "Weather in Paris?")
    assert result.final_output == "Sunny in Paris, 24 C."
    prompts = [b["prompt"] for b in upstream.bodies("/completion")]
    assert "Answer briefly." in prompts[0] and "OBSERVATION (get_weather): sunny, 24 C in Paris" in prompts[1]


def test_output_type(upstream, model):
    upstream.json("/completion", said('ANSWER: {"city": "Oslo", "temp": 3}'))
    agent = Agent(name="weather", instructions="Report.", output_type=Weather, model=model)
    assert Runner.run_sync(agent, "Oslo?").final_output == Weather(city="Oslo", temp=3)


def test_a_streamed_run(upstream, model):
    upstream.sse(
        "/completion",
        [
            {"content": 'TOOL: get_weather ARGS: {"city": "Rome"}', "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: Rome is sunny", "stop": False},
            {"content": " and warm today.", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    agent = Agent(name="weather", tools=[get_weather], model=model)

    async def run() -> tuple[str, list[str]]:
        streamed = Runner.run_streamed(agent, "Rome?")
        kinds = [event.type async for event in streamed.stream_events()]
        return streamed.final_output, kinds

    output, kinds = asyncio.run(run())
    assert output == "Rome is sunny and warm today." and "raw_response_event" in kinds


def test_required_that_cannot_be_met_is_an_error_not_an_answer(upstream, model, proxy):
    proxy.upstream.takes_grammar = False
    for _ in range(3):
        upstream.json("/completion", said("ANSWER: no"))
    agent = Agent(
        name="weather", tools=[get_weather], model=model, model_settings=agents.ModelSettings(tool_choice="required")
    )
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        Runner.run_sync(agent, "x")
    assert caught.value.body["code"] == "tool_choice_not_met"


@pytest.mark.integration
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_tool_run_on_the_real_model(real_proxy, kind):
    client = AsyncOpenAI(base_url=real_proxy.url + "/v1", api_key="-", max_retries=0, timeout=180)
    agent = Agent(
        name="weather",
        instructions="Use the tool, then answer.",
        tools=[get_weather],
        model=MODELS[kind](model="m", openai_client=client),
        model_settings=agents.ModelSettings(temperature=0),
    )
    result = Runner.run_sync(agent, "What is the weather in Paris?", max_turns=6)
    assert isinstance(result.final_output, str) and result.final_output.strip()
    assert "ANSWER:" not in result.final_output and "TOOL:" not in result.final_output
