"""The public hypothesis strategies in textagent.testing generate what they promise."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textagent.protocol import NAME_PATTERN, ParseError, ToolCall, parse_reply
from textagent.protocol.lines import classify as _classify
from textagent.testing import (
    NEAR_MISS_LABELS,
    answer_texts,
    bare_args,
    garbage_replies,
    json_args,
    json_values,
    near_miss_replies,
    noisy_calls,
    noisy_replies,
    prose_lines,
    tool_calls,
    tool_names,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(tool_names())
def test_tool_names_are_valid(name):
    assert re.fullmatch(NAME_PATTERN, name)


@FAST
@given(json_values())
def test_json_values_survive_json(value):
    assert json.loads(json.dumps(value)) == value


@FAST
@given(json_args())
def test_json_args_are_objects(args):
    assert isinstance(args, dict) and all(isinstance(k, str) for k in args)


@FAST
@given(bare_args())
def test_bare_args_are_nonempty_text(text):
    assert isinstance(text, str) and text


@FAST
@given(tool_calls())
def test_tool_calls(call):
    assert isinstance(call, ToolCall)
    assert isinstance(call.args, (dict, str))


@FAST
@given(tool_calls(bare=False))
def test_tool_calls_without_bare(call):
    assert isinstance(call.args, dict)


@FAST
@given(tool_calls(names=st.just("search"), args=st.just({"q": 1})))
def test_tool_calls_take_strategies(call):
    assert call == ToolCall("search", {"q": 1})


@FAST
@given(prose_lines())
def test_prose_lines_are_prose(line):
    assert "\n" not in line and _classify(line).kind is None


@FAST
@given(tool_calls().flatmap(lambda c: st.tuples(st.just(c), noisy_calls(c))))
def test_noisy_calls_parse_back(case):
    call, lines = case
    assert isinstance(lines, list) and lines
    assert parse_reply("\n".join(lines)).calls == [call]


def test_noisy_calls_cover_the_forms():
    """Over many draws the renderer uses every layout it knows."""
    seen = set()
    call = ToolCall("get_weather", {"city": "Paris", "days": 3})

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(noisy_calls(call))
    def collect(lines):
        text = "\n".join(lines)
        if "(" in text:
            seen.add("shorthand")
        if "city=" in text and "(" not in text:
            seen.add("kv")
        if len(lines) > 1 and lines[1].lstrip("> ").lower().lstrip("*_").startswith("args"):
            seen.add("next_line")
        if text.count("\n") >= 3 and "{" in text:
            seen.add("multi_line")
        if "```" in text or "~~~" in text:
            seen.add("fence")
        if "**" in text or "__" in text:
            seen.add("emphasis")
        if re.search(r"^\s*(?:[-*+]|\d+[.)]|>)\s", text, re.M):
            seen.add("marker")

    collect()
    assert seen == {"shorthand", "kv", "next_line", "multi_line", "fence", "emphasis", "marker"}


@FAST
@given(st.lists(tool_calls(), max_size=3).flatmap(lambda cs: st.tuples(st.just(cs), noisy_replies(cs))))
def test_noisy_replies_hold_the_calls(case):
    calls, text = case
    assert parse_reply(text).calls == calls


@FAST
@given(noisy_replies(st.just([ToolCall("f", {"a": 1})])))
def test_noisy_replies_accept_a_strategy(text):
    assert parse_reply(text).calls == [ToolCall("f", {"a": 1})]


@FAST
@given(near_miss_replies())
def test_near_misses_fail(text):
    try:
        parse_reply(text)
    except ParseError:
        return
    raise AssertionError(f"parsed: {text!r}")


@pytest.mark.parametrize("label", NEAR_MISS_LABELS)
def test_near_misses_for_each_label(label):
    @settings(max_examples=15, deadline=None, database=None)
    @given(near_miss_replies(labelled=True, labels=[label]))
    def check(case):
        text, got = case
        assert got == label
        with pytest.raises(ParseError) as info:
            parse_reply(text)
        assert info.value.label == label

    check()


def test_near_misses_reject_unknown_labels():
    with pytest.raises(ValueError):
        near_miss_replies(labels=["nope"])
    with pytest.raises(ValueError):
        near_miss_replies(labels=[])


@FAST
@given(answer_texts())
def test_answer_texts(text):
    assert text == text.strip() and text


@FAST
@given(garbage_replies())
def test_garbage_is_text(text):
    assert isinstance(text, str)
