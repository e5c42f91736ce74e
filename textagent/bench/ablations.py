"""The feedback ablations: text mode with nothing sent back after a reply that goes wrong, the
run (a multi-turn item: the turn) ended there, as BFCL ends a turn at a reply it cannot decode.

``text-no-feedback`` ends it at a reply that does not parse (``max_format_errors=1``);
``text-first-failure`` also at a reply with a call that failed (``max_call_errors=1``: an unknown
tool, arguments the schema refuses, a tool that raised or timed out). Set against text mode on
the same items, they measure what the loop's feedback and retries earn.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import prompts
from ..modes import TextMode
from ..modes.text import kept_text
from ..steps import Note, Step

__all__ = ["FIRST_FAILURE_OPTIONS", "NO_FEEDBACK_OPTIONS", "FirstFailureTextMode", "NoFeedbackTextMode"]

#: the Agent options each ablation runs under (the bench's mode table fixes them)
NO_FEEDBACK_OPTIONS = {"max_format_errors": 1}
FIRST_FAILURE_OPTIONS = {"max_format_errors": 1, "max_call_errors": 1}


class NoFeedbackTextMode(TextMode):
    """``text-no-feedback``: text mode whose reply that does not parse ends the run and is
    answered with nothing; a later question of the conversation does not see feedback either."""

    name = "text-no-feedback"

    def reject(self, step: Step, feedback: str) -> None:
        self._append(step, step.raw, None)


class FirstFailureTextMode(NoFeedbackTextMode):
    """``text-first-failure``: as ``text-no-feedback``, and a reply with a call that failed ends
    the run too; the calls of that reply that ran get their results, a failed one nothing (no
    error, no feedback), so a later question of the conversation sees none either."""

    name = "text-first-failure"

    def observe(self, step: Step, notes: Sequence[Note]) -> None:
        if not step.call_failed:
            super().observe(step, notes)
            return
        ran = [prompts.observation(o.name, o.output) for o in step.outcomes if o.ok]
        self._append(step, kept_text(step), ran or None)
