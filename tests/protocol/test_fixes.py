"""protocol.fixes: the corrected line for a reply that does not parse (shown to a model that
wrote the same unreadable reply twice), read back by the parser or not offered at all."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textagent.protocol import ParseError, parse_reply
from textagent.protocol.fixes import corrected_line
from textagent.toolkits import demo
from textagent.tools import ToolSet

TOOLS = ToolSet(demo.demo_tools())


@pytest.mark.parametrize(
    "reply, line",
    [
        ('TOOL: calculate ARGS: {"expression": "1+1",}', 'TOOL: calculate ARGS: {"expression": "1+1"}'),
        ("TOOL: calculate ARGS: {'expression': '1+1'}", 'TOOL: calculate ARGS: {"expression": "1+1"}'),
        ('TOOL: calculate ARGS: {"expression": "1+1"', 'TOOL: calculate ARGS: {"expression": "1+1"}'),
        ('TOOL: calculate(expression="1+1")', 'TOOL: calculate ARGS: {"expression": "1+1"}'),
        ('TOOL: get_weather ARGS: {"city": "Paris", "city": "Rome"}', 'TOOL: get_weather ARGS: {"city": "Rome"}'),
        ('- **TOOL:** `get_wether` ARGS: {"city": "Oslo",}', 'TOOL: get_weather ARGS: {"city": "Oslo"}'),
        ('CALL: get_weather ARGS: {"city": "Oslo",}', 'TOOL: get_weather ARGS: {"city": "Oslo"}'),
        ('ANSWER: get_weather ARGS: {"city": "Oslo"}', 'TOOL: get_weather ARGS: {"city": "Oslo"}'),
        ('**ANSWER:** `get_wether` ARGS: {"city": "Oslo",}', 'TOOL: get_weather ARGS: {"city": "Oslo"}'),
        (
            'I will check.\n- **Action:** `calculate` ARGS: {"expression": "2*3"}',
            'TOOL: calculate ARGS: {"expression": "2*3"}',
        ),
        (
            'Thought: first\nTOOL: toggle_light\nARGS: {"room": "kitchen", "on": False}',
            'TOOL: toggle_light ARGS: {"room": "kitchen", "on": false}',
        ),
        (
            "TOOL: toggle_light ARGS: {'room': 'kitchen', 'on': False}",
            'TOOL: toggle_light ARGS: {"room": "kitchen", "on": false}',
        ),
    ],
)
def test_common_slips_are_mended(reply, line):
    assert corrected_line(reply, TOOLS) == line


@pytest.mark.parametrize(
    "reply",
    [
        "I will use the tool.",
        'TOOL: get_weather ARGS: {"city": Paris}',  # a bare word is no value to guess
        'TOOL: nothing_like_it ARGS: {"x": 1}',  # no listed tool is close
        "TOOL: calculate ARGS: {'expression': {1, 2}}",  # a Python set is no JSON
        "TOOL: calculate(__import__('os').system('x'))",  # code is never run
    ],
)
def test_nothing_is_offered_where_nothing_can_be_mended(reply):
    assert corrected_line(reply, TOOLS) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_whatever_is_offered_parses_as_one_call_of_a_listed_tool(text):
    line = corrected_line("TOOL: calculate ARGS: " + text, TOOLS)
    if line is not None:
        try:
            reply = parse_reply(line, TOOLS)
        except ParseError as err:  # pragma: no cover - the failure the test looks for
            pytest.fail(f"{line!r} does not parse: {err}")
        assert len(reply.calls) == 1 and reply.calls[0].name in TOOLS
