"""JSONL traces: one line when a run starts, one per step (flushed as it ends), one with the result.

Every line is strict JSON in valid UTF-8 (:func:`json_line`): a float that JSON cannot hold is
written as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, and a lone surrogate (``"\\ud83d"``
in a model's JSON arguments) as its ``\\u`` escape, which reads back as the same string.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .jsonl import parse_jsonl

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; lines are still flushed whole
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from .steps import Result, Step

__all__ = [
    "Trace",
    "TraceWriter",
    "json_line",
    "load_trace",
    "load_traces",
    "new_run_id",
    "result_record",
    "run_records",
    "start_record",
]

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
    except ValueError:  # a NaN or an infinity somewhere
        line = json.dumps(_finite(record), ensure_ascii=False, allow_nan=False, default=str)
    if _SURROGATE.search(line):
        line = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
    return line


def new_run_id() -> str:
    """The id every line of one run carries (``"run"``)."""
    return uuid.uuid4().hex[:12]


def start_record(*, task: str, tools: list[str], **config: Any) -> dict[str, Any]:
    """A run's first trace line: the task, the tools' names, the time, and the run's settings."""
    return {"type": "start", "task": task, "tools": tools, "time": time.time(), **config}


def result_record(result: Result) -> dict[str, Any]:
    """A run's last trace line: how it ended, what it cost, and the mode's counts."""
    error = result.error
    return {
        "type": "result",
        "answer": result.answer,
        "stop_reason": result.stop_reason,
        "steps": len(result.steps),
        "usage": result.usage.to_dict(),
        "seconds": round(result.seconds, 6),
        "time": result.time_spent(),
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
        "mode": result.mode,
        "decode_failures": result.decode_failures,
        "early_stops": result.early_stops,
    }


def run_records(
    start: dict[str, Any] | None, steps: Sequence[Step], result: Result | None, *, run_id: str | None = None
) -> list[dict[str, Any]]:
    """The lines :class:`TraceWriter` writes for a run, built from the run itself: ``start``
    (:func:`start_record`), one per step, the result's; a part that is None is left out (a run
    that raised has no result). Each line carries ``run_id`` (a new one when None)."""
    run = run_id or new_run_id()
    lines = ([start] if start is not None else []) + [s.to_record() for s in steps]
    if result is not None:
        lines.append(result_record(result))
    return [{**line, "run": run} for line in lines]


class TraceWriter:
    """Writes trace lines to a path or an open text file; a no-op when given None.

    Every line carries the run's id (``"run"``), and a line is written whole under an exclusive
    lock of the file, so runs appending to one file at once cannot mix their lines or their steps.
    """

    def __init__(self, target: str | Path | IO[str] | None):
        self._own = isinstance(target, (str, Path))
        self.run_id = new_run_id()
        self._file: IO[str] | None
        if isinstance(target, (str, Path)):
            self._file = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            if not _ends_a_line(target):
                # a run that crashed mid-record left half a line: start ours on a fresh one
                self._locked("\n")
        else:
            self._file = target

    def _locked(self, text: str) -> None:
        assert self._file is not None
        fileno = None
        with contextlib.suppress(AttributeError, OSError, ValueError):
            fileno = self._file.fileno()
        if fileno is None or fcntl is None:
            self._file.write(text)
            self._file.flush()
            return
        fcntl.flock(fileno, fcntl.LOCK_EX)
        try:
            self._file.write(text)
            self._file.flush()  # a crash later must not cost the steps already taken
        finally:
            fcntl.flock(fileno, fcntl.LOCK_UN)

    def write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._locked(json_line({**record, "run": self.run_id}) + "\n")

    def start(self, *, task: str, tools: list[str], **config: Any) -> None:
        self.write(start_record(task=task, tools=tools, **config))

    def step(self, step: Step) -> None:
        self.write(step.to_record())

    def result(self, result: Result) -> None:
        self.write(result_record(result))

    def close(self) -> None:
        if self._own and self._file is not None:
            self._file.close()
        self._file = None

    def __enter__(self) -> TraceWriter:
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
    by_id: dict[str, Trace] = {}
    broken = False
    record: object  # a line's JSON value: only objects are records
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in parse_jsonl(f, str(path), bad="keep"):
            if isinstance(line.value, dict) and isinstance(line.value.get("run"), str):
                # runs that wrote at the same time: each line says whose it is
                record, run_id = line.value, line.value["run"]
                if record.get("type") == "start" or run_id not in by_id:
                    by_id[run_id] = Trace()
                    runs.append(by_id[run_id])
                _add(by_id[run_id], record)
                broken = False
                continue
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
            if isinstance(record.get("run"), str):  # a start record glued onto a cut line
                by_id[record["run"]] = Trace()
                runs.append(by_id[record["run"]])
                _add(runs[-1], record)
                broken = False
                continue
            if kind == "start" or not runs or broken:
                runs.append(Trace())
            broken = False
            _add(runs[-1], record)
    return runs


def _add(trace: Trace, record: dict[str, Any]) -> None:
    kind = record.get("type")
    if kind == "start":
        trace.start = record
    elif kind == "step":
        trace.steps.append(record)
    elif kind == "result":
        trace.result = record
