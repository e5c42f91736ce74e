"""The agent loop: query -> parse -> dispatch -> observe -> append, until an answer or a limit.

What differs between the text, constrained and native modes (how the model is asked, how its
reply is read, how the conversation is written) lives in textagent/modes; opt-in heuristics that
second-guess the model live in textagent/checks. This loop is shared and neutral.
"""
from __future__ import annotations

import difflib
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from . import prompts
from .backends._http import request_deadline
from .backends.base import REQUEST_OPTIONS, Backend, Completion, Usage
from .checks import Check, RunView
from .errors import BackendError, BackendTimeout
from .modes import FormatError, Mode, ModeContext, get_mode
from .steps import STOP_REASONS, Note, Result, SentBack, Step
from .templates import CHATML, ChatFormat, get_format
from .tools import ToolSet, truncate
from .trace import TraceWriter, result_record, step_record

__all__ = ["Agent", "Result", "Step", "STOP_REASONS", "FormatError"]

log = logging.getLogger(__name__)


class _Stop(Exception):
    """Ends the run; carries the stop reason and, for 'answer', the answer."""

    def __init__(self, reason: str, answer: str | None = None):
        super().__init__(reason)
        self.reason, self.answer = reason, answer


class Agent:
    """Run a task with tools on a model, in one of the modes of textagent.modes (the same
    limits, stop reasons, steps, traces and usage accounting in each): ``"text"`` (default),
    ``"constrained"``, ``"native"``, ``"native+fallback"``, or a mode object.

    Limits: ``max_steps`` model calls; ``max_tokens`` tokens spent in the whole run (prompt
    tokens the server evaluated, or all prompt tokens when it does not say, plus completion
    tokens); ``max_seconds`` wall time; ``max_format_errors`` unusable replies in a row;
    ``reply_tokens`` one reply. ``max_calls_per_reply`` calls of one reply run (None: all; the
    others are refused in one note); ``observation_limit`` cuts each result,
    ``step_observation_limit`` the results of one step together.

    ``example``: the worked exchanges shown before the task: "auto" (the tool set's own, chosen
    per task when it has ``max_examples``, else placeholders built from a tool), an Example or a
    sequence of them, or None. ``checks``: objects of textagent.checks run on every answer and
    step (none by default: the first answer is taken as given).
    """

    def __init__(self, backend: Backend, tools: Iterable[Any] | Mapping[str, Any] = (), *,
                 mode: str | Mode = "text", max_steps: int = 10, max_tokens: int | None = None,
                 max_seconds: float | None = None, max_format_errors: int = 3, observation_limit: int = 4000,
                 tool_timeout: float | None = 30, reply_tokens: int = 512, chat_format: str | ChatFormat = CHATML,
                 system_prompt: str | None = None, example: Any = "auto", strict: bool = False,
                 checks: Sequence[Check] = (), max_calls_per_reply: int | None = 16,
                 step_observation_limit: int | None = 16_000,
                 on_step: Callable[[Step], None] | None = None, trace: str | Path | IO[str] | None = None,
                 **backend_options: Any):
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_calls_per_reply is not None and max_calls_per_reply < 1:
            raise ValueError("max_calls_per_reply must be at least 1 (or None for no limit)")
        _check_options(backend, backend_options)
        self.backend, self.tools = backend, tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.max_steps, self.max_tokens, self.max_seconds = max_steps, max_tokens, max_seconds
        self.max_format_errors, self.reply_tokens, self.tool_timeout = max_format_errors, reply_tokens, tool_timeout
        self.max_calls_per_reply, self.step_observation_limit = max_calls_per_reply, step_observation_limit
        self.checks = list(checks)
        for check in self.checks:
            if not isinstance(check, Check):
                raise TypeError(f"checks must be objects with name, on_answer() and on_step() "
                                f"(textagent.checks), not {check!r:.60}")
        self.on_step, self.trace, self.backend_options = on_step, trace, backend_options
        self.format = get_format(chat_format)
        self.auto_examples = isinstance(example, str) and example == "auto"
        if self.auto_examples:
            example = self.tools.examples or None   # None: placeholders built from a tool
        else:
            example = () if example is None else (example,) if hasattr(example, "calls") else tuple(example)
        self.examples = prompts.worked_examples(self.tools, example)
        self.mode = get_mode(mode)
        self.mode.setup(ModeContext(backend, self.tools, self.format, backend_options, system_prompt, strict,
                                    observation_limit))
        self.task, self.steps = "", []

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far, as chat messages."""
        return self.mode.conversation.messages

    @property
    def prompt(self) -> str:
        """Text modes: the conversation so far as one prompt string."""
        return self.mode.conversation.prompt

    # -- the loop ---------------------------------------------------------------------------
    def run(self, task: str) -> Result:
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"the task must be a non-empty question, got {task!r:.80}")
        examples = self.examples
        if self.auto_examples and self.tools.max_examples is not None:
            examples = prompts.worked_examples(self.tools, self.tools.examples_for(task) or None)
        self.task, self.shown = task, examples
        self.mode.start(task, examples)
        self.steps: list[Step] = []
        self.usage, self.started, self.spent, self.bad_in_a_row = Usage(), time.monotonic(), 0, 0
        error: BaseException | None = None
        with TraceWriter(self.trace) as trace:
            trace.start(task=task, tools=list(self.tools), max_steps=self.max_steps, chat_format=self.format.name,
                        mode=self.mode.name)
            traced = 0
            try:
                while True:
                    self._check_limits()
                    try:
                        self.step()
                    finally:  # a step that ends the run is traced and reported too
                        for step in self.steps[traced:]:
                            trace.write({**step_record(step), "details": step.details})
                            if self.on_step:
                                self.on_step(step)
                        traced = len(self.steps)
            except _Stop as stop:
                reason, answer = stop.reason, stop.answer
            except BackendTimeout as exc:
                if getattr(exc, "time_limit", False) or self._time_up():
                    reason, answer = "time_limit", None   # the request was cut to the run's time limit
                else:
                    log.info("the backend timed out after %d steps; the run ends with backend_error: %s", len(self.steps), exc)
                    reason, answer, error = "backend_error", None, exc
            except BackendError as exc:
                log.info("the backend failed after %d steps; the run ends with backend_error: %s", len(self.steps), exc)
                reason, answer, error = "backend_error", None, exc
            result = Result(answer, reason, self.steps, self.usage, time.monotonic() - self.started, error,
                            self.mode.transcript(), self.mode.name)
            trace.write({**result_record(result), "mode": result.mode, "decode_failures": result.decode_failures,
                         "early_stops": result.early_stops})
        return result

    def step(self) -> Step:
        step = Step(len(self.steps) + 1, "")
        # every request of the query ends by the run's time limit (its timeouts cut to the time left)
        with request_deadline(None if self.max_seconds is None else self.started + self.max_seconds):
            completion = self.mode.query(step, self._reply_budget())
        step.raw, step.usage, step.timings = completion.text, completion.usage, dict(completion.timings)
        step.finish_reason, step.retries = completion.finish_reason, completion.retries
        self.steps.append(step)
        self.usage += completion.usage
        self.spent += _spent(completion, self.mode.transcript() if _needs_prompt(completion) else "")
        try:
            step.reply = self.mode.parse(completion, step)
        except FormatError as err:
            step.parse_error = err.parse_error
            self.bad_in_a_row += 1
            self.mode.reject(step, err.observation)
            if self.bad_in_a_row >= self.max_format_errors:
                raise _Stop("format_errors") from None
            return step
        self.bad_in_a_row = 0
        if step.reply.is_final:
            answer = step.reply.answer if step.reply.answer is not None else step.reply.thought.strip()
            for check in self.checks:
                sent = check.on_answer(self._view(), answer)
                if sent:
                    step.sent_back = sent if isinstance(sent, SentBack) else SentBack(check.name, sent)
                    self.mode.reject(step, step.sent_back.text)
                    return step
            self.mode.answer(step)
            raise _Stop("answer", answer)
        notes = self._refuse_extra_calls(step)
        for index, call in enumerate(step.reply.calls):
            self._check_limits(before_model=False)
            step.outcomes.append(self.mode.execute(step, index, call, self.tool_timeout_left()))
        self._cap_observations(step)
        step.notes = notes + [note for check in self.checks for note in check.on_step(self._view(), step)]
        self.mode.observe(step, step.notes)
        return step

    # -- pieces -----------------------------------------------------------------------------
    def _view(self) -> RunView:
        return RunView(self.task, tuple(self.steps), self.tools, tuple(self.shown), self.mode.prompts)

    def _refuse_extra_calls(self, step: Step) -> list[Note]:
        """Keep the first ``max_calls_per_reply`` calls of the reply; the others are refused in
        one note."""
        calls, limit = step.reply.calls, self.max_calls_per_reply
        if limit is None or len(calls) <= limit:
            return []
        count = step.refused_calls = len(calls) - limit
        step.reply = replace(step.reply, calls=calls[:limit])
        one = count == 1
        return [Note("refused_calls", self.mode.prompts.render(
            "refused_calls", count=count, limit=limit, calls="call" if one else "calls", they="it" if one else "they",
            them="it" if one else "them"))]

    def _cap_observations(self, step: Step) -> None:
        """Cut the step's results to ``step_observation_limit`` characters together: each keeps
        what the ones before it left (with the ``[truncated N chars]`` marker)."""
        left = self.step_observation_limit
        if left is None or sum(len(o.output) for o in step.outcomes) <= left:
            return
        for i, outcome in enumerate(step.outcomes):
            output = truncate(outcome.output, max(left, 0))
            if output != outcome.output:
                step.outcomes[i] = replace(outcome, output=output)
            left -= len(output)

    def _reply_budget(self) -> int:
        if self.max_tokens is None:
            return self.reply_tokens
        return max(1, min(self.reply_tokens, self.max_tokens - self.spent))

    def _time_up(self) -> bool:
        return self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds - 0.05

    def _check_limits(self, *, before_model: bool = True) -> None:
        if self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds:
            raise _Stop("time_limit")
        if self.max_tokens is not None and self.spent >= self.max_tokens:
            raise _Stop("token_budget")
        if before_model and len(self.steps) >= self.max_steps:
            raise _Stop("max_steps")

    def tool_timeout_left(self) -> float | None:
        """The timeout for the next tool call: ``tool_timeout``, cut to the time the run has left."""
        if self.max_seconds is None:
            return self.tool_timeout
        left = max(0.01, self.max_seconds - (time.monotonic() - self.started))
        return left if self.tool_timeout is None else min(self.tool_timeout, left)


def _needs_prompt(completion: Completion) -> bool:
    u = completion.usage
    return u.prompt_evaluated is None and u.prompt_tokens is None


def _spent(completion: Completion, prompt: str) -> int:
    u = completion.usage
    prompt_cost = u.prompt_evaluated if u.prompt_evaluated is not None else u.prompt_tokens
    if prompt_cost is None:  # backend reports nothing: ~4 characters a token
        prompt_cost = len(prompt) // 4
    completion_cost = u.completion_tokens if u.completion_tokens is not None else len(completion.text) // 4 + 1
    return prompt_cost + completion_cost


def _check_options(backend: Any, options: Mapping[str, Any]) -> None:
    """Refuse options neither Agent nor the backend takes (``max_step=1`` would else be sent on
    as a request option and ignored): a TypeError naming the valid ones and the closest."""
    accepted = getattr(backend, "request_options", None)
    accepted = REQUEST_OPTIONS if accepted is None else frozenset(accepted)
    unknown = [k for k in options if k not in accepted or k == "messages"]
    if not unknown:
        return
    own = [p.name for p in inspect.signature(Agent.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]
    close = difflib.get_close_matches(unknown[0], [*own, *accepted], n=1)
    raise TypeError(f"Agent() got an unknown option {unknown[0]!r}"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + f". Agent options: {', '.join(own)}; request options {type(backend).__name__} takes: "
                    + (", ".join(sorted(accepted)) or "(none)"))
