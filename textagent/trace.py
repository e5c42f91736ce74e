"""JSONL traces: one line when a run starts, one per step (flushed as it ends), one with the result."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import Result, Step

__all__ = ["TraceWriter", "Trace", "load_trace", "load_traces", "step_record", "result_record"]


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

    def write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
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


def load_traces(path: str | Path) -> list[Trace]:
    """Every run in a trace file, oldest first.

    A last line cut off by a crash is ignored; every complete line before it is kept.
    """
    runs: list[Trace] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = record.get("type")
            if kind == "start" or not runs:
                runs.append(Trace())
            if kind == "start":
                runs[-1].start = record
            elif kind == "step":
                runs[-1].steps.append(record)
            elif kind == "result":
                runs[-1].result = record
    return runs
