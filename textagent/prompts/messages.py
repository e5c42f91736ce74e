"""What the model reads in the conversation besides its tools: its task, the observation of
each call, and feedback on a reply that did not parse or was cut off."""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .. import _schema
from ..protocol import ParseError, ToolCall, render_call
from ..protocol.binding import tool_specs
from ..protocol.types import NAME_RE
from .files import for_family, template

__all__ = [
    "QUOTE",
    "cut_feedback",
    "example_call",
    "feedback",
    "listed",
    "observation",
    "parse_feedback",
    "quote_output",
    "task",
]


# Every further line of a multi-line tool result is quoted with this, so a result holding
# "TOOL: ..." or "ANSWER: ..." lines can never read as a line the model wrote.
QUOTE = "  | "


def quote_output(output: str) -> str:
    lines = output.splitlines() or [""]
    return "\n".join([lines[0], *(QUOTE + line for line in lines[1:])])


def observation(name: str, output: str, *, failed: bool = False) -> str:
    return template("observation_error.txt" if failed else "observation.txt").substitute(
        name=name, output=quote_output(output)
    )


def listed(words: list[str], last: str = "and") -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


def feedback(text: str) -> str:
    return template("feedback.txt").substitute(feedback=text)


def task(text: str) -> str:
    return template("task.txt").substitute(task=text)


def parse_feedback(err: ParseError, tools: Any = None) -> str:
    """What the model reads about a reply that did not parse: what is wrong, where, how to fix
    it, and one correct call to copy. ``tools`` (else ``err.tools``, those the reply was read
    against) make that call use a real tool: the one the model tried, else the closest name."""
    text = for_family("text")
    specs = tool_specs(tools if tools is not None else err.tools)
    names = ", ".join(specs) if specs else ""
    expected = ", ".join(err.expected) if err.expected else ""
    values = {
        "message": err.message,
        "line": str(err.line),
        "column": str(err.column),
        "excerpt": "\n".join("    " + ln for ln in (err.excerpt or text.render("format_no_excerpt")).split("\n")),
        "hint": err.hint,
        "expected": text.render("format_expected", expected=expected) if expected else "",
        "example": example_call(specs, err.name),
        "tools": text.render("format_tools", tools=names) if names else "",
    }
    out = text.template("format_error").safe_substitute(values)
    return re.sub(r"\n{3,}", "\n\n", out).strip()


def cut_feedback(reply: str, err: ParseError) -> str | None:
    """What the model reads about a reply the length limit cut off where it stops parsing (on
    its last line: the cut, not a mistake of the model): that it was cut, and the line it
    repeats when it wrote one over and over. None when the error comes before the last line."""
    lines = reply.rstrip("\n").split("\n")
    if err.line < len(lines):
        return None
    text = for_family("text")
    counts = Counter(line.strip() for line in lines[:-1] if line.strip())
    repeated, count = counts.most_common(1)[0] if counts else ("", 0)
    repeats = text.render("reply_cut_repeats", repeated=repeated[:200], count=count) if count > 1 else ""
    return text.render("reply_cut", line=len(lines), repeats=repeats)


def example_call(specs: Mapping[str, Mapping[str, Any]], name: str | None) -> str:
    """A correct call to show (``specs``: tool name -> parameter schema): the tool the model
    tried, else the closest name, else one that takes arguments, with placeholder values for its
    required parameters."""
    if not specs:
        return render_call(ToolCall(name if name and NAME_RE.match(name) else "tool_name", {"key": "value"}))
    chosen = None
    if name in specs:
        chosen = name
    elif name:
        close = difflib.get_close_matches(name, list(specs), n=1, cutoff=0.5)
        chosen = close[0] if close else None
    if chosen is None:
        chosen = next((n for n, p in specs.items() if p.get("required")), next(iter(specs)))
    params = specs[chosen]
    props = params.get("properties") or {}
    required = params.get("required", list(props))
    args = {k: _schema.example_value(props.get(k) or {}) for k in required if k in props}
    if not NAME_RE.match(chosen):  # pragma: no cover - tool layers validate names
        return f"TOOL: {chosen} ARGS: {json.dumps(args, ensure_ascii=False)}"
    return render_call(ToolCall(chosen, args))
