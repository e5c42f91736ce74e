"""JSONL traces: one line when a run starts, one per step (flushed as it ends), one with the result.

Every line is strict JSON in valid UTF-8 (:func:`json_line`): a float that JSON cannot hold is
written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, and a lone surrogate (``"\\ud83d"``
in a model's JSON arguments) as its ``\\u`` escape, which reads back as the same string.
"""
from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .jsonl import parse_jsonl

if TYPE_CHECKING:
    from .steps import Result, Step

__all__ = ["TraceWriter", "Trace", "load_trace", "load_traces", "step_record", "result_record", "json_line"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _finite(value: Any) -> Any:
    """``value`` with every NaN / infinite float (also as a key) replaced by its JSON-ish name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {_finite(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_line(record: Any) -> str:
    """``record`` as one line of strict JSON that UTF-8 can hold (no newline at the end).

    NaN and infinite floats become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; a lone
    surrogate becomes its ``\\uXXXX`` escape (it can only stand inside a JSON string, where the
    escape reads back as the same character). Objects JSON does not know are written with str().
    """
    try:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:   # a NaN or an infinity somewhere
        line = json.dumps(_finite(record), ensure_ascii=False, allow_nan=False, default=str)
    if _SURROGATE.search(line):
        line = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
    return line


def _call(call: Any) -> dict[str, Any]:
    return {"name": call.name, "args": call.args}


def step_record(step: "Step") -> dict[str, Any]:
    err = step.parse_error
    return {
        "type": "step",
        "step": step.index,
        "raw": step.raw,
        "calls": [_call(c) for c in step.calls],
        "answer": step.reply.answer if step.reply else None,
        "parse_error": None if err is None else {"message": err.message, "line": err.line, "column": err.column,
                                                 "label": getattr(err, "label", None)},
        "format_error": step.reply is None,
        "dropped": [{"kind": d.kind, "line": d.line, "text": d.text} for d in (step.reply.dropped if step.reply else [])],
        "outcomes": [{"name": o.name, "args": o.args, "ok": o.ok, "error": o.error, "seconds": round(o.seconds, 6)}
                     for o in step.outcomes],
        "observations": step.observations,
        "usage": step.usage.to_dict(),
        "timings": step.timings,
        "finish_reason": step.finish_reason,
        "retries": step.retries,
    }


def result_record(result: "Result") -> dict[str, Any]:
    error = result.error
    return {
        "type": "result",
        "answer": result.answer,
        "stop_reason": result.stop_reason,
        "steps": len(result.steps),
        "usage": result.usage.to_dict(),
        "seconds": round(result.seconds, 6),
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
    }


class TraceWriter:
    """Writes trace lines to a path or an open text file; a no-op when given None."""

    def __init__(self, target: str | Path | IO[str] | None):
        self._own = isinstance(target, (str, Path))
        self._file: IO[str] | None = open(target, "a", encoding="utf-8") if self._own else target  # type: ignore[arg-type]
        if self._own and not _ends_a_line(target):  # type: ignore[arg-type]
            # a run that crashed mid-record left half a line: start ours on a fresh one
            self._file.write("\n")  # type: ignore[union-attr]

    def write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json_line(record) + "\n")
        self._file.flush()  # a crash later must not cost the steps already taken

    def start(self, *, task: str, tools: list[str], **config: Any) -> None:
        self.write({"type": "start", "task": task, "tools": tools, "time": time.time(), **config})

    def step(self, step: "Step") -> None:
        self.write(step_record(step))

    def result(self, result: "Result") -> None:
        self.write(result_record(result))

    def close(self) -> None:
        if self._own and self._file is not None:
            self._file.close()
        self._file = None

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Trace:
    start: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.result is not None


def load_trace(path: str | Path) -> Trace:
    """Read a trace file back: the last run in it (runs are appended, so that is the newest)."""
    runs = load_traces(path)
    if not runs:
        raise ValueError(f"{path}: no trace records in this file")
    return runs[-1]


def _ends_a_line(path: str | Path) -> bool:
    """True when the file is empty, missing, or ends with a newline."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return True
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"
    except OSError:
        return True


_START = '{"type": "start"'


def load_traces(path: str | Path) -> list[Trace]:
    """Every run in a trace file, oldest first.

    A line cut off by a crash is skipped and ends the run it was in: what follows it is another
    run, also when an older writer glued that run's start record onto the cut line (the start is
    then read from where it begins). Every complete line is kept.
    """
    runs: list[Trace] = []
    broken = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in parse_jsonl(f, str(path), bad="keep"):
            record = line.value
            if line.error is not None:
                broken = True
                at = line.text.find(_START, 1)
                try:
                    record = json.loads(line.text[at:]) if at != -1 else None
                except (ValueError, RecursionError):
                    record = None
            if not isinstance(record, dict):
                continue
            kind = record.get("type")
            if kind == "start" or not runs or broken:
                runs.append(Trace())
            broken = False
            if kind == "start":
                runs[-1].start = record
            elif kind == "step":
                runs[-1].steps.append(record)
            elif kind == "result":
                runs[-1].result = record
    return runs
