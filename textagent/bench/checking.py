"""The checkers of the bench's tasks: what an episode produced (:class:`Outcome`) against a
task's checks (the table of check types is in bench.tasks), and why required calls are missing
(:func:`diagnose_calls`, for the failure taxonomy). No model needed."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol.words import answer_content
from ..tools import ToolOutcome
from .numbers import find_numbers
from .tasks import Task

__all__ = ["CheckResult", "Outcome", "call_specs", "check_task", "diagnose_calls", "numbers_in", "run_check"]


@dataclass
class Outcome:
    """What an episode produced, as far as the checkers care."""

    answer: str | None
    answered: bool  # the run ended with a final answer
    calls: list[ToolOutcome]  # the calls that ran
    attempted: list[str] = field(default_factory=list)  # names of every call the model wrote (parsed)
    state: dict[str, Any] = field(default_factory=dict)  # Env.state()


@dataclass(frozen=True)
class CheckResult:
    type: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "ok": self.ok, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        return cls(str(data.get("type") or ""), bool(data.get("ok")), str(data.get("detail") or ""))


def numbers_in(text: str | None) -> list[float]:
    """Numbers written in text: 1,234.5 / -2 / 87.8°F / $875.00 / 1e3 is read as 1 and 3."""
    return [number.value for number in find_numbers(text)]


def _norm(text: Any) -> str:
    return " ".join(str(text).lower().split())


def _close(a: float, b: float, tol: float, rel: float) -> bool:
    return math.isclose(a, b, abs_tol=tol, rel_tol=rel)


def _value_matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, Mapping) and "any" in expected:
        return any(_value_matches(e, actual) for e in expected["any"])
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual or (isinstance(expected, bool) and isinstance(actual, bool) and expected == actual)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return _close(float(expected), float(actual), 1e-6, 1e-9)
    if isinstance(expected, str) and isinstance(actual, str):
        return _norm(expected) == _norm(actual)
    return expected == actual


def _spec_matches(spec: Mapping[str, Any], call: ToolOutcome) -> bool:
    names = spec.get("any_of") or [spec.get("name")]
    if call.name not in names or not call.ok:
        return False
    args: Mapping[str, Any] = call.args if isinstance(call.args, Mapping) else {}
    for key, expected in (spec.get("args") or {}).items():
        if key not in args or not _value_matches(expected, args[key]):
            return False
    needle = spec.get("output_contains")
    return not (needle is not None and _norm(needle) not in _norm(call.output))


def _match_calls(specs: Sequence[Mapping[str, Any]], calls: Sequence[ToolOutcome]) -> list[int] | None:
    """A distinct call index per spec (backtracking; suites are small), or None."""

    def search(i: int, used: frozenset[int]) -> list[int] | None:
        if i == len(specs):
            return []
        for j, call in enumerate(calls):
            if j not in used and _spec_matches(specs[i], call):
                rest = search(i + 1, used | {j})
                if rest is not None:
                    return [j, *rest]
        return None

    return search(0, frozenset())


def _describe_spec(spec: Mapping[str, Any]) -> str:
    name = spec.get("name") or "|".join(spec.get("any_of", []))
    args = json.dumps(spec.get("args", {}), ensure_ascii=False) if spec.get("args") else ""
    return f"{name}({args})" if args else name


def run_check(check: Mapping[str, Any], out: Outcome) -> CheckResult:
    kind = check["type"]
    answer = out.answer or ""
    text = _norm(answer)
    if kind == "answered":
        ok = out.answered and bool(answer.strip())
        return CheckResult(kind, ok, "" if ok else "no final answer")
    if kind == "exact":
        strip = " \t\n\"'`.!,;:*"
        got = _norm(answer_content(answer)).strip(strip)
        want = _norm(check["value"]).strip(strip)
        return CheckResult(kind, got == want, f"expected {want!r}, got {got[:80]!r}")
    if kind == "numeric":
        wanted = check.get("values") or ([check["value"]] if "value" in check else [])
        tol, rel = float(check.get("tol", 1e-6)), float(check.get("rel", 0.0))
        found = numbers_in(answer)
        missing = [w for w in wanted if not any(_close(float(w), f, tol, rel) for f in found)]
        problems = [f"missing {missing} in numbers {found[:8]}"] if missing else []
        if "only" in check:
            allowed = [float(v) for v in check["only"]]
            stray = [f for f in found if not any(_close(a, f, tol, rel) for a in allowed)]
            problems += [f"numbers {stray[:8]} are none of {check['only']}"] if stray else []
        return CheckResult(kind, not problems, "; ".join(problems))
    if kind == "contains":
        need_all = list(check.get("all", [])) + ([check["value"]] if "value" in check else [])
        need_any = list(check.get("any", []))
        banned = list(check.get("none", []))
        problems = [f"missing {s!r}" for s in need_all if _norm(s) not in text]
        if need_any and not any(_norm(s) in text for s in need_any):
            problems.append(f"none of {need_any}")
        problems += [f"has {s!r}" for s in banned if _norm(s) in text]
        return CheckResult(kind, not problems, "; ".join(problems))
    if kind == "regex":
        ok = re.search(check["pattern"], answer, re.I | re.S) is not None
        return CheckResult(kind, ok, "" if ok else f"no match for /{check['pattern']}/")
    if kind == "calls":
        matched = _match_calls(check["calls"], out.calls)
        if matched is not None:
            return CheckResult(kind, True)
        missing = [_describe_spec(s) for s in check["calls"] if not any(_spec_matches(s, c) for c in out.calls)]
        return CheckResult(kind, False, "missing successful call(s): " + (", ".join(missing) or "distinct calls"))
    if kind == "no_calls":
        ok = not out.attempted
        return CheckResult(kind, ok, "" if ok else f"called {', '.join(out.attempted)}")
    if kind == "not_called":
        bad = [n for n in out.attempted if n in set(check["tools"])]
        return CheckResult(kind, not bad, "" if not bad else f"called {', '.join(bad)}")
    if kind == "state":
        lights = out.state.get("lights", {})
        wrong = [
            f"{room} is {'on' if lights.get(room) else 'off'}"
            for room, want in check["lights"].items()
            if bool(lights.get(room)) != bool(want)
        ]
        return CheckResult(kind, not wrong, "; ".join(wrong))
    raise ValueError(f"unknown check type {kind!r}")


def call_specs(task: Task) -> list[dict[str, Any]]:
    """Every call spec of the task's ``calls`` checks, in order."""
    return [dict(spec) for c in task.checks if c["type"] == "calls" for spec in c["calls"]]


def diagnose_calls(specs: Sequence[Mapping[str, Any]], calls: Sequence[ToolOutcome]) -> str | None:
    """Why required calls are missing: None (all matched), "invalid_args" (the tool was tried
    but with wrong or rejected arguments), "wrong_tool" (another tool was used instead) or
    "no_call" (it was never tried). Judged on the first spec left unmatched by a maximum
    matching of specs to distinct calls."""
    owner: dict[int, int] = {}  # call index -> spec index

    def assign(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(calls):
            if j in seen or not _spec_matches(specs[i], call):
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(specs)):  # Kuhn's augmenting paths: a maximum matching
        assign(i, set())
    matched = set(owner.values())
    unmatched = [i for i in range(len(specs)) if i not in matched]
    if not unmatched:
        return None
    required = {n for s in specs for n in (s.get("any_of") or [s.get("name")])}
    unused = [c for j, c in enumerate(calls) if j not in owner]
    spec = specs[unmatched[0]]
    names = set(spec.get("any_of") or [spec.get("name")])
    tried = [c for c in unused if c.name in names]
    if any(c.ok or c.error == "bad_arguments" for c in tried):
        return "invalid_args"
    if any(c.name not in required for c in unused):
        return "wrong_tool"
    return "no_call"


def check_task(task: Task, out: Outcome) -> tuple[bool, list[CheckResult]]:
    """(success, each check's result). Success needs a final answer and every check passing."""
    results = [run_check(c, out) for c in task.checks]
    return out.answered and all(r.ok for r in results), results
