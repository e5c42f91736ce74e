"""protocol.words: what the start of a reply says."""

from __future__ import annotations

import pytest

from textagent.protocol import begins_call, misplaced_call


@pytest.mark.parametrize("token", ["TOOL", "TO", " TOOL", "\nTOOL:", "tool:", "**TOOL", "T"])
def test_a_first_token_that_may_begin_a_call(token):
    assert begins_call(token)


@pytest.mark.parametrize("token", ["ANSWER", "To", "The", "Tool", "TOOLS", "Thought", "-", "\n", "", " "])
def test_a_first_token_that_begins_no_call(token):
    assert not begins_call(token)


@pytest.mark.parametrize(
    "text,name",
    [
        ('CALL: cd ARGS: {"folder": "x"}', "cd"),
        ("- **Action:** `search` ARGS: {}\nmore", "search"),
        ("ANSWER: cat ARGS: {}", "cat"),
        ("ANSWER: Paris", None),
        ("Note: see below", None),
        ("TOOL: cd ARGS: {}", None),  # a call, in its place
        ("Thought: first\nCALL: cd ARGS: {}", None),  # the first line only
    ],
)
def test_misplaced_call_names_the_tool_of_a_call_after_another_keyword(text, name):
    assert misplaced_call(text) == name
