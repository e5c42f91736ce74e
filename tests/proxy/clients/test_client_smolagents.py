"""smolagents' ToolCallingAgent with OpenAIServerModel, unchanged, against the proxy and a
scripted llama.cpp upstream. smolagents writes its earlier calls into assistant text ("Calling
tools: [...]") and their results into user text ("Observation: ..."): the model must see them as
its calls and their observations."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("uvicorn")

from clientkit import get_weather as weather
from proxykit import said, start
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

get_weather = tool(weather)


def test_a_tool_calling_run(upstream, tmp_path):
    proxy = start(upstream, trace_dir=tmp_path)
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"city": "Paris"}'))
    upstream.json("/completion", said('TOOL: final_answer ARGS: {"answer": "Sunny, 24 C."}'))
    model = OpenAIServerModel(model_id="m", api_base=proxy.url + "/v1", api_key="-")
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, verbosity_level=0)
    try:
        assert agent.run("Weather in Paris?") == "Sunny, 24 C."
    finally:
        proxy.stop()
    sent = [json.loads(path.read_text())["request"] for path in tmp_path.iterdir()]
    history = json.dumps(max(sent, key=lambda body: len(body["messages"]))["messages"])
    assert "Calling tools:" in history and "Observation:" in history  # smolagents sent text, not tool_calls
    second = upstream.bodies("/completion")[1]["prompt"]
    assert 'TOOL: get_weather ARGS: {"city": "Paris"}<|im_end|>' in second
    assert "OBSERVATION (get_weather): sunny, 24 C in Paris" in second
    assert "Calling tools" not in second and "ANSWER: Calling" not in second
    assert upstream.bodies("/completion")[0]["grammar"].splitlines()[0].endswith("calls")  # tool_choice required


def test_a_bad_call_is_repaired_before_smolagents_sees_it(upstream, proxy):
    upstream.json("/completion", said('TOOL: get_weather ARGS: {"town": "Paris"}'))
    upstream.json("/completion", said('TOOL: final_answer ARGS: {"answer": "Paris: sunny"}'))
    model = OpenAIServerModel(model_id="m", api_base=proxy.url + "/v1", api_key="-")
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=2, verbosity_level=0)
    assert agent.run("Weather in Paris?") == "Paris: sunny"
    assert "city" in upstream.bodies("/completion")[1]["prompt"]  # the repair named the missing argument


@pytest.mark.integration
def test_a_tool_calling_run_on_the_real_model(real_proxy):
    model = OpenAIServerModel(model_id="m", api_base=real_proxy.url + "/v1", api_key="-", temperature=0)
    agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=4, verbosity_level=0)
    agent.run("What is the weather in Paris? Use the tool, then give the final answer.")
    steps = [s for s in agent.memory.steps if getattr(s, "tool_calls", None)]
    assert steps and all(c.name in ("get_weather", "final_answer") for s in steps for c in s.tool_calls)
