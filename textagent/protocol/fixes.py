"""A corrected call line for a reply that does not parse, when one can be built.

What the loop shows a model that wrote the same unreadable reply twice (``Retry(vary=True)``):
the call it seems to mean, written as the protocol wants it. Only the common slips are mended
(Python literals, a trailing comma, an object left open, a key given twice, ``name(k=v)``
calls, a call written after another keyword than TOOL, ANSWER too); the result is read back
by the parser, so nothing unreadable is ever proposed.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from .error_table import ParseError
from .lines import classify, wrong_keyword
from .reader import Reader
from .render import render_call
from .types import ToolCall

__all__ = ["corrected_line"]

# a call keyword and the name after it, decorations allowed ("- **TOOL:** `name`", "Tool = name")
_CALL = re.compile(r"\btool\b[\s*_`]*[:=]?[\s*_`]*([A-Za-z_][\w.\-]*)", re.I | re.A)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_MAX_BODY = 20_000  # characters of arguments tried: a longer object is not mended


def corrected_line(text: str, tools: Any = None) -> str | None:
    """The canonical line (``TOOL: name ARGS: {...}``) of the first call in ``text`` that can be
    mended into one that parses, for a tool of ``tools`` when given (the closest name where the
    written one is not listed); None when no such call is there."""
    text = "\n".join(_with_call_keyword(line) for line in text.split("\n"))
    for match in _CALL.finditer(text):
        name = _listed_name(match.group(1), tools)
        if name is None:
            continue
        args = _arguments(text[match.end() : match.end() + _MAX_BODY])
        if args is None:
            continue
        line = render_call(ToolCall(name, args))
        try:
            reply = Reader(line, tools).read(False)
        except ParseError:
            continue
        if reply.calls:
            return line
    return None


def _with_call_keyword(line: str) -> str:
    """A call written after another keyword (``CALL: cd ARGS: {...}``, ``ANSWER: cd ARGS: {...}``)
    with TOOL in its place."""
    wrong = wrong_keyword(line, classify(line))
    if wrong is None:
        return line
    return line[: wrong.keyword] + "TOOL: " + line[wrong.name_at :]


def _listed_name(name: str, tools: Any) -> str | None:
    if tools is None or name in tools:
        return name
    closest: Callable[[str], str | None] | None = getattr(tools, "closest", None)
    return closest(name) if closest is not None else None


def _arguments(rest: str) -> dict[str, Any] | None:
    """The arguments written after a call's name: a JSON object (mended where it can be), or
    Python keyword arguments in parentheses."""
    brace, paren = rest.find("{"), rest.find("(")
    if paren != -1 and (brace == -1 or paren < brace) and not rest[:paren].strip(" \t`*"):
        return _keywords(rest[paren:])
    if brace == -1 or ("\n" in rest[:brace].strip("\n") and rest[:brace].strip()):
        return None
    for attempt in _mended(rest[brace:]):
        value = _object(attempt)
        if value is not None:
            return value
    return None


def _mended(body: str) -> Iterator[str]:
    yield body
    no_commas = _TRAILING_COMMA.sub(r"\1", body)
    yield no_commas
    yield no_commas.rstrip() + _closers(no_commas)


def _object(body: str) -> dict[str, Any] | None:
    """The object ``body`` starts with: JSON (a key given twice keeps its last value), else a
    Python literal that is JSON data."""
    try:
        value = json.JSONDecoder().raw_decode(body)[0]
    except ValueError:
        value = _literal(body)
    return value if isinstance(value, dict) and _is_json(value) else None


def _literal(body: str) -> Any:
    end = _end_of_object(body)
    if end is None:
        return None
    try:
        return ast.literal_eval(body[:end])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _keywords(call: str) -> dict[str, Any] | None:
    """``(key=value, ...)`` as arguments, the values Python literals."""
    depth = 0
    for i, ch in enumerate(call):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            try:
                node = ast.parse("f" + call[: i + 1], mode="eval").body
                if not isinstance(node, ast.Call) or node.args:
                    return None
                args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
            return args if _is_json(args) else None
    return None


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def _scan(body: str) -> tuple[list[str], bool, int | None]:
    """The brackets still open in ``body``, whether a string is open, and where the first object
    closes (None: it does not)."""
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(body):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
            if not stack:
                return [], False, i + 1
    return stack, quote is not None, None


def _end_of_object(body: str) -> int | None:
    return _scan(body)[2]


def _closers(body: str) -> str:
    stack, quoted, end = _scan(body)
    if end is not None:
        return ""
    return ('"' if quoted else "") + "".join(reversed(stack))
