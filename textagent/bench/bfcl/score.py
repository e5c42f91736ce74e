"""Score an episode on a BFCL item in three views.

- **first reply** (BFCL's own view): the calls of the model's first reply; a reply that did not
  parse is ``unparseable``. This is the number comparable with the leaderboard.
- **with feedback**: the calls of the first reply that parsed *and whose calls the tools took*
  (a known tool, arguments that pass its schema), which may come after textagent's feedback on
  a format error or on a call's arguments; when no reply got that far, the first that parsed.
  An item right here but not in the first view is *recovered*.
- **agent**: every call made before the final answer (or the end of the run), the tools returning
  a neutral result; an agent may spread the calls of a parallel question over several steps.
  A call repeated word for word counts once; a call its tool refused (unknown tool, arguments
  outside the schema) was not made.

On the irrelevance categories a reply that did not parse is no call, so it is right, as BFCL
scores a reply it cannot decode there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import BfclScores
from .checker import Verdict, check_calls
from .data import BfclItem, language_of

__all__ = ["VIEWS", "score_steps", "step_calls"]

VIEWS = ("first", "feedback", "agent")

Call = tuple[str, dict[str, Any]]


def _usable(step: Any) -> bool:
    """The reply could be read: parsed (text modes), or decoded (bfcl-prompt)."""
    if step.reply is None:
        return False
    decoded = (step.details or {}).get("bfcl_decode")
    return decoded is None or decoded in ("ok", "no_calls")


# outcomes the tool set answers without running the tool: the call itself was wrong
_REFUSED = ("unknown_tool", "bad_arguments")


def _accepted(step: Any) -> bool:
    """The reply was read and every call it made was taken by its tool."""
    return _usable(step) and not any(o.error in _REFUSED for o in step.outcomes)


def step_calls(step: Any, names: Mapping[str, str] | None = None) -> list[Call] | None:
    """The calls of one step, named as BFCL writes them, with the arguments the tool was given
    (bound and validated) where it ran them, else as the model wrote them; None when the
    reply could not be read."""
    if not _usable(step):
        return None
    names = names or {}
    calls = list(step.reply.calls)
    outcomes = list(step.outcomes)
    out: list[Call] = []
    for i, call in enumerate(calls):
        args: Any = call.args
        if i < len(outcomes) and outcomes[i].name == call.name and isinstance(outcomes[i].args, dict):
            args = outcomes[i].args
        if isinstance(args, str):  # a bare argument no parameter took
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        out.append((names.get(call.name, call.name), dict(args) if isinstance(args, Mapping) else {}))
    return out


def _verdict(item: BfclItem, calls: list[Call] | None) -> Verdict:
    if calls is None:
        if "irrelevance" in item.category:
            return Verdict(True, None, "the reply could not be read: no call")
        return Verdict(False, "unparseable", "the reply could not be read as calls")
    return check_calls(
        item.category,
        list(item.functions),
        list(item.ground_truth or []) or None,
        calls,
        language=language_of(item.category),
    )


def _canon(call: Call) -> str:
    return json.dumps([call[0], call[1]], sort_keys=True, default=str)


def score_steps(item: BfclItem, steps: Sequence[Any], names: Mapping[str, str] | None = None) -> BfclScores:
    """BFCL's verdicts on an episode's steps, one per view (the first reply, after feedback, the agent's calls)."""
    per_step = [step_calls(s, names) for s in steps]
    first = _verdict(item, per_step[0]) if per_step else Verdict(False, "unparseable", "no reply")
    taken = next((c for s, c in zip(steps, per_step) if _accepted(s)), None)
    usable = next((c for c in per_step if c is not None), None)
    feedback = (
        _verdict(item, taken)
        if taken is not None
        else (first if not per_step or per_step[0] is not None else _verdict(item, usable))
    )
    seen: set[str] = set()
    made: list[Call] = []
    for step, calls in zip(steps, per_step):
        refused = {i for i, o in enumerate(step.outcomes) if o.error in _REFUSED}
        for i, call in enumerate(calls or []):
            if i not in refused and _canon(call) not in seen:
                seen.add(_canon(call))
                made.append(call)
    agent = _verdict(item, made if any(c is not None for c in per_step) else None)
    return BfclScores(first, feedback, agent, recovered=feedback.valid and not first.valid)
