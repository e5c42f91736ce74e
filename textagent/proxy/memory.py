"""The proxy's record of what the model really wrote for each message it returned.

When the client sends a returned assistant message back, the conversation is written with the
model's own bytes (repairs included), so that every turn's prompt starts with the previous
turn's prompt and reply and the upstream reuses its KV cache."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

__all__ = ["MessageKeys", "ReplyMemory", "message_key"]


def _ascii_json(value: Any) -> bytes:
    # ASCII: a lone surrogate is its \uXXXX escape, so every string has its own bytes
    return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str).encode("ascii")


class MessageKeys:
    """``message_key`` for each assistant message of one conversation, in linear time: the
    turns before a message are hashed once, as the conversation grows (a running hash), never
    re-read for a later message. The turns hashed must not change afterwards."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._hashed = 0

    def key(self, before: list[dict[str, str]], content: str | None, calls: list[tuple[str, Any]]) -> str:
        for turn in before[self._hashed :]:
            self._hash.update(_ascii_json([turn["role"], turn["content"]]) + b"\n")
        self._hashed = len(before)
        whole = self._hash.copy()
        whole.update(b"\x00" + _ascii_json([content or "", [list(c) for c in calls]]))
        return whole.hexdigest()


def message_key(before: list[dict[str, str]], content: str | None, calls: list[tuple[str, Any]]) -> str:
    """What identifies an assistant message the proxy returned when the client sends it back: the
    turns it answered and its content and calls (names and arguments; a client may rewrite ids).
    Two conversations that get the same reply keep their own records (repairs included)."""
    return MessageKeys().key(before, content, calls)


def _calls_of(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(c["name"], c["args"]) for c in message.get("tool_calls") or []]


class ReplyMemory:
    """The turns the model really wrote for a returned assistant message (its raw reply, and any
    repair before it: bad reply, feedback, ...), by ``message_key``; the oldest are forgotten."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._turns: OrderedDict[str, list[dict[str, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, key: str, turns: list[dict[str, str]]) -> None:
        with self._lock:
            self._turns[key] = turns
            self._turns.move_to_end(key)
            while len(self._turns) > self.size:
                self._turns.popitem(last=False)

    def recall(
        self, before: list[dict[str, str]], message: Mapping[str, Any], keys: MessageKeys | None = None
    ) -> list[dict[str, str]] | None:
        key = (keys or MessageKeys()).key(before, message.get("content"), _calls_of(message))
        with self._lock:
            return self._turns.get(key)
