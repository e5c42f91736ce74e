"""A bench episode as a typed object (:class:`Episode`, one line of episodes.jsonl.gz when written),
and what a record and a run.json must hold to be read: the type of every field the report, the
metrics and ``--resume`` read. A record that does not fit is named and skipped (its episode runs
again on resume); a run.json that does not fit is refused with the field named.

An Episode made by a run holds that run's Results (one per question: a multi-turn item asks one
per turn), and its counts are theirs; one read from a record (:meth:`Episode.from_record`, the one
loader) has its Results read back from its trace once, so a live run and a re-made report count
alike (bench.facts.EpisodeFacts)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..backends.base import Usage
from ..steps import Result, Step
from ..tools import ToolOutcome
from .bfcl.checker import Verdict
from .checking import CheckResult
from .facts import EpisodeFacts, classify, facts_of

__all__ = [
    "RECORD_VERSION",
    "BfclScores",
    "Episode",
    "MultiTurnVerdict",
    "TurnEnd",
    "call_from_record",
    "call_record",
    "meta_problem",
    "record_problem",
    "runs_of",
]

RECORD_VERSION = 1


@dataclass(frozen=True)
class BfclScores:
    """BFCL's verdicts on a single-turn item, one per view (bench.bfcl.score.score_steps): the
    first reply (BFCL's own view), the first usable reply after the loop's feedback, every distinct
    call the agent made; ``recovered``: right after feedback where the first reply was not."""

    first: Verdict
    feedback: Verdict
    agent: Verdict
    recovered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BfclScores:
        """The scores of a record (record_problem has checked the views the report reads; a view
        a test leaves out is not valid)."""

        def view(key: str) -> Verdict:
            v = data.get(key)
            v = v if isinstance(v, Mapping) else {}
            error_type = v.get("error_type")
            return Verdict(
                bool(v.get("valid")), None if error_type is None else str(error_type), str(v.get("detail") or "")
            )

        return cls(view("first"), view("feedback"), view("agent"), bool(data.get("recovered")))


@dataclass
class TurnEnd:
    """How one turn of a BFCL multi-turn item ended: its stop reason, steps, calls that ran,
    replies that did not parse, calls refused, and whether no call ran."""

    turn: int
    stop_reason: str
    steps: int = 0
    calls: int = 0
    format_errors: int = 0
    refused_calls: int = 0
    empty: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnEnd:
        return cls(
            int(data.get("turn") or 0),
            str(data.get("stop_reason") or "error"),
            int(data.get("steps") or 0),
            int(data.get("calls") or 0),
            int(data.get("format_errors") or 0),
            int(data.get("refused_calls") or 0),
            bool(data.get("empty")),
        )


@dataclass
class MultiTurnVerdict:
    """BFCL's verdict on a multi-turn item (``valid``, ``error_type``, ``error``; ``turns_right``:
    how many turns from the first its checker accepts, of ``turns``), and how the item went:
    force-quit, each turn's end, the calls each step of each turn ran (``executed``), and the
    totals over the turns (empty turns count those whose ground truth has calls)."""

    valid: bool = False
    error_type: str | None = None
    error: str | None = None
    turns_right: int = 0
    turns: int = 0
    force_quit: bool = False
    per_turn: list[TurnEnd] = field(default_factory=list)
    executed: list[list[list[str]]] = field(default_factory=list)
    empty_turns: int = 0
    format_errors: int = 0
    refused_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MultiTurnVerdict:
        """The verdict of a record (an older record's missing fields are their defaults)."""
        error_type, error = data.get("error_type"), data.get("error")
        return cls(
            valid=bool(data.get("valid")),
            error_type=None if error_type is None else str(error_type),
            error=None if error is None else str(error),
            turns_right=int(data.get("turns_right") or 0),
            turns=int(data.get("turns") or 0),
            force_quit=bool(data.get("force_quit")),
            per_turn=[TurnEnd.from_dict(t) for t in data.get("per_turn") or ()],
            executed=[[list(map(str, step)) for step in turn] for turn in data.get("executed") or ()],
            empty_turns=int(data.get("empty_turns") or 0),
            format_errors=int(data.get("format_errors") or 0),
            refused_calls=int(data.get("refused_calls") or 0),
        )


def runs_of(trace: Sequence[Any], mode: str) -> list[Result]:
    """The runs a trace holds, one per question (a ``start`` line opens one; steps before any
    belong to the first): their steps (Step.from_record) and, when a ``result`` line closed the
    run, its answer and stop reason (else no answer, "error")."""
    runs: list[Result] = []
    steps: list[Step] = []
    answer: str | None = None
    stop, seconds, opened = "error", 0.0, False
    for event in trace:
        if not isinstance(event, Mapping):
            continue
        kind = event.get("type")
        if kind == "start":
            if opened or steps:
                runs.append(Result(answer, stop, steps, Usage(), seconds, mode=mode))
            steps, answer, stop, seconds, opened = [], None, "error", 0.0, True
        elif kind == "step":
            steps.append(Step.from_record(dict(event)))
        elif kind == "result":
            raw = event.get("answer")
            answer = None if raw is None else str(raw)
            stop, opened = str(event.get("stop_reason") or "error"), True
            seconds = float(event.get("seconds") or 0.0) if isinstance(event.get("seconds"), (int, float)) else 0.0
    if opened or steps:
        runs.append(Result(answer, stop, steps, Usage(), seconds, mode=mode))
    return runs


@dataclass
class Episode:
    """One episode of ``textagent bench``: the task and mode, how the run ended, what it cost,
    how it was scored, and its trace. ``runs``: the Agent's runs of it, one per question, live or
    read back from the trace; :attr:`facts` are their counts (bench.facts.EpisodeFacts, one
    definition of each). :meth:`to_record` writes the episode with those counts and, for a
    failure not named by its scorer, its class (facts.classify); :meth:`from_record` reads one."""

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
    usage: Usage = field(default_factory=Usage)
    checks: list[CheckResult] = field(default_factory=list)
    calls: list[ToolOutcome] = field(default_factory=list)  # the calls that ran
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
    failure: str | None = None  # None: classified from the episode (facts.classify) unless it succeeded
    multi_turn: MultiTurnVerdict | None = None  # BFCL's multi-turn verdict
    bfcl: BfclScores | None = None  # BFCL's single-turn scores
    version: int = RECORD_VERSION
    runs: list[Result] = field(default_factory=list, repr=False, compare=False)

    @functools.cached_property
    def result(self) -> Result:
        """The episode's runs as one Result: every step of every question, the episode's answer."""
        steps = [s for run in self.runs for s in run.steps]
        return Result(self.answer, self.stop_reason, steps, Usage(), float(self.seconds or 0.0), mode=self.mode)

    @functools.cached_property
    def facts(self) -> EpisodeFacts:
        """The counts of the episode, those of its run (:attr:`result`)."""
        return facts_of(self.result)

    @property
    def failure_class(self) -> str | None:
        """None when it succeeded, else the class its scorer named or :func:`facts.classify` gives."""
        return None if self.success else (self.failure or classify(self))

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"version": self.version}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("version", "runs") or (f.name in ("multi_turn", "bfcl") and value is None):
                continue
            if f.name == "checks":
                value = [c.to_dict() for c in value]
            elif f.name == "calls":
                value = [call_record(c) for c in value]
            record[f.name] = value.to_dict() if isinstance(value, (MultiTurnVerdict, BfclScores, Usage)) else value
        record.update({k: v for k, v in self.facts.to_dict().items() if k != "steps"})
        record["failure"] = self.failure_class
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Episode:
        """The episode of a record (record_problem has passed it): its fields, its verdict typed,
        its runs read back from its trace (the derived counts are :attr:`facts`)."""
        names = {f.name for f in fields(cls)} - {"runs", "multi_turn", "usage", "checks", "calls", "bfcl"}
        given = {k: v for k, v in record.items() if k in names}
        episode = cls(**{"kind": "other", "split": "", "repeat": 0, **given})
        episode.usage = Usage.from_dict(record.get("usage"))
        episode.checks = [CheckResult.from_dict(c) for c in record.get("checks") or ()]
        episode.calls = [call_from_record(c) for c in record.get("calls") or ()]
        scores = record.get("bfcl")
        episode.bfcl = BfclScores.from_dict(scores) if isinstance(scores, Mapping) else None
        verdict = record.get("multi_turn")
        episode.multi_turn = MultiTurnVerdict.from_dict(verdict) if isinstance(verdict, Mapping) else None
        episode.runs = runs_of(episode.trace, episode.mode)
        return episode


def call_record(call: ToolOutcome) -> dict[str, Any]:
    """A call that ran as an episode's record holds it (its output as the model saw it)."""
    return {"name": call.name, "args": call.args, "ok": call.ok, "output": call.output, "error": call.error}


def call_from_record(record: Mapping[str, Any]) -> ToolOutcome:
    args = record.get("args")
    return ToolOutcome(
        str(record.get("name") or ""),
        args if isinstance(args, (dict, str)) else {},
        bool(record.get("ok")),
        str(record.get("output") or ""),
        None if record.get("error") is None else str(record.get("error")),
    )


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


def _bfcl_verdict(x: Any) -> bool:
    return (
        isinstance(x, Mapping)
        and isinstance(x.get("valid"), bool)
        and _optional(lambda e: isinstance(e, str))(x.get("error_type"))
    )


# BFCL's single-turn scores: the fields its report reads (bench.bfcl.report.CategoryScore), one
# verdict per view (bench.bfcl.score.score_steps)
_BFCL_VIEW = (_bfcl_verdict, "an object whose 'valid' is true or false and 'error_type' a string or null")
_BFCL: dict[str, tuple[Callable[[Any], bool], str]] = {
    "first": _BFCL_VIEW,
    "feedback": _BFCL_VIEW,
    "agent": _BFCL_VIEW,
    "recovered": (_optional(lambda x: isinstance(x, bool)), "true or false"),
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
    if problem is not None:
        return problem
    for key, nested, required in (("multi_turn", _MULTI_TURN, ()), ("bfcl", _BFCL, ("first", "feedback", "agent"))):
        if key in record:
            inner = _problem(record[key], nested, required)
            if inner is not None:
                return f"in {key!r}, {inner}"
    return None


def meta_problem(meta: Any) -> str | None:
    """Why a run.json cannot be read, or None."""
    return _problem(meta, _META, ())
