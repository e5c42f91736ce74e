"""What the model reads about a format error: the message, where, how to fix it, and a correct
call to copy. Every word comes from a template under ``textagent/prompts/text/``."""
from __future__ import annotations

import difflib
import json
import re
from typing import TYPE_CHECKING, Any

from .. import prompts
from .._schema import example_value
from .binding import tool_specs
from .render import render_call
from .types import NAME_RE, ToolCall

if TYPE_CHECKING:
    from .error_table import ParseError


def feedback_text(err: ParseError, tools: Any = None) -> str:
    """The feedback for ``err``; ``tools`` make the example call use a real tool (see
    :meth:`ParseError.feedback`)."""
    text = prompts.for_family("text")
    specs = tool_specs(tools)
    names = ", ".join(specs) if specs else ""
    expected = ", ".join(err.expected) if err.expected else ""
    values = {
        "message": err.message,
        "line": str(err.line),
        "column": str(err.column),
        "excerpt": _indent(err.excerpt or text.render("format_no_excerpt"), "    "),
        "hint": err.hint,
        "expected": text.render("format_expected", expected=expected) if expected else "",
        "example": example_call(specs, err.name),
        "tools": text.render("format_tools", tools=names) if names else "",
    }
    out = text.template("format_error").safe_substitute(values)
    return re.sub(r"\n{3,}", "\n\n", out).strip()


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + ln for ln in text.split("\n"))


def excerpt(lines: list[str], line: int, column: int, width: int = 100) -> str:
    """The line with a caret under the column, cut to a window around it when long."""
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    start = 0
    if len(src) > width:
        start = max(0, min(column - 1 - width // 2, len(src) - width))
    shown = src[start:start + width]
    pad = "".join("\t" if c == "\t" else " " for c in shown[:max(column - 1 - start, 0)])
    lead = "\u2026" if start else ""
    tail = "\u2026" if start + width < len(src) else ""
    return f"{lead}{shown}{tail}\n{' ' if lead else ''}{pad}^"


def example_call(specs: dict[str, dict], name: str | None) -> str:
    """A correct call to show: the tool the model tried, else the closest name, else one that
    takes arguments, with placeholder values for its required parameters."""
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
    args = {k: example_value(props.get(k) or {}) for k in required if k in props}
    if not NAME_RE.match(chosen):  # pragma: no cover - tool layers validate names
        return f"TOOL: {chosen} ARGS: {json.dumps(args, ensure_ascii=False)}"
    return render_call(ToolCall(chosen, args))
