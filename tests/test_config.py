"""textagent.config: the Agent's one frozen configuration, and how Agent takes it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from textagent import Agent, AgentConfig, Retry
from textagent.backends.scripted import ScriptedBackend
from textagent.templates import PLAIN
from textagent.toolkits import demo


class Quiet:
    """A check that never objects."""

    name = "quiet"

    def on_answer(self, view, answer):
        return None


def test_a_config_is_frozen_and_holds_frozen_values():
    config = AgentConfig(checks=[Quiet()], example=[], chat_format="plain")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_steps = 3  # type: ignore[misc]
    assert isinstance(config.checks, tuple) and config.example == () and config.format is PLAIN
    assert hash(AgentConfig(max_steps=3)) == hash(AgentConfig(max_steps=3))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"max_calls_per_reply": 0}, "max_calls_per_reply"),
        ({"max_repeats": 1}, "max_repeats"),
        ({"example_style": "poem"}, "example style"),
        ({"example_tool": "random"}, "example tool"),
        ({"chat_format": "nonesuch"}, "nonesuch"),
        ({"example": "none"}, "example must be"),  # a string other than "auto" (None means none)
    ],
)
def test_bad_values_are_refused_when_the_config_is_made(changes, message):
    with pytest.raises(ValueError, match=message):
        AgentConfig(**changes)
    with pytest.raises(ValueError, match=message):
        Agent(ScriptedBackend([]), demo.demo_tools(), **changes)


def test_bad_objects_are_refused_by_type():
    with pytest.raises(TypeError, match="Retry"):
        AgentConfig(retry={"vary": True})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="checks"):
        AgentConfig(checks=[object()])
    with pytest.raises(TypeError, match="AgentConfig"):
        Agent(ScriptedBackend([]), demo.demo_tools(), {"max_steps": 2})  # type: ignore[arg-type]


def test_keyword_fields_apply_over_the_config_and_the_rest_are_request_options():
    shared = AgentConfig(max_steps=2, retry=Retry(rewind=True))
    agent = Agent(ScriptedBackend([]), demo.demo_tools(), shared, reply_tokens=64, temperature=0.0)
    assert agent.config == dataclasses.replace(shared, reply_tokens=64)
    assert shared.reply_tokens == 512  # the shared config is left as it was
    assert agent.backend_options == {"temperature": 0.0}


def test_a_config_is_shared_by_agents_and_limits_each():
    config = AgentConfig(max_steps=1)
    for _ in range(2):
        result = Agent(ScriptedBackend(['TOOL: get_weather ARGS: {"city": "Paris"}']), demo.demo_tools(), config).run(
            "Weather in Paris?"
        )
        assert result.stop_reason == "max_steps" and len(result.steps) == 1


def test_the_agent_takes_at_most_eight_parameters_besides_its_keyword_conveniences():
    parameters = [
        p
        for p in inspect.signature(Agent.__init__).parameters.values()
        if p.kind is not p.VAR_KEYWORD and p.name != "self"
    ]
    assert len(parameters) <= 8, [p.name for p in parameters]


def test_every_field_is_named_in_the_docstring():
    doc = AgentConfig.__doc__ or ""
    assert [n for n in AgentConfig.names() if f"``{n}``" not in doc] == []
