"""The error table: every known-bad reply raises its own label, at a position inside the reply."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given
from protocolkit import PROPERTY, ROOT, TOOLS, assert_inside, error, grammar_only

from textagent.protocol import ERROR_CLASSES, KNOWN_BAD, MAX_DEPTH, ParseError, parse_reply
from textagent.testing import near_miss_replies


def test_the_known_bad_table_is_complete():
    labels = [c.label for c in ERROR_CLASSES]
    assert len(labels) == len(set(labels))
    for label in (
        "missing_name",
        "unbalanced_braces",
        "unterminated_string",
        "args_not_object",
        "empty_tool_line",
        "bad_key_value",
    ):
        assert KNOWN_BAD[label], label
    for cls in ERROR_CLASSES:
        assert cls.title and cls.hint
        if cls.label not in ("bad_call", "no_call_or_answer"):
            assert cls.examples, cls.label


@pytest.mark.parametrize(
    "label,example",
    [(c.label, ex) for c in ERROR_CLASSES for ex in c.examples],
    ids=[f"{c.label}-{i}" for c in ERROR_CLASSES for i in range(len(c.examples))],
)
def test_known_bad_example(label, example):
    err = error(example)
    assert err.label == label, (err.label, str(err))
    assert_inside(example, err)
    assert error(example, grammar_only).label == label


def test_walk_the_whole_table():
    """One pass over every known-bad reply: each raises ParseError with its own label."""
    seen = {}
    for cls in ERROR_CLASSES:
        for example in cls.examples:
            with pytest.raises(ParseError) as info:
                parse_reply(example)
            seen[example] = info.value.label
            assert info.value.label == cls.label, (example, info.value.label)
    assert len(seen) == sum(len(c.examples) for c in ERROR_CLASSES)


@pytest.mark.parametrize(
    "text,label,line,column",
    [
        ("Thinking.\n  - TOOL:", "empty_tool_line", 2, 10),
        ('ok\nTOOL: ARGS: {"q": 1}', "missing_name", 2, 11),
        ('TOOL: f ARGS: {\n  "a": 1,\n  "b": [1, 2\n', "unbalanced_braces", 3, 8),
        ('TOOL: f ARGS: {"a": 1\nANSWER: x', "unbalanced_braces", 1, 15),
        ('```\nTOOL: f ARGS: {"a": 1\n```', "unbalanced_braces", 2, 15),
        ('TOOL: f ARGS: {\n  "a": "oops\n}', "unterminated_string", 2, 8),
        ("TOOL: f ARGS: [1, 2]", "args_not_object", 1, 15),
        ("TOOL: f\nARGS: [1]", "args_not_object", 2, 7),
        ('TOOL: f ARGS: city="Paris" days=3', "bad_key_value", 1, 28),
        ('TOOL: f ARGS: city="Paris", France', "bad_key_value", 1, 29),
        ("> TOOL: f ARGS: {\n>   'a' 1\n> }", "missing_colon", 2, 9),
        ("TOOL: f ARGS: " + "{" * 100_000, "too_deep", 1, 15 + MAX_DEPTH),
        ("TOOL: f ARGS: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "too_deep", 1, 15 + MAX_DEPTH),
        ('TOOL: f ARGS: {"n": ' + "1" * 5000 + "}", "bad_number", 1, 21),
        ("Some text\nARGS: {}", "args_without_tool", 2, 1),
        ("Some text\n> 1. **CALL:** cd ARGS: {}", "wrong_keyword", 2, 8),
    ],
)
def test_error_positions(text, label, line, column):
    err = error(text)
    assert (err.label, err.line, err.column) == (label, line, column), str(err)
    assert_inside(text, err)


@PROPERTY
@given(near_miss_replies(labelled=True))
def test_near_misses_raise_their_label(case):
    text, label = case
    err = error(text)
    assert err.label == label, (text, str(err))
    assert_inside(text, err)


def test_a_parse_error_is_a_textagent_error_and_a_value_error():
    from textagent.errors import TextagentError

    with pytest.raises(TextagentError) as info:
        parse_reply('TOOL: calculate ARGS: {"expression": "17 * 24"')
    assert isinstance(info.value, ValueError) and info.value.to_dict()["label"] == "unbalanced_braces"


def test_error_fields():
    text = 'I will check.\n- TOOL: get_wether ARGS: {"city": Paris}'
    err = error(text, tools=TOOLS)
    assert isinstance(err, ValueError)
    assert err.label == "unquoted_string"
    assert (err.line, err.column) == (2, 35)
    assert err.name == "get_wether" and err.tools is TOOLS  # the tools the reply was read against
    assert "a string" in err.expected
    assert err.excerpt == '- TOOL: get_wether ARGS: {"city": Paris}\n' + " " * 34 + "^"
    assert str(err) == "line 2, column 35: a text value is not quoted: found `Paris`"
    assert "\n" not in str(err)
    d = err.to_dict()
    assert list(d) == ["message", "line", "column", "expected", "label", "excerpt"]  # data; prompts word it
    json.dumps(d)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.label, copy.line, copy.column, copy.message) == (err.label, err.line, err.column, err.message)


def test_long_lines_get_a_window_in_the_excerpt():
    text = 'TOOL: f ARGS: {"a": ' + '1, "b": ' * 40 + "oops}"
    err = error(text)
    first, caret = err.excerpt.split("\n")
    assert len(first) <= 102
    assert first.startswith("\u2026")
    assert first[len(caret) - 1 :].startswith("oops")


def test_every_hint_comes_from_the_hints_file():
    hints = json.loads((ROOT / "textagent" / "prompts" / "text" / "format_hints.json").read_text(encoding="utf-8"))
    assert set(hints) == {c.label for c in ERROR_CLASSES}
    for cls in ERROR_CLASSES:
        assert cls.hint == hints[cls.label]
    assert error('TOOL: search ARGS: {"q": cats}').hint == hints["unquoted_string"]
