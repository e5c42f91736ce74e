"""The tool-name rule is one: what ``Tool`` accepts, MCP's names and the grammar's NAME terminal all
come from ``protocol.types`` (NAME_PATTERN, is_tool_name), and every name a Tool takes reads back
through the parser."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from textagent._resources import grammar_text
from textagent.protocol import ToolCall, parse_reply, render_call
from textagent.protocol.types import MAX_NAME_CHARS, NAME_PATTERN, is_tool_name
from textagent.tools import Tool
from textagent.tools.mcp import writable_name


def _accepted(name: str) -> bool:
    try:
        Tool(name, "", {"type": "object", "properties": {}}, None)
    except ValueError:
        return False
    return True


def test_the_grammar_names_tools_as_the_rule_does():
    lines = dict(re.findall(r"^(NAME|QUOTED_NAME|KEY): (.+)$", grammar_text("reply.lark"), re.M))
    assert lines["NAME"] == f"/{NAME_PATTERN}/"
    assert lines["QUOTED_NAME"] == "/" + "|".join(f"{q}{NAME_PATTERN}{q}" for q in "`\"'") + "/"
    assert lines["KEY"].startswith(f"/{NAME_PATTERN}(?=")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.from_regex(re.compile(NAME_PATTERN, re.A), fullmatch=True), st.text(max_size=40)))
def test_every_name_a_tool_accepts_reads_back_through_the_parser(name):
    assert _accepted(name) == is_tool_name(name)
    if _accepted(name):
        call = ToolCall(name, {"x": 1})
        assert parse_reply(render_call(call)).calls == [call]


def test_the_longest_name_and_one_past_it():
    assert _accepted("a" * MAX_NAME_CHARS) and not _accepted("a" * (MAX_NAME_CHARS + 1))
    for bad in ("météo", "工具", "1abc", "a b", ""):
        assert not _accepted(bad)


@given(st.text(max_size=200))
def test_mcp_maps_any_name_to_one_a_tool_accepts(name):
    assert _accepted(writable_name(name, {"tool"}))
