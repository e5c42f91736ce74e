"""``baseline``: the seeds' own loop, as a mode of the one Agent loop, for comparison.

The same prompt and transcript as text mode; the reply is read the seeds' way: the regex
``TOOL: (\\w+) ARGS: (.*)`` + ``json.loads``, the first match only (one call per reply), no
feedback. A reply without a match is the answer (after ``ANSWER:`` if present); arguments
that are not JSON make the reply unusable, and the bench runs the mode with
``max_format_errors=1``, so that ends the run (``format_errors``) as it ended the seeds'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from .. import prompts
from ..backends.base import Completion
from ..modes import FormatError, TextMode
from ..protocol import Reply, ToolCall
from ..steps import Note, Step
from ..tools import ToolOutcome

__all__ = ["AGENT_OPTIONS", "SEED_CALL", "BaselineMode"]

# The seed loops' regex: the first TOOL line, its arguments read with json.loads.
SEED_CALL = re.compile(r"TOOL: (\w+) ARGS: (.*)")
_SEED_ANSWER = re.compile(r"^\s*(?:FINAL\s+)?ANSWER\s*:\s*", re.I | re.M)

#: The Agent settings under which the bench's comparison modes run as the seeds' loop did: the
#: first unusable reply ends the run, no cap on calls or on a step's results, no checks.
AGENT_OPTIONS = {"max_format_errors": 1, "max_calls_per_reply": None, "step_observation_limit": None, "checks": ()}


class BaselineMode(TextMode):
    """Text mode's prompt, read with the seeds' regex; no feedback."""

    name = "baseline"

    def parse(self, completion: Completion, step: Step) -> Reply:
        match = SEED_CALL.search(completion.text)
        if match is None:
            return Reply(calls=[], answer=_SEED_ANSWER.split(completion.text, maxsplit=1)[-1].strip(), thought="")
        try:
            args = json.loads(match.group(2))
        except ValueError:
            raise FormatError("") from None  # no feedback: the seeds had none
        return Reply(
            calls=[ToolCall(match.group(1), args if isinstance(args, dict) else json.dumps(args))],
            answer=None,
            thought="",
        )

    def execute(self, step: Step, index: int, call: ToolCall, timeout: float | None) -> ToolOutcome:
        if isinstance(call.args, dict):
            return super().execute(step, index, call, timeout)
        # the seeds called fn(**args): anything but an object fails
        kind = type(json.loads(call.args)).__name__
        return ToolOutcome(
            call.name,
            call.args,
            False,
            f"ERROR: TypeError: arguments must be a JSON object, got {kind}",
            "bad_arguments",
        )

    def observe(self, step: Step, notes: Sequence[Note]) -> None:
        self._append(step, step.raw, [prompts.observation(o.name, o.output) for o in step.outcomes])

    def reject(self, step: Step, feedback: str) -> None:
        self._append(step, step.raw, None)  # the run ends here; nothing is sent back
