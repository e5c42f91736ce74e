"""The canonical call and answer lines, and that they read back unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given
from protocolkit import PROPERTY

from textagent.protocol import ToolCall, parse_reply, render_answer, render_call
from textagent.testing import answer_texts, bare_args, tool_calls, tool_names


def test_render():
    assert render_call(ToolCall("f", {"city": "Paris", "days": 3})) == 'TOOL: f ARGS: {"city": "Paris", "days": 3}'
    assert render_call(ToolCall("f")) == "TOOL: f ARGS: {}"
    assert render_call(ToolCall("f", {"s": "é\n"})) == 'TOOL: f ARGS: {"s": "é\\n"}'
    assert render_call(ToolCall("calc", "17 * 24")) == "TOOL: calc ARGS: 17 * 24"
    assert render_call(ToolCall("calc", "{x")) == 'TOOL: calc ARGS: "{x"'
    assert render_call(ToolCall("calc", " padded ")) == 'TOOL: calc ARGS: " padded "'
    assert render_call(ToolCall("calc", "")) == 'TOOL: calc ARGS: ""'
    assert render_answer("42") == "ANSWER: 42"
    with pytest.raises(ValueError):
        render_call(ToolCall("not a name", {}))


@PROPERTY
@given(tool_calls())
def test_round_trip(call):
    assert parse_reply(render_call(call)).calls == [call]


@PROPERTY
@given(tool_names(), bare_args())
def test_round_trip_bare(name, text):
    call = ToolCall(name, text)
    assert parse_reply(render_call(call)).calls == [call]


@PROPERTY
@given(answer_texts())
def test_answer_round_trip(text):
    assert parse_reply(render_answer(text)).answer == text
