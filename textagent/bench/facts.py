"""The facts of one episode, read from its run, and the failure taxonomy that labels a failed one.

An episode's counts are those of its run (textagent.steps.Result): the live one, or the one read
back from the record's trace; each is defined once, on Step and Result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..backends.base import Usage
from ..steps import Result, Step

if TYPE_CHECKING:
    from ..tools import ToolOutcome
    from .checking import CheckResult

__all__ = ["FAILURES", "FAILURE_TITLES", "Classified", "EpisodeFacts", "classify", "facts_of", "looped"]

# Failure classes, in the order they are tried (the first that applies labels the episode).
FAILURES = (
    "backend_error",
    "call_not_needed",
    "hallucinated_observation",
    "loop",
    "unparseable",
    "budget",
    "no_call",
    "wrong_tool",
    "invalid_args",
    "wrong_answer",
)
FAILURE_TITLES = {
    "backend_error": "backend error (server failed)",
    "call_not_needed": "call where none was needed",
    "hallucinated_observation": "hallucinated observation",
    "loop": "loop (same call repeated)",
    "unparseable": "unparseable reply",
    "budget": "budget hit (steps/tokens/time)",
    "no_call": "no call where one was needed",
    "wrong_tool": "wrong tool",
    "invalid_args": "invalid args",
    "wrong_answer": "wrong final answer",
}


def _canon(args: Any) -> str:
    try:
        return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(args)


def looped(steps: Sequence[Step]) -> bool:
    """The same call made again after it succeeded, or three times whatever its results."""
    seen_ok: set[tuple[str, str]] = set()
    counts: dict[tuple[str, str], int] = {}
    for step in steps:
        keys = [(str(o.name), _canon(o.args)) for o in step.outcomes]
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
            if key in seen_ok or counts[key] >= 3:
                return True
        seen_ok.update(key for key, o in zip(keys, step.outcomes) if o.ok)
    return False


@dataclass(frozen=True)
class EpisodeFacts:
    """The counts of an episode, read from its run (a Result): each defined once, on Step and
    Result (textagent.steps). ``first_prompt``/``first_evaluated``: step 1's prompt tokens sent
    and evaluated (the rest was cached); ``sent_back``/``check_notes``: answers checks sent back
    and notes they added (textagent.checks)."""

    steps: int = 0
    first_prompt: int | None = None
    first_evaluated: int | None = None
    format_errors: int = 0
    first_step_format_error: bool = False
    recovered: bool = False
    native_decode_failures: int = 0
    unrescued_decode_failures: int = 0
    tool_errors: int = 0
    sent_back: int = 0
    check_notes: int = 0
    loop: bool = False
    hallucinated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def facts_of(result: Result) -> EpisodeFacts:
    """The counts of a run (see :class:`EpisodeFacts`)."""
    first_usage = result.steps[0].usage if result.steps else Usage()
    return EpisodeFacts(
        steps=len(result.steps),
        first_prompt=first_usage.prompt_tokens,
        first_evaluated=first_usage.prompt_evaluated,
        format_errors=result.format_errors,
        first_step_format_error=result.first_step_format_error,
        recovered=result.recovered,
        native_decode_failures=result.decode_failures,
        unrescued_decode_failures=result.unrescued_decode_failures,
        tool_errors=result.tool_errors,
        sent_back=result.sent_back(),
        check_notes=result.check_notes,
        loop=looped(result.steps),
        hallucinated=result.hallucinated,
    )


class Classified(Protocol):
    """What :func:`classify` reads of an episode (bench.records.Episode, which holds more)."""

    @property
    def success(self) -> bool: ...
    @property
    def facts(self) -> EpisodeFacts: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def attempted(self) -> list[str]: ...
    @property
    def checks(self) -> list[CheckResult]: ...
    @property
    def calls(self) -> list[ToolOutcome]: ...
    @property
    def call_specs(self) -> list[Any]: ...
    @property
    def needs_tools(self) -> bool: ...
    @property
    def needs_no_tool(self) -> bool: ...


def classify(episode: Classified) -> str | None:
    """The failure class of an episode (one of FAILURES), or None when it succeeded."""
    if episode.success:
        return None
    facts = episode.facts
    stop = episode.stop_reason
    attempted = episode.attempted or []
    checks = {c.type: c for c in episode.checks if not c.ok}
    if stop in ("backend_error", "error"):
        return "backend_error"
    if episode.needs_no_tool and attempted:
        return "call_not_needed"
    if facts.hallucinated:
        return "hallucinated_observation"
    if facts.loop or stop == "repeated":  # "repeated": ended by --max-repeats
        return "loop"
    if (
        stop == "format_errors"
        or facts.unrescued_decode_failures
        or (facts.steps and facts.format_errors == facts.steps)
    ):
        return "unparseable"
    if stop in ("max_steps", "token_budget", "time_limit"):
        return "budget"
    if episode.needs_tools and not attempted:
        return "no_call"
    if "not_called" in checks:
        return "wrong_tool"
    if "calls" in checks:
        from .checking import diagnose_calls

        return diagnose_calls(episode.call_specs or [], episode.calls or []) or "invalid_args"
    return "wrong_answer"
