"""RepeatedCalls: a note on a call the model already made.

Small models loop on a call; saying so breaks most loops.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from ..prompts import listed
from ..steps import Note, Step
from .base import RunView

__all__ = ["RepeatedCalls"]


class RepeatedCalls:
    """Add a note to the result of a call made before in the run: with the same result, or
    successfully before (whatever it returns now). A call that failed and then gets another
    result is not a repeat (an error that says "retry"). A failing call repeated names the
    other tools: small models loop on a call that needs a value another tool gives."""

    name = "repeats"

    def on_step(self, run: RunView, step: Step) -> Sequence[Note]:
        seen: set[tuple[str, str, str]] = set()   # (tool, args, output) of the run's calls
        done: set[tuple[str, str]] = set()        # (tool, args) of its successful calls
        notes: list[Note] = []
        for s in run.steps:
            for i, o in enumerate(s.outcomes):
                call = (o.name, json.dumps(o.args, sort_keys=True, default=str))
                same = (*call, o.output) in seen
                if s is step and (same or (o.ok and call in done)):
                    notes.append(Note(self.name, self._text(o, run, same), i))
                seen.add((*call, o.output))
                if o.ok:
                    done.add(call)
        return notes

    @staticmethod
    def _text(outcome, run: RunView, same: bool) -> str:
        if outcome.ok:
            return run.prompts.render("repeated_call" if same else "repeated_call_again")
        others = [name for name in run.tools if name != outcome.name]
        if not others:
            return run.prompts.render("repeated_error_alone")
        return run.prompts.render("repeated_error", others=listed(others, "or"))
