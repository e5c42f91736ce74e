"""pydantic-ai (pydantic-ai-slim with the openai SDK), unchanged, against the proxy and a scripted
llama.cpp upstream: a tool run on its chat model and its Responses model, output through a tool
(its default) and NativeOutput (response_format)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("uvicorn")

from clientkit import Weather, get_weather
from proxykit import said
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

MODELS = {"chat": OpenAIChatModel, "responses": OpenAIResponsesModel}


@pytest.fixture(params=sorted(MODELS))
def model(request, proxy):
    return MODELS[request.param]("m", provider=OpenAIProvider(base_url=proxy.url + "/v1", api_key="-"))


def test_a_tool_run(upstream, model):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny,\n24 C."))
    agent = Agent(model, instructions="Be brief.")
    agent.tool_plain(get_weather)
    assert agent.run_sync("Weather in Paris?").output == "Sunny,\n24 C."
    assert "OBSERVATION (get_weather): sunny, 24 C in Paris" in upstream.bodies("/completion")[1]["prompt"]


def test_output_through_its_tool(upstream, model):
    upstream.json("/completion", said('TOOL: final_result ARGS: {"city": "Oslo", "temp": 3}'))
    assert Agent(model, output_type=Weather).run_sync("Oslo?").output == Weather(city="Oslo", temp=3)


def test_native_output(upstream, model):
    upstream.json("/completion", said('ANSWER: {"city": "Oslo", "temp": 3}'))
    agent = Agent(model, output_type=NativeOutput(Weather))
    assert agent.run_sync("Oslo?").output == Weather(city="Oslo", temp=3)
    assert "structured-answer" in upstream.bodies("/completion")[0]["grammar"]


def test_a_streamed_answer(upstream, model):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: It is ", "stop": False},
            {"content": "sunny in Paris today.", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )

    async def run() -> list[str]:
        async with Agent(model).run_stream("Paris?") as result:
            return [text async for text in result.stream_text(delta=True)]

    import asyncio

    assert "".join(asyncio.run(run())) == "It is sunny in Paris today."


@pytest.mark.integration
def test_native_output_on_the_real_model(real_proxy):
    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=real_proxy.url + "/v1", api_key="-"))
    agent = Agent(model, output_type=NativeOutput(Weather), model_settings={"temperature": 0})
    assert isinstance(agent.run_sync("Paris is at 21 degrees. Report it.").output, Weather)
