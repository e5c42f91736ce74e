"""The bench's checkers: numbers in an answer, each check type, success, and why calls are missing."""

from __future__ import annotations

import pytest

from textagent.bench import checking as C
from textagent.bench import tasks as T
from textagent.bench.records import call_from_record

GOOD = {"id": "t1", "question": "What is 2+2?", "tools": ["calculate"], "check": {"type": "numeric", "value": 4}}


def typed(calls):
    """Calls written as their records are, read as the bench reads them."""
    return [call_from_record(c) for c in calls]


def out(answer="", calls=(), attempted=None, lights=None, answered=True):
    calls = typed(calls)
    return C.Outcome(
        answer=answer,
        answered=answered,
        calls=calls,
        attempted=attempted if attempted is not None else [c.name for c in calls],
        state={"lights": lights or {}},
    )


def check(spec, outcome):
    return C.run_check(spec, outcome)


@pytest.mark.parametrize(
    "text, numbers",
    [
        ("1,234.5 and -2", [1234.5, -2.0]),
        ("It is 87.8°F, or $875.00", [87.8, 875.0]),
        ("order O-5000 costs 59.90", [5000.0, 59.9]),
        ("25*10=250", [25.0, 10.0, 250.0]),
        ("no numbers", []),
    ],
)
def test_numbers_in_text(text, numbers):
    assert C.numbers_in(text) == numbers


def test_numeric_checker_only_allows_the_listed_numbers():
    only = {"type": "numeric", "only": [22, 11, 16.5]}
    assert check(only, out("Lisbon (22 °C) is warmer than London (11 °C).")).ok
    assert check(only, out("Lisbon is warmer.")).ok  # no number at all
    result = check(only, out("Lisbon is at 11 °C and London at 27 °C; their average is 19 °C."))
    assert not result.ok and result.detail == "numbers [27.0, 19.0] are none of [22, 11, 16.5]"
    both = check({"type": "numeric", "value": 22, "only": [22, 11]}, out("London is at 11 °C."))
    assert not both.ok and both.detail == "missing [22] in numbers [11.0]"


def test_numeric_checker_with_tolerance_and_several_values():
    assert check({"type": "numeric", "value": 408}, out("17 * 24 = 408.")).ok
    assert not check({"type": "numeric", "value": 408}, out("about 410")).ok
    assert check({"type": "numeric", "value": 26.1, "tol": 0.06}, out("26.0976 miles")).ok
    assert check({"type": "numeric", "value": 1000, "rel": 0.01}, out("995")).ok
    result = check({"type": "numeric", "values": [8, 25]}, out("Paris 8 °C"))
    assert not result.ok and "25" in result.detail


def test_text_checkers():
    assert check({"type": "exact", "value": "Desserts"}, out("ANSWER: desserts.")).ok
    assert not check({"type": "exact", "value": "desserts"}, out("it is desserts")).ok
    c = {"type": "contains", "value": "lisbon", "none": ["london is warmer"]}
    assert check(c, out("Lisbon is warmer")).ok
    assert not check(c, out("Lisbon? No, London is warmer")).ok
    assert check({"type": "contains", "any": ["yes", "coat"]}, out("Take a COAT")).ok
    assert not check({"type": "contains", "any": ["yes", "coat"]}, out("no")).ok
    assert check({"type": "regex", "pattern": r"\bau\b"}, out("Au")).ok
    assert not check({"type": "regex", "pattern": r"\bau\b"}, out("because")).ok
    assert check({"type": "answered"}, out("x")).ok
    assert not check({"type": "answered"}, out("  ")).ok


def test_exact_checker_reads_an_answer_as_the_protocol_does():
    """The keywords a model repeats are no content (protocol.words.answer_content)."""
    assert check({"type": "exact", "value": "four"}, out("ANSWER: ANSWER: four")).ok
    assert check({"type": "exact", "value": "four"}, out("ANSWER: Final Answer: four")).ok
    assert check({"type": "exact", "value": "four"}, out("final answer:\nfour")).ok
    assert not check({"type": "exact", "value": "four"}, out("the answer: four")).ok


def test_call_checkers_match_distinct_successful_calls():
    paris = {"name": "get_weather", "args": {"city": "paris"}, "ok": True, "output": "{}"}
    tokyo = {"name": "get_weather", "args": {"city": "Tokyo"}, "ok": True, "output": "{}"}
    failed = {"name": "get_weather", "args": {"city": "Tokyo"}, "ok": False, "output": "ERROR", "error": "tool_error"}
    two = {
        "type": "calls",
        "calls": [
            {"name": "get_weather", "args": {"city": "Paris"}},
            {"name": "get_weather", "args": {"city": "Tokyo"}},
        ],
    }
    assert check(two, out(calls=[tokyo, paris])).ok
    assert not check(two, out(calls=[paris, failed])).ok
    same_twice = {"type": "calls", "calls": [{"name": "get_weather"}, {"name": "get_weather"}]}
    assert not check(same_twice, out(calls=[paris])).ok
    alt = {"type": "calls", "calls": [{"any_of": ["multiply", "calculate"], "output_contains": "250"}]}
    assert check(alt, out(calls=[{"name": "calculate", "args": {}, "ok": True, "output": "250"}])).ok
    assert not check(alt, out(calls=[{"name": "calculate", "args": {}, "ok": True, "output": "25"}])).ok
    anyval = {"type": "calls", "calls": [{"name": "t", "args": {"x": {"any": [1, "one"]}, "b": True}}]}
    assert check(anyval, out(calls=[{"name": "t", "args": {"x": 1.0, "b": True}, "ok": True}])).ok
    assert not check(anyval, out(calls=[{"name": "t", "args": {"x": 1, "b": 1}, "ok": True}])).ok


def test_no_call_not_called_and_state_checkers():
    assert check({"type": "no_calls"}, out("Paris")).ok
    result = check({"type": "no_calls"}, out("Paris", attempted=["get_weather"]))
    assert not result.ok and "get_weather" in result.detail
    assert not check({"type": "not_called", "tools": ["send_email"]}, out(attempted=["calculate", "send_email"])).ok
    assert check({"type": "state", "lights": {"kitchen": False}}, out(lights={"kitchen": False})).ok
    assert not check({"type": "state", "lights": {"kitchen": True}}, out(lights={})).ok


def test_success_needs_a_final_answer():
    task = T.parse_task(GOOD)
    ok, _ = C.check_task(task, out("4"))
    assert ok
    ok, results = C.check_task(task, out("4", answered=False))
    assert not ok and results[0].ok


@pytest.mark.parametrize(
    "calls, expected",
    [
        ([], "no_call"),
        ([{"name": "get_weather", "args": {"city": "Paris"}, "ok": True}], "invalid_args"),
        ([{"name": "get_weather", "args": "Tokyo!", "ok": False, "error": "bad_arguments"}], "invalid_args"),
        ([{"name": "get_weather", "args": {"city": "Tokyo"}, "ok": False, "error": "tool_error"}], "no_call"),
        ([{"name": "search_web", "args": {"query": "tokyo"}, "ok": True}], "wrong_tool"),
        ([{"name": "get_weather", "args": {"city": "Tokyo"}, "ok": True}], None),
    ],
)
def test_diagnose_missing_calls(calls, expected):
    specs = [{"name": "get_weather", "args": {"city": "Tokyo"}}]
    assert C.diagnose_calls(specs, typed(calls)) == expected


def test_diagnosis_uses_a_maximum_matching():
    specs = [{"any_of": ["a", "b"]}, {"name": "a"}]
    calls = [{"name": "a", "args": {}, "ok": True}, {"name": "b", "args": {}, "ok": True}]
    assert C.diagnose_calls(specs, typed(calls)) is None
    # the second weather call was never made: a needed call is missing, not invalid args
    specs = [{"name": "get_weather", "args": {"city": "Paris"}}, {"name": "get_weather", "args": {"city": "Tokyo"}}]
    assert C.diagnose_calls(specs, typed([{"name": "get_weather", "args": {"city": "Paris"}, "ok": True}])) == "no_call"


# -- bench tools ----------------------------------------------------------------------------------
