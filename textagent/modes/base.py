"""What a mode is: how the model is asked, how its reply is read, how the conversation is written.

The loop (textagent/agent.py) is the same in every mode; a mode object supplies the pieces that
differ. A mode sees a narrow context (the tools, the backend and its options, the chat format,
the system prompt and the mode's prompts), never the Agent, and owns the conversation it writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..backends.base import Backend, Completion
from ..prompts import Prompts, Worked
from ..protocol import ParseError, Reply, ToolCall
from ..steps import Note, Step
from ..templates import ChatFormat
from ..tools import ToolOutcome, ToolSet

__all__ = ["Conversation", "FormatError", "Mode", "ModeContext", "Needs", "RunsTools", "complete", "needs_of"]


@dataclass(frozen=True)
class Needs:
    """What a mode needs of its backend; callers ask this (``mode.needs``), never the mode's name.

    ``chat``: the conversation goes to a chat endpoint (/v1/chat/completions) as messages;
    ``grammar``: the server holds the reply to a GBNF grammar; ``tools``: the server's own
    function calling (``tools`` in the request, ``tool_calls`` back)."""

    chat: bool = False
    grammar: bool = False
    tools: bool = False


def needs_of(mode: Any) -> Needs:
    """A mode object's ``needs`` (a mode without the attribute needs nothing special)."""
    needs = getattr(mode, "needs", None)
    return needs if isinstance(needs, Needs) else Needs()


class FormatError(Exception):
    """The reply could not be used; carries the observation that tells the model why."""

    def __init__(self, observation: str, parse_error: ParseError | None = None):
        super().__init__(observation)
        self.observation, self.parse_error = observation, parse_error


@dataclass(frozen=True)
class ModeContext:
    """What a mode works with. ``system_prompt`` None: the mode writes its own. ``options`` are
    the request options passed through to the backend (temperature, seed, stream, id_slot, ...)."""

    backend: Backend
    tools: ToolSet
    format: ChatFormat
    options: Mapping[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    strict: bool = False
    observation_limit: int | None = 4000


@dataclass
class Conversation:
    """The conversation a mode writes: chat messages, and for the text modes the same as one
    prompt string that is only ever appended to."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str = ""
    fixed: int = 0  # the characters of ``prompt`` before the first question: the same for every question

    def copy(self) -> Conversation:
        """A copy that later writes to this one leave as it is (Agent.undo keeps one)."""
        return Conversation([dict(m) for m in self.messages], self.prompt, self.fixed)


def fixed_part(format: Any, messages: list[dict[str, Any]]) -> int:
    """The characters of ``format.render(messages)`` before the text of the last message (the
    question): the part every question of the conversation shares, which a prefix cache keeps
    across runs (backends/prefix_cache.py)."""
    prompt = format.render(messages)
    blank = format.render([*messages[:-1], {**messages[-1], "content": ""}])
    return len(os.path.commonprefix([prompt, blank]))  # noqa: RUF071 - characters, on purpose


def complete(
    ctx: ModeContext,
    conversation: Conversation,
    *,
    stop: Sequence[str],
    max_tokens: int,
    lead: str = "",
    **options: Any,
) -> Completion:
    """The request of every mode that sends the conversation as one prompt (text, constrained,
    the proxy's relay, BFCL's Prompt mode), with the request ``options`` the mode gives; the
    conversation's fixed part is marked so that a llama.cpp prefix cache restores it instead of
    evaluating it (backends/prefix_cache.py). ``lead``: the reply's beginning, written for the
    model after the prompt (a retry's odds); the model goes on from it."""
    if conversation.fixed:
        options["cache_prefix"] = conversation.fixed
    return ctx.backend.complete(conversation.prompt + lead, stop=list(stop), max_tokens=max_tokens, **options)


@runtime_checkable
class Mode(Protocol):
    """How the model is asked and its reply read and written down: the pieces of the loop that
    differ between modes. ``name`` is what traces record; ``prompts`` the mode's model-facing
    text (checks word what they send back with it); ``needs`` (a Needs, optional) what it asks
    of the backend. A mode that also runs the calls is a :class:`RunsTools`; one that does not
    (the proxy's: its client runs them) hands a reply with calls on, and the run ends
    ``submitted``."""

    name: str
    prompts: Prompts
    conversation: Conversation

    def setup(self, ctx: ModeContext) -> None:
        """Called once by Agent(); raises ModeNotSupported when the backend cannot run the mode."""

    def start(self, task: str, examples: Sequence[Worked]) -> None:
        """Begin a run: the conversation up to the task, with these worked examples."""

    def follow(self, task: str, added: Sequence[Any]) -> None:
        """Continue the conversation with a follow-up question; ``added``: the tools added since
        the last question (set_tools has given the mode the whole set already)."""

    def set_tools(self, tools: ToolSet) -> None:
        """The tool set changed (Agent.add_tools): read and check calls against ``tools`` from now on."""

    def query(self, step: Step, max_tokens: int) -> Completion:
        """Ask the model for the next reply (may note facts in ``step.facts``)."""

    def parse(self, completion: Completion, step: Step) -> Reply:
        """The reply's calls or answer; raises FormatError when it cannot be used."""

    def reject(self, step: Step, feedback: str) -> None:
        """Append an unusable reply (or an answer sent back) and the feedback that says why."""

    def answer(self, step: Step) -> None:
        """Append the last reply of the run, an answer or (a mode that runs no tools) calls
        handed on; the turn stays open: nothing follows it."""

    def transcript(self) -> str:
        """The whole conversation as text (Result.transcript)."""


@runtime_checkable
class RunsTools(Protocol):
    """A mode that runs the calls of a reply itself and writes their results."""

    def execute(self, step: Step, index: int, call: ToolCall, timeout: float | None) -> ToolOutcome:
        """Run call number ``index`` of the reply."""

    def observe(self, step: Step, notes: Sequence[Note]) -> None:
        """Append the reply, the results of ``step.outcomes`` and the notes; sets ``step.observations``."""
