"""The values a parse gives: calls, dropped text, the reply, and a call before binding."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: A tool name: ``[A-Za-z_][A-Za-z0-9_.-]*``, the grammar's NAME (``grammars/reply.lark``; a test
#: holds the two equal). A tool takes a name the protocol can write, at most MAX_NAME_CHARS long.
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
NAME_RE = re.compile(NAME_PATTERN + r"\Z")
MAX_NAME_CHARS = 128
#: Deepest nesting of ``{``/``[`` accepted in arguments (deeper is a ParseError, label ``too_deep``).
MAX_DEPTH = 256


def is_tool_name(name: object) -> bool:
    """Whether ``name`` can be a tool's name: the protocol writes and reads it (NAME_PATTERN), and
    it is at most MAX_NAME_CHARS long. ``Tool`` and MCP's names ask here."""
    return isinstance(name, str) and len(name) <= MAX_NAME_CHARS and NAME_RE.match(name) is not None


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name, its arguments, and its id.

    ``args`` is a dict, except for a bare argument (``ARGS: 17 * 24``) that could not be bound to
    a parameter because no schema was known: then it is the argument text. ``id``: the id the
    call goes by in a chat conversation (native function calling: the server's ``tool_calls``
    id, which the tool's result answers); None for calls read from text. Two calls are equal
    when name and arguments are, whatever their ids.
    """

    name: str
    args: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "args"}``, and ``"id"`` when the call has one."""
        out: dict[str, Any] = {"name": self.name, "args": self.args}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class Dropped:
    """Text the parser dropped on purpose.

    ``kind`` is ``"observation"`` (the model wrote its own OBSERVATION line: it and everything
    after it are dropped) or ``"answer_after_calls"`` (an ANSWER in a reply that also calls
    tools: the calls win). ``line`` is 1-based.
    """

    kind: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Reply:
    """A parsed reply. Either ``calls`` is non-empty and ``answer`` is None, or there are no calls
    and ``answer`` is the final answer (the ANSWER text, or the whole prose when the reply had
    neither calls nor ANSWER). ``thought`` is the prose: every line that is not a call, an answer,
    a dropped part or a code fence wrapped around a call."""

    calls: list[ToolCall]
    answer: str | None
    thought: str
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def truncated_at(self) -> int | None:
        """1-based line where a self-written OBSERVATION started (the reply was cut there)."""
        for d in self.dropped:
            if d.kind == "observation":
                return d.line
        return None

    @property
    def is_final(self) -> bool:
        """True when the reply calls no tools (it is the final answer)."""
        return not self.calls

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``textagent parse`` prints."""
        return {
            "calls": [c.to_dict() for c in self.calls],
            "answer": self.answer,
            "thought": self.thought,
            "dropped": [d.to_dict() for d in self.dropped],
        }


@dataclass(frozen=True)
class CallSyntax:
    """What the grammar read from one call, before binding to a tool schema.

    ``kind`` is ``"none"`` (no arguments), ``"object"`` (JSON/relaxed object), ``"kv"``
    (key=value pairs), ``"bare"`` (a bare argument, or one positional argument of the
    shorthand; ``value`` is its text), or ``"array"`` (rejected: arguments must be an object).
    ``pos`` is the offset of the arguments in the call text (for errors).
    """

    name: str
    kind: str
    value: Any
    pos: int = 0
