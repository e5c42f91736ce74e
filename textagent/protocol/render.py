"""The canonical text of a call and of an answer (what the parser reads back unchanged)."""

from __future__ import annotations

import json
import re

from .types import NAME_PATTERN, NAME_RE, ToolCall

_KEY_EQ = re.compile(NAME_PATTERN + r"[ \t]*=(?!=)")


def _plain_bare(s: str) -> bool:
    """Can the string be written after ARGS: as is and read back unchanged?"""
    return (
        bool(s)
        and s == s.strip()
        and "\n" not in s
        and "\r" not in s
        and s[0] not in "{[\"'"
        and _KEY_EQ.match(s) is None
    )


def render_call(call: ToolCall) -> str:
    """The canonical line for a call: ``TOOL: name ARGS: {"key": value}``.

    ``parse_reply(render_call(c)).calls == [c]`` for every valid call. A bare string argument is
    written as is when it reads back unchanged, else as a JSON string (which reads back as the
    same bare argument).
    """
    name = call.name
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(f"not a valid tool name: {name!r}")
    args = call.args
    if isinstance(args, str):
        return f"TOOL: {name} ARGS: {args if _plain_bare(args) else json.dumps(args, ensure_ascii=False)}"
    if not args:
        return f"TOOL: {name} ARGS: {{}}"
    return f"TOOL: {name} ARGS: {json.dumps(args, ensure_ascii=False)}"


def render_answer(text: str) -> str:
    """The canonical answer: ``ANSWER: text``."""
    return f"ANSWER: {text}"
