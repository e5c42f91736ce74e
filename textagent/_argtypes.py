"""argparse types the commands share: a bad value is a one-line usage error (exit 2), never a
traceback or a value that means something else (an empty --endpoint is not "the embedded server")."""

from __future__ import annotations

import argparse
import math
import shlex
from collections.abc import Callable
from typing import Any

__all__ = [
    "Refused",
    "command_line",
    "non_negative",
    "nonempty",
    "port_number",
    "positive",
    "repeat_limit",
    "slot_list",
]


class Refused(Exception):
    """Options that parse but cannot run together: the one-line message, and the exit code (2: usage)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def _number(kind: type, text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None


def positive(kind: type) -> Callable[[str], Any]:
    """A number of ``kind`` greater than zero and finite."""

    def convert(text: str) -> Any:
        value = _number(kind, text)
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number greater than 0 (got {text})")
        return value

    convert.__name__ = f"positive {kind.__name__}"
    return convert


def non_negative(kind: type) -> Callable[[str], Any]:
    """A finite number of ``kind`` from 0: ``--temperature nan`` is a usage error, not a request body that is no JSON."""

    def convert(text: str) -> Any:
        value = _number(kind, text)
        if not value >= 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number from 0 (got {text})")
        return value

    convert.__name__ = f"non-negative {kind.__name__}"
    return convert


def command_line(what: str) -> Callable[[str], str]:
    """A command line split like a shell's, or a URL: an unclosed quote is a usage error here, not a
    traceback when the command is started. The text is kept as given; the error does not repeat it
    (it may hold a key)."""

    def convert(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(
                f"{what} is empty (a variable that is not set?); leave the option out instead"
            )
        try:
            shlex.split(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"cannot be split like a shell's command line: {exc}") from None
        return text

    convert.__name__ = what
    return convert


def repeat_limit(text: str) -> int:
    """``--max-repeats``: a whole number from 2 (one reply is not a repeat)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"the same calls 2 or more times in a row, not {value}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 0 (a free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 (a free one) to 65535, not {value}")
    return value


def nonempty(what: str) -> Callable[[str], str]:
    """A string that is not empty or blank: an empty value is most often a variable that is not set."""

    def convert(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(
                f"{what} is empty (a variable that is not set?); leave the option out instead"
            )
        return text

    convert.__name__ = what
    return convert


def slot_list(text: str) -> tuple[int, ...]:
    """Server slot numbers, comma-separated, each a whole number from 0, none twice."""
    slots: list[int] = []
    for part in text.split(","):
        try:
            slot = int(part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part.strip()!r} is not a slot number (0, 1, ...)") from None
        if slot < 0 or slot in slots:
            raise argparse.ArgumentTypeError(f"slot {slot} is {'negative' if slot < 0 else 'given twice'}")
        slots.append(slot)
    return tuple(slots)
