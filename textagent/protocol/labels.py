"""Which error class a grammar failure belongs to, the way lark's ``UnexpectedInput.match_examples``
does it: every known-bad example of :data:`ERROR_CLASSES` is parsed once, the parser state and
the character class where it fails are remembered, and a later failure in the same state gets
that example's label."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from .error_table import ERROR_CLASSES, ErrorKey, ParseError
from .lines import DQ_RE, SQ_RE

_INDEX: dict[tuple[Hashable, ...], str] | None = None
_INDEX_LOCK = threading.Lock()
_TLS = threading.local()  # .building: the index is being built (its own failures get no label yet)

NOT_EXPECTED = frozenset({"WS"})


def char_class(text: str, offset: int) -> str:
    """The kind of character a failure happened at, part of the key examples are matched on."""
    if offset >= len(text):
        return "$END"
    ch = text[offset]
    if ch.isalpha() or ch == "_" or ch == "$":
        return "a"
    if ch.isdigit() or ch in "-+.":
        return "0"
    if ch == '"' or ch == "'":
        # a whole string where it does not belong, or a string that does not end
        return ch + ("str" if (DQ_RE if ch == '"' else SQ_RE).match(text, offset) else "open")
    if ch in "`{}[]():,=*":
        return ch
    if ch.isspace():
        return " "
    return "?"


def _key_views(key: ErrorKey) -> tuple[tuple[Hashable, ...], ...]:
    """The ways a failure is matched against the examples, most specific first:
    (parser state, character class), (what was expected, character class), parser state,
    what was expected."""
    state, expected, cls, kw = key
    return (
        ("s", state, cls, kw),
        ("e", expected, cls, kw),
        ("s", state, kw),
        ("e", expected, kw),
        ("s", state),
        ("e", expected),
    )


def label_for(key: ErrorKey, read: Callable[[str], Any]) -> str:
    """The label of a failure with this key: (parser state, expected terminals, character class,
    whether the tool name read is `args`). ``read`` reads a reply (the reader passes itself, so
    the examples are read as replies are: this module imports no reader)."""
    if getattr(_TLS, "building", False):
        return "bad_call"
    index = _error_index(read)
    for view in _key_views(key):
        label = index.get(view)
        if label is not None:
            return label
    return "bad_call"


def _error_index(read: Callable[[str], Any]) -> dict[tuple[Hashable, ...], str]:
    """Parse every known-bad example once (with ``read``) and remember where it failed -> its label."""
    global _INDEX
    if _INDEX is not None:
        return _INDEX
    with _INDEX_LOCK:
        if _INDEX is None:
            index: dict[tuple[Hashable, ...], str] = {}
            _TLS.building = True
            try:
                for cls in ERROR_CLASSES:
                    for example in cls.examples:
                        try:
                            read(example)
                        except ParseError as err:
                            if err._key is not None:
                                for view in _key_views(err._key):
                                    index.setdefault(view, cls.label)
            finally:
                _TLS.building = False
            _INDEX = index
    return _INDEX
