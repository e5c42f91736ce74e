"""The text protocol: turn a model's reply into tool calls, an answer, or a precise error.

A reply is read line by line (see PROTOCOL.md for the full contract)::

    Thought: I need the weather first.
    TOOL: get_weather ARGS: {"city": "Paris", "days": 3}

gives ``Reply(calls=[ToolCall("get_weather", {"city": "Paris", "days": 3})], answer=None, ...)``.

The package, one job per module:

* :mod:`.types` -- the values: ToolCall, Dropped, Reply, CallSyntax;
* :mod:`.lines` and :mod:`.reader` -- the line-oriented pre-pass: finds call, ANSWER and
  OBSERVATION lines, strips decoration, gathers the lines a multi-line object spans
  (string-aware, linear time) and maps every position back to the reply;
* :mod:`.grammar` -- the LALR grammar ``grammars/reply.lark`` for one call (the only module
  that imports lark);
* :mod:`.error_table` and :mod:`.labels` -- the error classes with their known-bad replies,
  ParseError (data only: ``textagent.prompts.parse_feedback`` words it for the model), and the
  matching that labels a failure from the examples;
* :mod:`.binding` -- a bare argument bound to a tool's parameter;
* :mod:`.render` -- the canonical call and answer lines;
* :mod:`.stream` -- the one reader of a reply as it arrives (:class:`ReplyStream`: calls
  complete, answer text, where to cut, and the Reply at the end);
* :mod:`.words` -- what a reply says in words, for a person: an answer's content, the words of
  a reply that could not be used, a reply read when no line can be a call;
* :mod:`.claims` -- the tools an answer says ran (the status form), whether or not they did.
"""

from __future__ import annotations

from typing import Any

from .claims import claimed_tools
from .error_table import ERROR_CLASSES, KNOWN_BAD, ErrorClass, ParseError, excerpt
from .grammar import grammar_text
from .reader import Reader
from .render import render_answer, render_call
from .stream import AnswerText, CallEnds, CutHere, ReplyStream
from .types import MAX_DEPTH, NAME_PATTERN, CallSyntax, Dropped, Reply, ToolCall
from .words import (
    answer_in,
    begins_call,
    content_of,
    has_call_line,
    line_kind,
    misplaced_call,
    opens_with_keyword,
    words_of,
)

__all__ = [
    "ERROR_CLASSES",
    "KNOWN_BAD",
    "MAX_DEPTH",
    "NAME_PATTERN",
    "AnswerText",
    "CallEnds",
    "CallSyntax",
    "CutHere",
    "Dropped",
    "ErrorClass",
    "ParseError",
    "Reply",
    "ReplyStream",
    "ToolCall",
    "answer_in",
    "begins_call",
    "claimed_tools",
    "content_of",
    "grammar_text",
    "has_call_line",
    "line_kind",
    "misplaced_call",
    "opens_with_keyword",
    "parse_call",
    "parse_reply",
    "render_answer",
    "render_call",
    "words_of",
]


def parse_reply(text: str, tools: Any = None, *, strict: bool = False) -> Reply:
    """Read a model reply: its tool calls, its final answer, or a :class:`ParseError`.

    ``tools``: None, or tools with ``.name`` and ``.parameters`` (a JSON schema) -- a list, a
    mapping such as a ToolSet, OpenAI-style dicts or plain names. With tools, a bare argument
    (``ARGS: 17 * 24``) binds to the tool's single required parameter. ``strict=True`` makes a
    reply with neither calls nor ANSWER an error (label ``no_call_or_answer``) instead of the
    final answer.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_reply() needs a str, not {type(text).__name__}")
    return Reader(text, tools).read(strict)


def parse_call(line: str, tools: Any = None) -> ToolCall:
    """Parse one call (``TOOL: ...``, possibly spanning lines); anything else is a ParseError."""
    reply = parse_reply(line, tools)
    if len(reply.calls) != 1:
        raise ParseError(
            "expected exactly one tool call",
            label="bad_call",
            excerpt=excerpt(line.split("\n"), 1, 1),
            expected=["TOOL: <name> ARGS: {...}"],
        )
    return reply.calls[0]
