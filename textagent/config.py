"""The Agent's configuration: its limits, worked examples, checks and retries, one frozen value.

A config is made once and shared: the bench builds one per run, the proxy one per request, and
``Agent(..., max_steps=5)`` is a convenience for ``Agent(..., config=AgentConfig(max_steps=5))``.
It holds no state of a conversation or a question (those are the Agent's and its run's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from . import prompts
from .checks import Check, as_checks
from .retry import Retry
from .templates import CHATML, ChatFormat, get_format

__all__ = ["AgentConfig"]


@dataclass(frozen=True)
class AgentConfig:
    """How the Agent runs a question (reference: docs/agent.md).

    Limits: ``max_steps`` replies; ``max_tokens`` tokens spent in the run (prompt tokens
    evaluated plus completion); ``max_seconds``; ``max_format_errors`` unusable replies in a
    row; ``max_repeats`` (opt-in, None by default) replies in a row with the same calls;
    ``max_call_errors`` (opt-in, None by default) replies in a row with a call that failed;
    ``reply_tokens`` one reply; ``max_calls_per_reply``; ``observation_limit`` one result,
    ``step_observation_limit`` the results of one step; ``tool_timeout`` one call.

    The conversation: ``chat_format`` (a name or a templates.ChatFormat); ``system_prompt`` (None:
    the mode's own, listing the tools); ``strict`` (calls must match their schema exactly, no
    coercion). ``example``: "auto", an Example, a sequence of them, or None; ``example_style``:
    how the exchanges "auto" builds read (prompts.EXAMPLE_STYLES); ``example_tool``: which
    tools they show, those closest to the question (the default) or the set's first that takes
    arguments (prompts.EXAMPLE_TOOLS).

    ``checks``: textagent.checks objects (none by default); ``retry``: what the loop does after a
    failed reply beyond its feedback (textagent.retry.Retry; none by default).
    """

    max_steps: int = 10
    max_tokens: int | None = None
    max_seconds: float | None = None
    max_format_errors: int = 3
    max_repeats: int | None = None
    max_call_errors: int | None = None
    reply_tokens: int = 512
    max_calls_per_reply: int | None = 16
    observation_limit: int = 4000
    step_observation_limit: int | None = 16_000
    tool_timeout: float | None = 30
    chat_format: str | ChatFormat = CHATML
    system_prompt: str | None = None
    strict: bool = False
    example: Any = "auto"
    example_style: str = prompts.DEFAULT_EXAMPLE_STYLE
    example_tool: str = prompts.DEFAULT_EXAMPLE_TOOL
    checks: tuple[Check, ...] = ()
    retry: Retry = field(default_factory=Retry)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if self.max_calls_per_reply is not None and self.max_calls_per_reply < 1:
            raise ValueError("max_calls_per_reply must be at least 1 (or None for no limit)")
        if self.max_repeats is not None and self.max_repeats < 2:
            raise ValueError("max_repeats must be at least 2: the same calls that many times in a row (or None)")
        if self.max_call_errors is not None and self.max_call_errors < 1:
            raise ValueError("max_call_errors must be at least 1 (or None for no such limit)")
        if self.retry is None:  # as given by callers that pass their optional one on
            object.__setattr__(self, "retry", Retry())
        if not isinstance(self.retry, Retry):
            raise TypeError(f"retry must be a textagent.retry.Retry, not {self.retry!r:.60}")
        prompts.example_style(self.example_style)
        prompts.example_tool(self.example_tool)
        # frozen values all the way down: a list given is kept as a tuple
        object.__setattr__(self, "checks", tuple(as_checks(tuple(self.checks))))
        object.__setattr__(self, "chat_format", get_format(self.chat_format))
        if isinstance(self.example, str) and self.example != "auto":
            raise ValueError(
                f'example must be "auto", an Example, a sequence of them or None, not {self.example!r:.60}'
            )
        if not isinstance(self.example, (str, type(None))) and not hasattr(self.example, "calls"):
            object.__setattr__(self, "example", tuple(self.example))

    @property
    def format(self) -> ChatFormat:
        """The chat format (``chat_format`` as given, resolved to a ChatFormat)."""
        fmt = self.chat_format
        assert isinstance(fmt, ChatFormat)  # resolved in __post_init__
        return fmt

    @property
    def auto_examples(self) -> bool:
        """Are the worked examples built for each question (``example="auto"``)?"""
        return isinstance(self.example, str) and self.example == "auto"

    @property
    def given_examples(self) -> tuple[Any, ...]:
        """The examples given as such (none under "auto" or None)."""
        example = self.example
        if example is None or isinstance(example, str):
            return ()
        return (example,) if hasattr(example, "calls") else tuple(example)

    def but(self, **changes: Any) -> AgentConfig:
        """This config with ``changes`` (field names of AgentConfig)."""
        return replace(self, **changes) if changes else self

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The fields' names: what ``Agent(**kwargs)`` takes as config rather than request options."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def split(cls, config: AgentConfig | None, options: Mapping[str, Any]) -> tuple[AgentConfig, dict[str, Any]]:
        """``config`` (or the defaults) with the fields among ``options``, and the options left:
        the request options Agent passes through to its backend."""
        names = set(cls.names())
        changes = {k: v for k, v in options.items() if k in names}
        rest = {k: v for k, v in options.items() if k not in names}
        return (config or cls()).but(**changes), rest
