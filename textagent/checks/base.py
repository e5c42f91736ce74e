"""What a check is: an object the loop asks about each answer and each step.

A check may send a final answer back (``on_answer`` returns the text to send, or a SentBack),
and may add notes after a step's results (``on_step``). Checks keep no state of their own: what
they need to remember is in the run's steps (``Step.sent_back``, the outcomes), so one check
object can serve many runs, also at once. The Agent runs none unless given
(``Agent(checks=[...])``); each mode words what a check sends with its own prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..prompts import Prompts, Worked
from ..steps import Note, SentBack, Step
from ..tools import ToolSet

__all__ = ["Check", "RunView", "as_checks"]


@dataclass(frozen=True)
class RunView:
    """What a check may read of a run: the task, the steps so far (the one being checked last),
    the tools, the worked examples shown, and the mode's prompts."""

    task: str
    steps: Sequence[Step]
    tools: ToolSet
    examples: Sequence[Worked]
    prompts: Prompts

    def sent_back_by(self, check: str) -> list[Step]:
        """The steps whose answer the check named ``check`` sent back."""
        return [s for s in self.steps if s.sent_back is not None and s.sent_back.check == check]


class Check(Protocol):
    """``name`` is what traces and reports record. A check has either hook or both: the loop
    calls those it finds."""

    name: str

    def on_answer(self, run: RunView, answer: str) -> str | SentBack | None:
        """The text to send back instead of taking ``answer``, or None to take it."""

    def on_step(self, run: RunView, step: Step) -> Sequence[Note]:
        """Notes to add after the results of ``step`` (its outcomes are in)."""


def as_checks(objects: Sequence[Any]) -> list[Check]:
    """The objects as checks; TypeError for one without a ``name`` or without either hook."""
    for check in objects:
        if not isinstance(getattr(check, "name", None), str) or not (
            callable(getattr(check, "on_answer", None)) or callable(getattr(check, "on_step", None))
        ):
            raise TypeError(
                f"checks must be objects with a name and on_answer() and/or on_step() "
                f"(textagent.checks), not {check!r:.60}"
            )
    return list(objects)
