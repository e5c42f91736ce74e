"""langchain-openai's ChatOpenAI and LangGraph's create_react_agent, unchanged, against the proxy
and a scripted llama.cpp upstream: bind_tools, streaming, with_structured_output, and the
agent with and without response_format."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_openai")
pytest.importorskip("langgraph")
pytest.importorskip("uvicorn")

from clientkit import Weather
from clientkit import get_weather as weather
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from proxykit import said

# LangGraph 1.x moved create_react_agent to langchain.agents (create_agent); the old one is what users have
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


get_weather = tool(weather, parse_docstring=True)


@pytest.fixture
def model(proxy):
    return ChatOpenAI(base_url=proxy.url + "/v1", api_key="-", model="m", max_retries=0, temperature=0)


def test_bind_tools_and_a_result(upstream, model):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: It is sunny.\nTake a hat."))
    bound = model.bind_tools([get_weather])
    ask = HumanMessage("Weather in Paris?")
    first = bound.invoke([ask])
    assert first.tool_calls[0]["name"] == "get_weather" and first.tool_calls[0]["args"] == {"city": "Paris"}
    result = ToolMessage(get_weather.invoke(first.tool_calls[0]["args"]), tool_call_id=first.tool_calls[0]["id"])
    assert bound.invoke([ask, first, result]).content == "It is sunny.\nTake a hat."


def test_streaming(upstream, model):
    upstream.sse(
        "/completion",
        [
            {"content": "ANSWER: one, ", "stop": False},
            {"content": "two", "stop": False},
            {"content": "", "stop": True, "stop_type": "eos"},
        ],
    )
    assert "".join(chunk.content for chunk in model.stream("count")) == "one, two"


def test_with_structured_output(upstream, model):
    upstream.json("/completion", said('ANSWER: {"city": "Oslo", "temp": 3}'))
    assert model.with_structured_output(Weather).invoke("Oslo?") == Weather(city="Oslo", temp=3)


def test_create_react_agent(upstream, model):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny, 24 C."))
    agent = create_react_agent(model, [get_weather])
    out = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    assert out["messages"][-1].content == "Sunny, 24 C."


def test_create_react_agent_with_response_format(upstream, model):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said("ANSWER: Sunny, 24 C."))
    upstream.json("/completion", said('ANSWER: {"city": "Paris", "temp": 24}'))
    agent = create_react_agent(model, [get_weather], response_format=Weather)
    out = agent.invoke({"messages": [("user", "Weather in Paris?")]})
    assert out["structured_response"] == Weather(city="Paris", temp=24)
    last = upstream.bodies("/completion")[-1]
    assert "ANSWER: Sunny, 24 C.<|im_end|>" in last["prompt"] and "structured-answer" in last["grammar"]


@pytest.mark.integration
def test_create_react_agent_with_response_format_on_the_real_model(real_proxy):
    model = ChatOpenAI(
        base_url=real_proxy.url + "/v1", api_key="-", model="m", max_retries=0, temperature=0, timeout=180
    )
    agent = create_react_agent(model, [get_weather], response_format=Weather)
    out = agent.invoke(
        {"messages": [("user", "What is the weather in Paris? Give the city and temperature.")]},
        {"recursion_limit": 12},
    )
    assert isinstance(out["structured_response"], Weather)  # held by the grammar, checked by the proxy
    assert all("ANSWER:" not in str(m.content) for m in out["messages"])
