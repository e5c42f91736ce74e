"""JSON Lines: one JSON value per line, blank lines ignored. The one reader of textagent's JSONL
files (task suites, episode records, traces, BFCL's data), plain or gzip-compressed.

A line that is not JSON raises JsonlError naming ``file:line`` by default; ``bad="skip"``
passes over it (files a crash may have cut off), ``bad="keep"`` yields it with its error, for
readers that recover something from it.

A gzip file (told by its first bytes, whatever its name) is read as the text of its members one
after another, as ``gunzip`` gives it. :class:`JsonlAppender` writes one member per line, so a
process killed while appending cuts only its last member: its text so far reads as a line cut
off in a plain file, and the next append rewrites that member whole before adding its own.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

__all__ = ["JsonLine", "JsonlAppender", "JsonlError", "is_gzip", "parse_jsonl", "read_jsonl"]

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 16

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
            if f.read(2) != _GZIP_MAGIC:
                f.seek(0)
                yield from parse_jsonl(f, str(path), bad=bad, encoding_errors=encoding_errors)
                return
            f.seek(0)
            members = _Members(f)
            yield from parse_jsonl(_lines(members), str(path), bad=bad, encoding_errors=encoding_errors)
            if members.unreadable is not None:  # what is after it cannot be read: said like a bad line
                where = f"{path}: byte {members.whole_end}"
                if bad == "raise":
                    raise JsonlError(f"{where}: {members.unreadable}")
                if bad == "keep":
                    yield JsonLine(where, 0, "", None, members.unreadable)
    except OSError as exc:
        raise JsonlError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def is_gzip(path: str | Path) -> bool:
    """Whether the file at ``path`` is gzip data (False when it is missing or empty)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == _GZIP_MAGIC
    except OSError:
        return False


class _Members:
    """The decompressed text of a gzip file's members, in chunks as they are read, from where the
    file stands (iterate once).

    After iterating: ``whole_end`` is the offset just after the last whole member (the file ends
    inside the member begun there when it is not the file's end: a writer killed mid-member, whose
    text so far was yielded, as a plain file cut off gives its text so far); ``unreadable`` says why
    the bytes from ``whole_end`` on are not gzip data (None when they are); ``last`` is the last
    byte of text."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.whole_end = f.tell()
        self.unreadable: str | None = None
        self.last = b""

    def __iter__(self) -> Iterator[bytes]:
        member = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around the deflate data
        fed = 0  # bytes of the file given to the member begun at whole_end
        data = b""
        while True:
            if not data and not (data := self._f.read(_CHUNK)):
                return
            if fed == 0:  # between members: zero bytes may pad a gzip file, as gunzip allows
                stripped = data.lstrip(b"\x00")
                self.whole_end += len(data) - len(stripped)
                data = stripped
                if not data:
                    continue
            try:
                text = member.decompress(data)
            except zlib.error as exc:
                self.unreadable = f"not gzip data ({exc})"
                return
            fed += len(data)
            data = b""
            if member.eof:
                data = member.unused_data
                self.whole_end += fed - len(data)
                fed = 0
                member = zlib.decompressobj(wbits=31)
            if text:
                self.last = text[-1:]
                yield text


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Lines (each with its newline, the last maybe without) of text given in chunks."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        if b"\n" in chunk:
            *whole, rest = rest.split(b"\n")
            for line in whole:
                yield line + b"\n"
    if rest:
        yield rest


class JsonlAppender:
    """Appends lines to a JSONL file, each whole on disk when :meth:`append` returns.

    The file keeps its form: gzip when it is gzip already, or (new or empty) when ``path`` ends in
    ``.gz``; plain otherwise. A plain file is flushed after each line; a gzip file takes each line
    as a member of its own, written in one go, so that a kill mid-write cuts only that member. A
    file a crash cut off is mended first, so that readers see the same lines before and after and
    the next line starts on a line of its own: a plain file's cut line is ended; a gzip file's cut
    member is written again, whole, with the text it had and a newline (bytes after the last whole
    member that are not gzip data at all are dropped)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        empty = not self.path.exists() or self.path.stat().st_size == 0
        self.gzip = self.path.suffix == ".gz" if empty else is_gzip(self.path)
        self.closed = False
        carry = b"" if empty else self._mend()
        if carry:
            self._write(carry)

    def _mend(self) -> bytes:
        """What the file needs written before the next line (the file cut back to its last whole
        gzip member first)."""
        if not self.gzip:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                return b"" if f.read(1) == b"\n" else b"\n"
        with open(self.path, "rb") as f:
            members = _Members(f)
            for _ in members:
                pass
            f.seek(members.whole_end)
            cut = b"".join(_Members(f))  # the text a cut last member had (none when all are whole)
        if members.whole_end < self.path.stat().st_size:
            os.truncate(self.path, members.whole_end)
        return cut + (b"\n" if members.last not in (b"", b"\n") else b"")

    def _write(self, data: bytes) -> None:
        if self.closed:
            raise ValueError(f"{self.path}: appending after close()")
        with open(self.path, "ab") as f:  # opened for each line: nothing is left half-buffered between them
            f.write(gzip.compress(data, mtime=0) if self.gzip else data)

    def append(self, line: str) -> None:
        """Write ``line`` (a newline is added when it has none)."""
        self._write((line if line.endswith("\n") else line + "\n").encode("utf-8"))

    def close(self) -> None:
        """No line is appended after this (lines written are on disk already)."""
        self.closed = True

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
