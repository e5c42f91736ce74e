"""bench/baseline.py: the seeds' loop as a mode of the Agent loop."""

from textagent import Agent, ScriptedBackend
from textagent.bench.baseline import AGENT_OPTIONS, BaselineMode
from textagent.bench.tools import Env, make_toolset


def run_baseline(backend, tools, task, **kw):
    kw.setdefault("chat_format", "chatml")
    return Agent(backend, tools, mode=BaselineMode(), **AGENT_OPTIONS, **kw).run(task)


def test_baseline_is_the_seed_loop():
    tools = make_toolset(["calculate"], Env())
    backend = ScriptedBackend(
        [
            'I will compute.\nTOOL: calculate ARGS: {"expression": "17*24"}\nTOOL: calculate '
            'ARGS: {"expression": "1+1"}',
            "The result is 408.",
        ]
    )
    result = run_baseline(backend, tools, "What is 17*24?", max_steps=4)
    assert result.stop_reason == "answer" and result.answer == "The result is 408."
    assert [o.name for s in result.steps for o in s.outcomes] == ["calculate"]  # one call per reply
    assert "OBSERVATION (calculate): 408" in backend.prompts[1]
    # relaxed syntax the text parser would accept is a dead end here: no feedback
    relaxed = ScriptedBackend(["TOOL: calculate ARGS: {'expression': '17*24'}"])
    result = run_baseline(relaxed, tools, "What is 17*24?")
    assert result.stop_reason == "format_errors" and len(relaxed.prompts) == 1
    bare = ScriptedBackend(["TOOL: calculate ARGS: 17", "ANSWER: 17"])
    result = run_baseline(bare, tools, "x")
    assert result.steps[0].outcomes[0].error == "bad_arguments"


def test_baseline_sends_the_agents_prompt_with_every_worked_example():
    """The baseline differs from text mode in the loop only: same system prompt, same examples."""
    from textagent import Agent

    tools = make_toolset(["calculate", "get_time", "get_weather", "multiply", "toggle_light"], Env())
    assert len(tools.examples) > 1
    base = ScriptedBackend(["ANSWER: x"])
    run_baseline(base, tools, "q", chat_format="chatml")
    agent = ScriptedBackend(["ANSWER: x"])
    Agent(agent, tools, chat_format="chatml").run("q")
    assert base.prompts[0] == agent.prompts[0]
    for example in tools.examples_for("q"):
        assert example.task in base.prompts[0] and example.answer in base.prompts[0]
