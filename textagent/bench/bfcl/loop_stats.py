"""How the loop went in one multi-turn item, read from its trace: replies that repeat a failed
reply, and why a force-quit turn ended as it did. Read from the trace alone (every committed run
has one), so runs from before the loop's retries count the same way as those after.

A reply *failed* when it could not be used (a format error), a call of it failed (an unknown tool,
bad arguments, a tool error or time-out), or its answer was sent back. A reply *repeats* a failed
one when, in the same question (a BFCL turn), an earlier failed reply had the same text (spacing
aside) or made the same calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FORCE_QUIT_CAUSES", "LoopStats", "loop_stats"]

#: Why a force-quit turn ended: its last reply repeated a failed one; failed in another way; or
#: its calls ran and the model never answered.
FORCE_QUIT_CAUSES = ("repeating", "failing", "calling")


@dataclass(frozen=True)
class LoopStats:
    """``after_failure``: replies that came right after a failed reply; ``repeating``: those of them
    that repeat a failed reply of their question; ``force_quit``: the cause (FORCE_QUIT_CAUSES) of
    the item's force-quit turn, or None."""

    after_failure: int = 0
    repeating: int = 0
    force_quit: str | None = None


def _failed(step: Mapping[str, Any]) -> bool:
    details = step.get("details")
    details = details if isinstance(details, Mapping) else {}
    outcomes = [o for o in step.get("outcomes") or () if isinstance(o, Mapping)]
    return bool(step.get("format_error")) or any(not o.get("ok") for o in outcomes) or "sent_back" in details


def _keys(step: Mapping[str, Any]) -> tuple[str, str | None]:
    text = " ".join(str(step.get("raw") or "").split())
    calls = [c for c in step.get("calls") or () if isinstance(c, Mapping)]
    key = json.dumps([[c.get("name"), c.get("args")] for c in calls], sort_keys=True, default=str) if calls else None
    return text, key


def _questions(trace: Any) -> Iterator[list[Mapping[str, Any]]]:
    """The steps of each question (a ``start`` record opens one)."""
    steps: list[Mapping[str, Any]] = []
    for event in trace or ():
        if not isinstance(event, Mapping):
            continue
        if event.get("type") == "start":
            if steps:
                yield steps
            steps = []
        elif event.get("type") == "step":
            steps.append(event)
    if steps:
        yield steps


def loop_stats(record: Mapping[str, Any]) -> LoopStats:
    """The loop's statistics of one multi-turn record (see the module's docstring)."""
    after = repeating = 0
    last_repeated = last_failed = False
    for steps in _questions(record.get("trace")):
        texts: set[str] = set()
        calls: set[str] = set()
        previous_failed = False
        for step in steps:
            text, key = _keys(step)
            repeated = text in texts or (key is not None and key in calls)
            if previous_failed:
                after += 1
                repeating += repeated
            failed = _failed(step)
            if failed:
                texts.add(text)
                if key is not None:
                    calls.add(key)
            previous_failed = failed
            last_repeated, last_failed = repeated and failed, failed
    mt = record.get("multi_turn")
    mt = mt if isinstance(mt, Mapping) else {}
    cause = None
    if mt.get("force_quit"):
        cause = "repeating" if last_repeated else "failing" if last_failed else "calling"
    return LoopStats(after, repeating, cause)
