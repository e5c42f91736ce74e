"""Helpers shared by the tests of textagent.protocol."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, settings

from textagent import prompts
from textagent.protocol import KNOWN_BAD, ParseError, Reader, Reply, parse_reply

ROOT = Path(__file__).resolve().parents[2]
# TEXTAGENT_FUZZ_EXAMPLES=5000 pytest tests/protocol  fuzzes harder than the default run
PROPERTY = settings(
    max_examples=int(os.environ.get("TEXTAGENT_FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def tool(name, properties=None, required=None):
    params = {"type": "object", "properties": properties or {}}
    if required is not None:
        params["required"] = required
    return SimpleNamespace(name=name, parameters=params, description="")


WEATHER = tool("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}, ["city"])
CALC = tool("calculate", {"expression": {"type": "string"}}, ["expression"])
SQUARE = tool("square", {"n": {"type": "integer"}}, ["n"])
SCALE = tool("scale", {"factor": {"type": ["number", "null"]}})
TOOLS = [WEATHER, CALC, SQUARE, SCALE]


def grammar_only(text, tools=None, *, strict=False) -> Reply:
    """parse_reply with every call read by the Lark grammar (no json.loads shortcut)."""
    return Reader(text, tools, shortcut=False).read(strict)


def calls(text, tools=None):
    reply = parse_reply(text, tools)
    assert grammar_only(text, tools) == reply, "the shortcut and the grammar disagree"
    return reply.calls


def error(text, parse=parse_reply, **kw) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text, **kw)
    return info.value


def assert_inside(text: str, err: ParseError) -> None:
    lines = text.split("\n")
    assert 1 <= err.line <= len(lines), (err.line, len(lines))
    assert 1 <= err.column <= len(lines[err.line - 1]) + 1, (err.column, lines[err.line - 1])


def check_total(text: str, parse=parse_reply) -> None:
    """The parser returns a Reply or raises ParseError, whose position is inside the text."""
    try:
        reply = parse(text)
    except ParseError as err:
        assert_inside(text, err)
        assert err.label in KNOWN_BAD
        assert str(err) and err.excerpt.endswith("^")
        prompts.parse_feedback(err)
    else:
        assert isinstance(reply, Reply)
        assert (reply.answer is None) == bool(reply.calls)


# Lines a growing reply is made of, for the property tests of the stream readers: calls, ARGS
# lines, objects over several lines, fences, thoughts, answers, prose and a call cut inside a list.
CALL_LINES = [
    'TOOL: f ARGS: {"a": 1}',
    "TOOL: g",
    'ARGS: {"b": 2}',
    "ARGS: {",
    '  "c": 3',
    "}",
    "ARGS:",
    "```json",
    "```",
    "Thought: hm",
    "",
    "plain words",
    "TOOL: h ARGS: 7",
    "ANSWER: done",
    '1. TOOL: f ARGS: {"a": [1,',
    "2]}",
    "OBSERVATION: made up",
]
# ... and lines that only an answer or prose holds
REPLY_LINES = [
    *CALL_LINES,
    "ANSWER:",
    "Final Answer: x",
    "> quoted",
    "words\r",
    "the word tool in prose",
]
