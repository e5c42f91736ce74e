"""What a mode is: how the agent asks the model, reads its reply and writes the conversation.

The loop (textagent/agent.py) is the same in every mode; a mode object supplies the pieces that
differ. Modes keep the conversation on the agent (``agent.messages``, and ``agent.prompt`` in
the text modes) so that an Agent can be inspected the same way whatever its mode.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..backends.base import Completion
from ..protocol import ParseError, Reply, ToolCall
from ..tools import ToolOutcome

if TYPE_CHECKING:
    from ..agent import Agent, Step

__all__ = ["Mode", "FormatError"]


class FormatError(Exception):
    """The reply could not be used; carries the observation that tells the model why."""

    def __init__(self, observation: str, parse_error: ParseError | None = None):
        super().__init__(observation)
        self.observation, self.parse_error = observation, parse_error


@runtime_checkable
class Mode(Protocol):
    """The pieces of the loop that differ between modes. ``name`` is what traces record."""

    name: str

    def setup(self, agent: "Agent") -> None:
        """Called once by Agent(); raises ModeNotSupported when the backend cannot run the mode."""

    def start(self, agent: "Agent", task: str) -> None:
        """Begin a run: the conversation up to the task."""

    def query(self, agent: "Agent", step: "Step", max_tokens: int) -> Completion:
        """Ask the model for the next reply (may note facts in ``step.details``)."""

    def parse(self, agent: "Agent", completion: Completion, step: "Step") -> Reply:
        """The reply's calls or answer; raises FormatError when it cannot be used."""

    def execute(self, agent: "Agent", step: "Step", call: ToolCall) -> ToolOutcome:
        """Run one call of the reply."""

    def observe(self, agent: "Agent", step: "Step") -> None:
        """Append the reply and the results of ``step.outcomes``; sets ``step.observations``."""

    def reject(self, agent: "Agent", step: "Step", feedback: str) -> None:
        """Append an unusable reply and the feedback that says why."""

    def answer(self, agent: "Agent", step: "Step") -> None:
        """Append the final reply (the turn stays open: nothing follows it)."""

    def transcript(self, agent: "Agent") -> str:
        """The whole conversation as text (Result.transcript)."""
