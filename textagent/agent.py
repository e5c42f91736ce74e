"""The agent loop: render -> complete -> parse -> dispatch -> observe -> append, until an answer or a limit."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import prompts
from .backends.base import Backend, Completion, Usage
from .errors import BackendError
from .protocol import ParseError, Reply, ToolCall, parse_reply
from .templates import CHATML, ChatFormat, get_format
from .tools import ToolOutcome, ToolSet
from .trace import TraceWriter

__all__ = ["Agent", "Result", "Step", "STOP_REASONS"]

STOP_REASONS = ("answer", "max_steps", "token_budget", "time_limit", "format_errors", "backend_error")


@dataclass
class Step:
    """One model reply and everything done about it."""

    index: int
    raw: str
    reply: Reply | None = None
    parse_error: ParseError | None = None
    outcomes: list[ToolOutcome] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    finish_reason: str | None = None
    retries: int = 0

    @property
    def calls(self) -> list[ToolCall]:
        return list(self.reply.calls) if self.reply else []


@dataclass
class Result:
    answer: str | None
    stop_reason: str
    steps: list[Step]
    usage: Usage
    seconds: float
    error: BaseException | None = None
    transcript: str = ""

    @property
    def ok(self) -> bool:
        return self.stop_reason == "answer"

    @property
    def format_errors(self) -> int:
        return sum(s.parse_error is not None for s in self.steps)

    @property
    def tool_errors(self) -> int:
        return sum(not o.ok for s in self.steps for o in s.outcomes)


# Failures the model can fix by writing the call again; the observation says so.
_RETRYABLE = frozenset({"unknown_tool", "bad_arguments"})


class _Stop(Exception):
    """Ends the run; carries the stop reason and, for 'answer', the answer."""

    def __init__(self, reason: str, answer: str | None = None):
        super().__init__(reason)
        self.reason, self.answer = reason, answer


class FormatError(Exception):
    """The reply could not be used; carries the observation that tells the model why."""

    def __init__(self, observation: str, parse_error: ParseError | None = None):
        super().__init__(observation)
        self.observation, self.parse_error = observation, parse_error


class Agent:
    """Run a task with tools on a model that speaks the text protocol.

    Limits: ``max_steps`` model calls; ``max_tokens`` tokens spent in the whole run (prompt
    tokens the server actually evaluated, or all prompt tokens when it does not say, plus
    completion tokens); ``max_seconds`` wall time; ``max_format_errors`` unusable replies in
    a row. ``reply_tokens`` caps one reply.

    ``example`` is the worked exchange shown before the task: "auto" (the tool set's own, else
    one built from its first tool), a tools.Example, or None for none.
    """

    def __init__(self, backend: Backend, tools: Iterable[Any] | Mapping[str, Any] = (), *,
                 max_steps: int = 10, max_tokens: int | None = None, max_seconds: float | None = None,
                 max_format_errors: int = 3, observation_limit: int = 4000, tool_timeout: float | None = 30,
                 reply_tokens: int = 512, chat_format: str | ChatFormat = CHATML, system_prompt: str | None = None,
                 example: Any = "auto", strict: bool = False, on_step: Callable[[Step], None] | None = None,
                 trace: str | Path | IO[str] | None = None, **backend_options: Any):
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.backend = backend
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.max_steps, self.max_tokens, self.max_seconds = max_steps, max_tokens, max_seconds
        self.max_format_errors, self.observation_limit = max_format_errors, observation_limit
        self.tool_timeout, self.reply_tokens, self.strict = tool_timeout, reply_tokens, strict
        self.format = get_format(chat_format)
        self.system_prompt = system_prompt if system_prompt is not None else prompts.system_prompt(self.tools)
        if example == "auto":
            example = getattr(self.tools, "example", None)
            self.example = prompts.example_turns(self.tools, example)
        else:
            self.example = prompts.example_turns(self.tools, example) if example is not None else []
        self.on_step, self.trace, self.backend_options = on_step, trace, backend_options
        self.stop = ["OBSERVATION", *self.format.stop]

    # -- the loop ---------------------------------------------------------------------------
    def run(self, task: str) -> Result:
        self.messages = [{"role": "system", "content": self.system_prompt}, *self.example,
                         {"role": "user", "content": prompts.task(task)}]
        self.prompt = self.format.render(self.messages)
        self.steps: list[Step] = []
        self.usage, self.started, self.spent, self.bad_in_a_row = Usage(), time.monotonic(), 0, 0
        error: BaseException | None = None
        with TraceWriter(self.trace) as trace:
            trace.start(task=task, tools=list(self.tools), max_steps=self.max_steps, chat_format=self.format.name)
            traced = 0
            try:
                while True:
                    self._check_limits()
                    try:
                        self.step()
                    finally:  # a step that ends the run is traced and reported too
                        for step in self.steps[traced:]:
                            trace.step(step)
                            if self.on_step:
                                self.on_step(step)
                        traced = len(self.steps)
            except _Stop as stop:
                reason, answer = stop.reason, stop.answer
            except BackendError as exc:
                reason, answer, error = "backend_error", None, exc
            result = Result(answer, reason, self.steps, self.usage, time.monotonic() - self.started, error, self.prompt)
            trace.result(result)
        return result

    def step(self) -> Step:
        completion = self._query()
        step = Step(len(self.steps) + 1, completion.text, usage=completion.usage, timings=dict(completion.timings),
                    finish_reason=completion.finish_reason, retries=completion.retries)
        self.steps.append(step)
        self.usage += completion.usage
        self.spent += _spent(completion, self.prompt)
        try:
            step.reply = self._parse(completion.text)
        except FormatError as err:
            step.parse_error = err.parse_error
            self.bad_in_a_row += 1
            self._append(completion.text, [err.observation], step)
            if self.bad_in_a_row >= self.max_format_errors:
                raise _Stop("format_errors") from None
            return step
        self.bad_in_a_row = 0
        if step.reply.is_final:
            answer = step.reply.answer if step.reply.answer is not None else step.reply.thought.strip()
            self._append(_kept(completion.text, step.reply), [], step, close=False)
            raise _Stop("answer", answer)
        for call in step.reply.calls:
            self._check_limits(before_model=False)
            outcome = self.tools.execute(call, timeout=self._tool_timeout(), limit=self.observation_limit)
            step.outcomes.append(outcome)
        self._append(_kept(completion.text, step.reply),
                     [prompts.observation(o.name, o.output, failed=o.error in _RETRYABLE) for o in step.outcomes], step)
        return step

    # -- pieces -----------------------------------------------------------------------------
    def _query(self) -> Completion:
        max_reply = self.reply_tokens
        if self.max_tokens is not None:
            max_reply = max(1, min(max_reply, self.max_tokens - self.spent))
        return self.backend.complete(self.prompt, stop=list(self.stop), max_tokens=max_reply,
                                     messages=[dict(m) for m in self.messages], **self.backend_options)

    def _parse(self, text: str) -> Reply:
        try:
            reply = parse_reply(text, self.tools, strict=self.strict)
        except ParseError as err:
            raise FormatError(prompts.feedback(err.feedback(self.tools)), err) from None
        if reply.is_final and not (reply.answer or "").strip():
            raise FormatError(prompts.feedback(prompts.template("empty_reply.txt").substitute()))
        return reply

    def _append(self, reply_text: str, observations: list[str], step: Step, *, close: bool = True) -> None:
        """Extend the transcript; earlier text is never re-rendered (KV-cache reuse relies on it)."""
        self.prompt += reply_text
        self.messages.append({"role": "assistant", "content": reply_text})
        if close:
            user_text = "\n".join(observations)
            self.prompt += self.format.follow_up(user_text)
            self.messages.append({"role": "user", "content": user_text})
        step.observations = observations

    def _check_limits(self, *, before_model: bool = True) -> None:
        if self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds:
            raise _Stop("time_limit")
        if self.max_tokens is not None and self.spent >= self.max_tokens:
            raise _Stop("token_budget")
        if before_model and len(self.steps) >= self.max_steps:
            raise _Stop("max_steps")

    def _tool_timeout(self) -> float | None:
        if self.max_seconds is None:
            return self.tool_timeout
        left = max(0.01, self.max_seconds - (time.monotonic() - self.started))
        return left if self.tool_timeout is None else min(self.tool_timeout, left)


def _kept(text: str, reply: Reply) -> str:
    """The reply up to a self-written observation: the invented part never enters the transcript."""
    if reply.truncated_at is None:
        return text
    return "".join(text.splitlines(keepends=True)[: reply.truncated_at - 1])


def _spent(completion: Completion, prompt: str) -> int:
    u = completion.usage
    prompt_cost = u.prompt_evaluated if u.prompt_evaluated is not None else u.prompt_tokens
    if prompt_cost is None:  # backend reports nothing: ~4 characters a token
        prompt_cost = len(prompt) // 4
    completion_cost = u.completion_tokens if u.completion_tokens is not None else len(completion.text) // 4 + 1
    return prompt_cost + completion_cost
