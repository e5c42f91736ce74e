"""A bench episode as a typed record (:class:`Episode`: one line of episodes.jsonl.gz), and what a
record and a run.json must hold to be read: the type of every field the report, the metrics and
``--resume`` read. A record that does not fit is named and skipped (its episode runs again on
resume); a run.json that does not fit is refused with the field named."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .metrics import classify, step_facts

__all__ = ["RECORD_VERSION", "Episode", "meta_problem", "record_problem"]

RECORD_VERSION = 1


def _no_usage() -> dict[str, Any]:
    return {"prompt_tokens": None, "prompt_evaluated": None, "prompt_cached": None, "completion_tokens": None}


@dataclass
class Episode:
    """One episode of ``textagent bench``: the task and mode, how the run ended, what it cost,
    how it was scored, and its trace. :meth:`to_record` adds the counts the metrics derive from
    the trace (metrics.step_facts: one definition of each) and, for a failure not named by its
    scorer, its class (metrics.classify); :meth:`from_record` reads a record back."""

    task: str
    kind: str
    split: str
    mode: str
    repeat: int
    success: bool = False
    stop_reason: str = "error"
    answer: str | None = None
    steps: int = 0
    seconds: float = 0.0
    usage: dict[str, Any] = field(default_factory=_no_usage)
    checks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    attempted: list[str] = field(default_factory=list)
    needs_tools: bool = False
    needs_no_tool: bool = False
    required_tools: list[str] = field(default_factory=list)
    call_specs: list[Any] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    endpoint: str | None = None
    slot: int | None = None
    error: str | None = None
    time: float = field(default_factory=time.time)
    trace: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None  # None: classified from the record (metrics.classify) unless it succeeded
    multi_turn: dict[str, Any] | None = None  # BFCL's multi-turn verdict
    bfcl: dict[str, Any] | None = None  # BFCL's single-turn scores
    version: int = RECORD_VERSION

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"version": self.version}
        record.update(
            (f.name, getattr(self, f.name))
            for f in fields(self)
            if f.name != "version" and not (f.name in ("multi_turn", "bfcl") and getattr(self, f.name) is None)
        )
        record.update({k: v for k, v in step_facts(record).items() if k != "steps"})
        record["failure"] = None if self.success else (self.failure or classify(record))
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Episode:
        """The episode of a record (the derived counts are left to :meth:`to_record`)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in names})


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _strings(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or check(x)


def _usage(x: Any) -> bool:
    return isinstance(x, Mapping) and all(v is None or _number(v) for v in x.values())


def _dicts(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, Mapping) for v in x)


_RECORD: dict[str, tuple[Callable[[Any], bool], str]] = {
    "task": (lambda x: isinstance(x, str), "a string"),
    "mode": (lambda x: isinstance(x, str), "a string"),
    "repeat": (_int, "a whole number"),
    "success": (lambda x: isinstance(x, bool), "true or false"),
    "steps": (_int, "a whole number"),
    "seconds": (_number, "a number"),
    "usage": (_optional(_usage), "an object of numbers"),
    "kind": (_optional(lambda x: isinstance(x, str)), "a string"),
    "split": (_optional(lambda x: isinstance(x, str)), "a string"),
    "checks": (_dicts, "a list of objects"),
    "calls": (_dicts, "a list of objects"),
    "attempted": (_strings, "a list of strings"),
    "trace": (_dicts, "a list of objects"),
    "failure": (_optional(lambda x: isinstance(x, str)), "a string"),
    "stop_reason": (lambda x: isinstance(x, str), "a string"),
    "format_errors": (_int, "a whole number"),
    "tool_errors": (_int, "a whole number"),
    "bfcl": (lambda x: isinstance(x, Mapping), "an object"),
    "multi_turn": (lambda x: isinstance(x, Mapping), "an object"),
}
_REQUIRED = ("task", "mode")


def _per_turn(x: Any) -> bool:
    return _dicts(x) and all(_optional(_int)(t.get(k)) for t in x for k in ("format_errors", "refused_calls"))


# BFCL's multi-turn verdict: the fields its report reads (bench.bfcl.multi_report); a turn count
# is bounded because the report makes an entry per turn (BFCL's items have at most 8)
_MULTI_TURN: dict[str, tuple[Callable[[Any], bool], str]] = {
    "turns": (_optional(lambda x: _int(x) and x <= 1000), "a whole number up to 1000"),
    "turns_right": (_optional(_int), "a whole number"),
    "force_quit": (_optional(lambda x: isinstance(x, bool)), "true or false"),
    "empty_turns": (_optional(_int), "a whole number"),
    "format_errors": (_optional(_int), "a whole number"),
    "refused_calls": (_optional(_int), "a whole number"),
    "per_turn": (_optional(_per_turn), "a list of objects whose format_errors and refused_calls are whole numbers"),
}

_META: dict[str, tuple[Callable[[Any], bool], str]] = {
    "modes": (_strings, "a list of mode names"),
    "tasks": (_strings, "a list of task ids"),
    "commands": (_strings, "a list of strings"),
    "resumed": (_strings, "a list of strings"),
    "endpoints": (_strings, "a list of strings"),
    "settings": (lambda x: isinstance(x, Mapping), "an object"),
    "unavailable": (lambda x: isinstance(x, Mapping), "an object"),
    "planned": (_int, "a whole number"),
    "n_tasks": (_int, "a whole number"),
    "repeat": (_int, "a whole number"),
    "concurrency": (_int, "a whole number"),
    "command": (lambda x: isinstance(x, str), "a string"),
    "machine": (lambda x: isinstance(x, Mapping), "an object"),
}


def _problem(
    data: Any, fields: Mapping[str, tuple[Callable[[Any], bool], str]], required: tuple[str, ...]
) -> str | None:
    if not isinstance(data, Mapping):
        return "not a JSON object"
    for key in required:
        if key not in data:
            return f"no {key!r}"
    for key, (ok, what) in fields.items():
        if key in data and not ok(data[key]):
            return f"{key!r} must be {what}, not {data[key]!r:.60}"
    return None


def record_problem(record: Any) -> str | None:
    """Why an episode record cannot be read, or None."""
    problem = _problem(record, _RECORD, _REQUIRED)
    if problem is None and "multi_turn" in record:
        inner = _problem(record["multi_turn"], _MULTI_TURN, ())
        if inner is not None:
            return f"in 'multi_turn', {inner}"
    return problem


def meta_problem(meta: Any) -> str | None:
    """Why a run.json cannot be read, or None."""
    return _problem(meta, _META, ())
