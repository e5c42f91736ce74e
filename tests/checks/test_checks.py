"""The checks protocol: loading checks by name, what a check is, what it sees of a run."""

import sys
import types

import pytest

from textagent import Agent, ScriptedBackend, checks
from textagent.steps import SentBack
from textagent.toolkits import demo


class Once:
    """Sends the first answer back once, noting what it saw."""

    name = "once"
    seen: list = []

    def on_answer(self, run, answer):
        Once.seen.append((run.task, [s.index for s in run.steps], run.prompts.family, len(run.examples)))
        if run.sent_back_by(self.name):
            return None
        return SentBack(self.name, "Check it again.", (answer,))


@pytest.fixture
def module(monkeypatch):
    mod = types.ModuleType("mychecks")
    mod.Once = Once
    mod.pair = lambda: [Once(), Once()]
    mod.nothing = lambda: object()
    monkeypatch.setitem(sys.modules, "mychecks", mod)
    return mod


def test_checks_by_name_are_module_and_name(module):
    assert checks.from_names("none") == [] and checks.from_names("") == []
    assert [type(c) for c in checks.from_names("mychecks:Once")] == [Once]
    assert len(checks.from_names("mychecks:pair, mychecks:Once")) == 3


def test_bad_check_names_say_what_to_give(module):
    with pytest.raises(ValueError, match="give module:Name"):
        checks.from_names("numbers")
    with pytest.raises(ValueError, match="cannot load the check 'mychecks:Nope'"):
        checks.from_names("mychecks:Nope")
    with pytest.raises(ValueError, match="cannot load the check 'nomodule:X'"):
        checks.from_names("nomodule:X")
    with pytest.raises(TypeError, match="checks must be objects with a name"):
        checks.from_names("mychecks:nothing")


def test_a_check_sees_the_task_the_steps_the_examples_and_the_modes_prompts():
    Once.seen.clear()
    result = Agent(ScriptedBackend(["ANSWER: 4", "ANSWER: four"]), demo.demo_tools(), checks=[Once()]).run("2 + 2?")
    assert result.answer == "four" and result.steps[0].sent_back == SentBack("once", "Check it again.", ("4",))
    assert result.steps[0].observations == ["Check it again."]
    (task, steps, family, shown), again = Once.seen
    assert (task, steps, family) == ("2 + 2?", [1], "text") and shown > 0 and again[1] == [1, 2]
    assert result.steps[0].details["sent_back"] == {"check": "once", "text": "Check it again.", "found": ["4"]}
