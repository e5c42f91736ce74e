"""What the client gets for one request: an :class:`Answer` (content or calls, how it ended, the
attempts it took), and a call's ``arguments`` as JSON a client can read."""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..backends.base import Usage
from ..steps import Step

__all__ = ["Answer", "arguments_json", "new_call_id", "non_finite"]

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Answer:
    content: str | None
    calls: list[dict[str, Any]]  # {"id", "name", "arguments" (a JSON string), "args" (the object)}
    finish_reason: str  # tool_calls | stop | length
    usage: Usage = field(default_factory=Usage)
    repairs: int = 0
    attempts: list[Step] = field(default_factory=list)  # one per upstream completion
    turns: list[dict[str, str]] = field(default_factory=list)  # what the model wrote, repairs included
    failure: str | None = None  # why the content is empty: no reply was usable (not an error for the client)

    def message(self) -> dict[str, Any]:
        """The assistant message of the response."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in self.calls
            ]
        return message


def new_call_id() -> str:
    """The id of a call the client gets."""
    return "call_" + uuid.uuid4().hex[:24]


def arguments_json(args: Any) -> str:
    """The ``arguments`` string of a tool call: RFC 8259 JSON (ValueError for NaN or an infinity),
    and text UTF-8 can carry (a lone surrogate the model wrote is kept as its ``\\uXXXX`` escape,
    which reads back as the same string)."""
    text = json.dumps(args, ensure_ascii=False, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


def non_finite(value: Any) -> tuple[list[Any], float] | None:
    """The path to the first NaN or infinity in ``value`` (JSON data), if any; no recursion."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path, node
        if isinstance(node, dict):
            stack.extend((v, [*path, k]) for k, v in reversed(list(node.items())))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, [*path, i]) for i, v in reversed(list(enumerate(node))))
    return None
