"""RelayMode on the Agent's loop, driven by a ScriptedBackend (as TextMode's tests are): it reads,
judges and sends back; it runs no tools and counts no repairs (the loop's budget does)."""

from __future__ import annotations

import threading

import pytest
from proxykit import GREP

from textagent.agent import Agent
from textagent.backends.scripted import ScriptedBackend
from textagent.modes import RunsTools
from textagent.proxy.convert import parse_request
from textagent.proxy.relay import RelayMode
from textagent.proxy.transcript import transcript

GOOD = 'TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}'
BAD = 'TOOL: grep ARGS: {"file_name": "a.py"}'  # the pattern is missing


def relay(replies: list[str], *, repairs: int = 2, **body):
    request = parse_request({"messages": [{"role": "user", "content": "Find the TODOs."}], "tools": [GREP], **body})
    mode = RelayMode(request, transcript(request), grammar=None, cancelled=threading.Event())
    backend = ScriptedBackend(replies)
    agent = Agent(
        backend,
        request.tools,
        mode=mode,
        max_steps=repairs + 1,
        max_format_errors=repairs + 1,
        example=None,
        max_calls_per_reply=None,
    )
    return agent.run("Find the TODOs."), mode, backend


def test_a_mode_that_runs_no_tools_stubs_nothing():
    request = parse_request({"messages": [{"role": "user", "content": "hi"}]})
    mode = RelayMode(request, transcript(request), grammar=None, cancelled=threading.Event())
    assert not isinstance(mode, RunsTools) and not hasattr(mode, "execute") and not hasattr(mode, "observe")


def test_valid_calls_are_submitted_to_the_client():
    result, mode, _ = relay([GOOD + "\n" + GOOD.replace("a.py", "b.py")])
    assert result.stop_reason == "submitted" and len(result.steps) == 1
    assert [c["args"]["file_name"] for c in mode.out.calls] == ["a.py", "b.py"]
    assert mode.out.finish_reason == "tool_calls" and mode.out.content is None
    assert result.steps[0].extra["accepted"][0]["name"] == "grep"


def test_an_answer_is_the_clients_content_without_keywords():
    result, mode, _ = relay(["Thought: no call needed\nANSWER: ANSWER: nothing to find"])
    assert result.stop_reason == "answer" and mode.out.content == "nothing to find"


def test_a_bad_call_goes_back_with_feedback_and_the_repair_is_submitted():
    result, mode, backend = relay([BAD, GOOD])
    assert result.stop_reason == "submitted" and len(result.steps) == 2
    assert "pattern" in backend.prompts[1][len(backend.prompts[0]) :]  # the feedback names what is missing
    assert [t["role"] for t in mode.out.turns] == ["assistant", "user", "assistant"]
    assert mode.repairs == 1  # the step's index - 1: nothing counted


def test_the_loops_budget_ends_the_repairs():
    result, mode, backend = relay([BAD, BAD, BAD], repairs=1)
    assert result.stop_reason == "format_errors" and len(backend.prompts) == 2
    assert mode.rejected == 2  # the last reply was sent back too: answer() takes it back as unsent


def test_some_valid_calls_are_kept_and_only_the_others_go_back():
    result, mode, _ = relay([GOOD + "\n" + BAD.replace("a.py", "b.py"), GOOD.replace("a.py", "b.py")])
    assert result.stop_reason == "submitted"
    assert [c["args"]["file_name"] for c in mode.out.calls] == ["a.py", "b.py"]
    assert "accepted" in result.steps[0].extra


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "grep"}}])
def test_an_answer_where_a_call_is_required_goes_back(choice):
    result, mode, _ = relay(["ANSWER: no", GOOD], tool_choice=choice)
    assert result.stop_reason == "submitted" and len(result.steps) == 2 and mode.out.calls
