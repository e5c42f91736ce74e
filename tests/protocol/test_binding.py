"""A bare argument bound to a tool's parameter, whatever shape the tools come in."""

from __future__ import annotations

from types import SimpleNamespace

from protocolkit import TOOLS, calls

from textagent.protocol import ToolCall


def test_bare_argument_binds_with_tools():
    assert calls("TOOL: calculate ARGS: 17 * 24", TOOLS) == [ToolCall("calculate", {"expression": "17 * 24"})]
    assert calls('TOOL: calculate("17*24")', TOOLS) == [ToolCall("calculate", {"expression": "17*24"})]
    assert calls("TOOL: get_weather ARGS: Paris", TOOLS) == [ToolCall("get_weather", {"city": "Paris"})]
    # typed parameters take the value the text reads as
    assert calls("TOOL: square ARGS: 12", TOOLS) == [ToolCall("square", {"n": 12})]
    assert calls("TOOL: square(12)", TOOLS) == [ToolCall("square", {"n": 12})]
    assert calls("TOOL: square ARGS: twelve", TOOLS) == [ToolCall("square", {"n": "twelve"})]
    assert calls("TOOL: scale ARGS: 2.5", TOOLS) == [ToolCall("scale", {"factor": 2.5})]
    assert calls("TOOL: scale ARGS: None", TOOLS) == [ToolCall("scale", {"factor": None})]
    # unknown tool, or a dict already: unchanged
    assert calls("TOOL: nope ARGS: 12", TOOLS) == [ToolCall("nope", "12")]
    assert calls('TOOL: square ARGS: {"n": "12"}', TOOLS) == [ToolCall("square", {"n": "12"})]


def test_tools_given_in_many_shapes():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    want = [ToolCall("search", {"q": "cats"})]
    assert calls("TOOL: search ARGS: cats", {"search": SimpleNamespace(name="search", parameters=schema)}) == want
    assert calls("TOOL: search ARGS: cats", [{"name": "search", "parameters": schema}]) == want
    assert (
        calls("TOOL: search ARGS: cats", [{"type": "function", "function": {"name": "search", "parameters": schema}}])
        == want
    )
    assert calls("TOOL: search ARGS: cats", {"search": schema}) == want
    assert calls("TOOL: search ARGS: cats", ["search"]) == [ToolCall("search", "cats")]  # no schema: stays text
    two = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}
    assert calls("TOOL: search ARGS: cats", {"search": two}) == [ToolCall("search", "cats")]
