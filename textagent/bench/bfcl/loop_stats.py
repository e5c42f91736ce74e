"""How the loop went in one multi-turn item, read from its steps (those of its live run, or read
back from its trace): replies that repeat a failed reply, and why a force-quit turn ended as it
did. Every committed run has its trace, so runs from before the loop's retries count the same
way as those after.

A reply *failed* when it could not be used (a format error), a call of it failed (an unknown tool,
bad arguments, a tool error or time-out), or its answer was sent back. A reply *repeats* a failed
one when, in the same question (a BFCL turn), an earlier failed reply had the same text (spacing
aside) or made the same calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...steps import Step

if TYPE_CHECKING:
    from ..records import Episode

__all__ = ["FORCE_QUIT_CAUSES", "LoopStats", "loop_stats"]

#: Why a force-quit turn ended: its last reply repeated a failed one; failed in another way; or
#: its calls ran and the model never answered.
FORCE_QUIT_CAUSES = ("repeating", "failing", "calling")


@dataclass(frozen=True)
class LoopStats:
    """``after_failure``: replies that came right after a failed reply; ``repeating``: those of them
    that repeat a failed reply of their question; ``force_quit``: the cause (FORCE_QUIT_CAUSES) of
    the item's force-quit turn, or None; ``rewound``: replies kept out of the conversation
    (textagent.retry's ``rewind``); ``after_error``: answers sent back because they came right
    after calls whose results reported an error (its ``errors``)."""

    after_failure: int = 0
    repeating: int = 0
    force_quit: str | None = None
    rewound: int = 0
    after_error: int = 0


def _failed(step: Step) -> bool:
    return step.format_error or step.call_failed or step.sent_back is not None


def _keys(step: Step) -> tuple[str, str | None]:
    text = " ".join(str(step.raw or "").split())
    calls = step.calls
    key = json.dumps([[c.name, c.args] for c in calls], sort_keys=True, default=str) if calls else None
    return text, key


def loop_stats(episode: Episode) -> LoopStats:
    """The loop's statistics of one multi-turn episode (see the module's docstring)."""
    after = repeating = rewound = after_error = 0
    last_repeated = last_failed = False
    for run in episode.runs:
        texts: set[str] = set()
        calls: set[str] = set()
        previous_failed = False
        for step in run.steps:
            text, key = _keys(step)
            rewound += step.rewound
            after_error += step.retry is not None and step.retry.after_error
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
    cause = None
    if episode.multi_turn is not None and episode.multi_turn.force_quit:
        cause = "repeating" if last_repeated else "failing" if last_failed else "calling"
    return LoopStats(after, repeating, cause, rewound, after_error)
