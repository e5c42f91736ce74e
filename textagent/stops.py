"""What ends a run: one exception per reason, the class is the reason (as mini-swe-agent's).

The Agent raises them for its limits and its answer; a mode raises :class:`Submitted` when a
usable reply goes to someone else who runs its calls (the proxy's client). ``Agent.run`` catches
:class:`Stop` and records ``type(stop).reason`` as the run's stop reason. A reply that cannot be
used is no stop: it is a ``modes.FormatError``, and the loop goes on until
:class:`FormatErrors` ends it.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "Answered",
    "CallErrors",
    "FormatErrors",
    "MaxSteps",
    "Repeated",
    "Stop",
    "Submitted",
    "TimeLimit",
    "TokenBudget",
]


class Stop(Exception):
    """Ends the run. ``reason`` (of the class) is the run's stop reason (steps.STOP_REASONS)."""

    reason: ClassVar[str]

    def __init__(self) -> None:
        super().__init__(self.reason)


class Answered(Stop):
    """The model gave its final answer, ``text``."""

    reason = "answer"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Submitted(Stop):
    """A usable reply went to someone who runs its calls (a mode that runs no tools: the proxy's)."""

    reason = "submitted"


class MaxSteps(Stop):
    reason = "max_steps"


class TokenBudget(Stop):
    reason = "token_budget"


class TimeLimit(Stop):
    reason = "time_limit"


class FormatErrors(Stop):
    """``max_format_errors`` unusable replies in a row (the proxy: its repairs are spent)."""

    reason = "format_errors"


class Repeated(Stop):
    """``max_repeats`` replies in a row made the same calls."""

    reason = "repeated"


class CallErrors(Stop):
    """``max_call_errors`` replies in a row with a call that failed (unknown tool, arguments its
    schema refuses, a tool that raised or timed out)."""

    reason = "call_errors"
