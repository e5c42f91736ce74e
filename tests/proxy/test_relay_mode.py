"""RelayMode on the Agent's loop, driven by a ScriptedBackend (as TextMode's tests are): it reads,
judges and sends back; it runs no tools and counts no repairs (the loop's budget does)."""

from __future__ import annotations

import threading

import pytest
from proxykit import GREP
from streamkit import StreamingScripted

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


def _odds_relay(replies, messages=None):
    from textagent.backends.base import Capabilities
    from textagent.retry import Retry

    messages = messages or [{"role": "user", "content": "Find the TODOs."}]
    request = parse_request({"messages": messages, "tools": [GREP]})
    mode = RelayMode(request, transcript(request), grammar=None, cancelled=threading.Event())
    backend = ScriptedBackend(replies, capabilities=Capabilities(grammar=True, token_probs=True))
    agent = Agent(
        backend, request.tools, mode=mode, max_steps=3, max_format_errors=3, example=None, retry=Retry(odds=0.2)
    )
    return agent.run("Find the TODOs."), mode, backend


def _first(tool: float):
    from textagent.backends.base import Completion

    return Completion("ANSWER", top_tokens=(("ANSWER", 1 - tool), ("TOOL", tool)))


def test_the_odds_begin_the_proxys_first_reply_with_a_call_the_client_gets():
    result, mode, backend = _odds_relay([_first(0.3), GOOD[len("TOOL:") :]])
    assert result.stop_reason == "submitted" and mode.out.calls[0]["name"] == "grep"
    assert backend.prompts[1] == backend.prompts[0] + "TOOL:" and "lead" not in backend.calls[1]
    # the step's raw text is what the model wrote after the lead, as after a client's prefill
    assert result.steps[0].raw == GOOD[len("TOOL:") :] and mode.reading.text == GOOD
    assert result.steps[0].details["retry"] == {"call_odds": 0.3, "lead": "TOOL:"}


def test_a_begun_reply_that_fails_goes_back_once_in_the_conversation_and_the_repair_is_free():
    result, mode, backend = _odds_relay([_first(0.4), BAD[len("TOOL:") :], GOOD])
    assert result.stop_reason == "submitted" and len(result.steps) == 2
    repair = backend.prompts[2]
    assert repair.startswith(backend.prompts[0]) and repair.count(BAD) == 1 and "Find the TODOs." in repair
    assert not repair.endswith("TOOL:")  # the lead begins the first reply only
    assert [t["role"] for t in mode.out.turns] == ["assistant", "user", "assistant"]
    assert mode.out.turns[0]["content"] == BAD


def test_the_odds_leave_a_client_prefill_and_a_low_odds_answer_alone():
    prefill = [{"role": "user", "content": "Find the TODOs."}, {"role": "assistant", "content": "ANSWER: "}]
    result, mode, backend = _odds_relay(["nothing to find"], prefill)
    assert len(backend.calls) == 1 and "token_probs" not in backend.calls[0]
    assert result.stop_reason == "answer" and mode.out.content == "nothing to find"
    result, mode, backend = _odds_relay([_first(0.1), "ANSWER: nothing to find"])
    assert backend.prompts[1] == backend.prompts[0] and mode.out.content == "nothing to find"


AFTER_CALL = [
    {"role": "user", "content": "Find the TODOs."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"file_name": "a.py"}'}}
        ],
    },
]


def _errors_relay(replies, results, retry):
    request = parse_request({"messages": AFTER_CALL + results, "tools": [GREP]})
    mode = RelayMode(request, transcript(request), grammar=None, cancelled=threading.Event())
    backend = ScriptedBackend(replies)
    agent = Agent(backend, request.tools, mode=mode, max_steps=3, max_format_errors=3, example=None, retry=retry)
    return agent.run("Find the TODOs."), mode, backend


def test_the_proxy_sends_back_an_answer_to_client_results_that_report_an_error_once():
    from textagent.retry import Retry

    failed = [{"role": "tool", "tool_call_id": "c1", "content": '{"error": "grep: a.py: No such file"}'}]
    result, mode, backend = _errors_relay(["ANSWER: no file", GOOD], failed, Retry(errors=True))
    assert result.stop_reason == "submitted" and mode.out.calls[0]["name"] == "grep"
    asked = backend.prompts[1][len(backend.prompts[0]) :]
    assert "result reports an error" in asked and "- grep: grep: a.py: No such file" in asked
    # without the part, or after results that report nothing, the answer goes to the client
    for results, retry in (
        (failed, Retry()),
        ([{"role": "tool", "tool_call_id": "c1", "content": "3 TODOs"}], Retry(errors=True)),
    ):
        result, mode, backend = _errors_relay(["ANSWER: no file", GOOD], results, retry)
        assert result.stop_reason == "answer" and len(backend.prompts) == 1


def test_a_requests_last_results_are_the_tool_messages_after_its_last_assistant_message():
    results = [
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c9", "name": "grep", "content": "two"},
        {"role": "tool", "tool_call_id": "c7", "content": "three"},
    ]
    assert parse_request({"messages": AFTER_CALL + results, "tools": [GREP]}).last_results == [
        ("grep", "one"),
        ("grep", "two"),
        ("", "three"),
    ]
    asked_again = (
        AFTER_CALL + results[:1] + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "ok"}]
    )
    assert parse_request({"messages": asked_again, "tools": [GREP]}).last_results == []
    assert parse_request({"messages": AFTER_CALL[:1]}).last_results == []


def test_verify_checks_the_call_before_the_proxy_begins_a_reply_the_client_gets():
    from textagent.backends.base import Capabilities, Completion
    from textagent.retry import Retry

    def judged(yes):
        return Completion("yes", top_tokens=(("yes", yes), ("no", 1 - yes)))

    for yes, begun in ((0.9, True), (0.5, False)):
        request = parse_request({"messages": [{"role": "user", "content": "Find the TODOs."}], "tools": [GREP]})
        mode = RelayMode(request, transcript(request), grammar=None, cancelled=threading.Event())
        after = GOOD[len("TOOL:") :]
        replies = [_first(0.3), after, judged(yes), after if begun else "ANSWER: none here"]
        backend = ScriptedBackend(replies, capabilities=Capabilities(grammar=True, token_probs=True))
        retry = Retry(odds=0.2, verify=0.8)
        agent = Agent(backend, request.tools, mode=mode, max_steps=3, max_format_errors=3, example=None, retry=retry)
        result = agent.run("Find the TODOs.")
        assert "Find the TODOs." in backend.prompts[2] and "grep(" in backend.prompts[2]
        assert (result.stop_reason, bool(mode.out.calls)) == (("submitted", True) if begun else ("answer", False))
        assert result.steps[0].details["retry"]["verify_odds"] == yes


CLAIMED = 'ANSWER: grep ran with file_name "a.py" and pattern "TODO"; it reported 3 lines.'


def _claims_relay(replies, messages=None, *, streamed=False):
    from textagent.retry import Retry

    request = parse_request({"messages": messages or [{"role": "user", "content": "Find the TODOs."}], "tools": [GREP]})
    shown: list[str] = []
    mode = RelayMode(
        request,
        transcript(request),
        grammar=None,
        cancelled=threading.Event(),
        on_content=(lambda piece, repairs: shown.append(piece)) if streamed else None,
        on_call=(lambda call, repairs: None) if streamed else None,
    )
    backend = StreamingScripted(replies)
    agent = Agent(
        backend, request.tools, mode=mode, max_steps=3, max_format_errors=3, example=None, retry=Retry(claims=True)
    )
    return agent.run("Find the TODOs."), mode, backend, shown


def test_an_answer_claiming_a_call_that_never_ran_becomes_that_call_for_the_proxys_client():
    after = GOOD[len("TOOL: grep ARGS:") :]
    result, mode, backend, _ = _claims_relay([CLAIMED, after])
    assert result.stop_reason == "submitted" and mode.out.calls[0]["name"] == "grep"
    assert backend.prompts[1] == backend.prompts[0] + "TOOL: grep ARGS:" and "reported 3" not in backend.prompts[1]
    assert mode.reading.text == GOOD and [t["role"] for t in mode.out.turns] == ["assistant"]
    assert result.steps[0].details["retry"] == {"rewound": True, "claimed": "grep"}


def test_the_proxy_takes_a_claim_the_client_called_before_or_has_seen_streamed_as_the_answer():
    results = [{"role": "tool", "tool_call_id": "c1", "content": "3 TODOs"}]
    result, _, backend, _ = _claims_relay([CLAIMED], AFTER_CALL + results)
    assert parse_request({"messages": AFTER_CALL + results, "tools": [GREP]}).called_tools == {"grep"}
    assert result.stop_reason == "answer" and len(backend.prompts) == 1
    result, _, backend, shown = _claims_relay([CLAIMED], streamed=True)
    assert result.stop_reason == "answer" and len(backend.prompts) == 1 and "".join(shown).startswith("grep ran")


def test_a_begun_claimed_call_the_proxy_cannot_use_leaves_the_client_the_claim_not_repairs():
    result, mode, backend, _ = _claims_relay([CLAIMED, BAD[len("TOOL: grep ARGS:") :], GOOD])
    assert result.stop_reason == "answer" and len(backend.prompts) == 2 and not mode.out.calls
    assert mode.out.content == CLAIMED[len("ANSWER: ") :] and [s.rewound for s in result.steps] == [True, True]
    assert [t["content"] for t in mode.out.turns] == [CLAIMED]
