"""JSON Lines: one JSON value per line, blank lines ignored. The one reader of textagent's JSONL
files (task suites, episode records, traces, BFCL's data).

A line that is not JSON raises JsonlError naming ``file:line`` by default; ``bad="skip"``
passes over it (files a crash may have cut off), ``bad="keep"`` yields it with its error, for
readers that recover something from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["JsonLine", "JsonlError", "parse_jsonl", "read_jsonl"]

Bad = Literal["raise", "skip", "keep"]


class JsonlError(ValueError):
    """A JSONL file that cannot be read, or a line of it that is not JSON; the message says
    where (``file:line``)."""


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line: its value, or (``bad="keep"``) the error that kept it from being one."""

    where: str  # "file:line"
    number: int  # 1-based
    text: str
    value: Any = None
    error: str | None = None  # why the line is not JSON (value is then None)


def parse_jsonl(
    text: str | Iterable[str | bytes], source: str = "<text>", *, bad: Bad = "raise", encoding_errors: str = "strict"
) -> Iterator[JsonLine]:
    """The lines of JSONL ``text`` (a string, or its lines as str or UTF-8 bytes); ``source`` names
    it in errors. A line of bytes that is not UTF-8 is a bad line like one that is not JSON."""
    lines = text.split("\n") if isinstance(text, str) else text
    for number, raw in enumerate(lines, 1):
        where = f"{source}:{number}"
        if isinstance(raw, bytes):
            data = raw
            try:
                raw = data.decode("utf-8", errors=encoding_errors)
            except UnicodeDecodeError as exc:
                error = f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)"
                if bad == "raise":
                    raise JsonlError(f"{where}: {error}") from None
                if bad == "keep":
                    yield JsonLine(where, number, data.decode("utf-8", errors="replace"), None, error)
                continue
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            error = f"not valid JSON ({exc.msg} at column {exc.colno})"
        except RecursionError:
            error = "JSON nested too deeply to read"
        else:
            yield JsonLine(where, number, line, value)
            continue
        if bad == "raise":
            raise JsonlError(f"{where}: {error}")
        if bad == "keep":
            yield JsonLine(where, number, line, None, error)


def read_jsonl(
    path: str | Path, *, bad: Bad = "raise", what: str = "file", encoding_errors: str = "strict"
) -> Iterator[JsonLine]:
    """The lines of the JSONL file at ``path``, read as they are needed. A file that cannot be
    read raises JsonlError ("cannot read {what} {path}: ..."); ``encoding_errors`` is open()'s
    ``errors`` (``"replace"`` reads a file with broken UTF-8)."""
    try:
        with open(path, "rb") as f:  # decoded line by line: one cut line must not spoil the file
            yield from parse_jsonl(f, str(path), bad=bad, encoding_errors=encoding_errors)
    except OSError as exc:
        raise JsonlError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
