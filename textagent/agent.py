"""The agent loop: query -> parse -> dispatch -> observe -> append, until an answer or a limit.

What differs between the text, constrained and native modes (how the model is asked, how its
reply is read, how the conversation is written) lives in textagent/modes; opt-in heuristics that
second-guess the model live in textagent/checks. This loop is shared and neutral.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from . import prompts
from .backends import request_deadline
from .backends.base import Backend, Usage
from .checks import Check, RunView, as_checks
from .errors import BackendError, BackendTimeout, RunTimeLimit
from .gbnf import reply_grammar
from .modes import Conversation, FormatError, Mode, ModeContext, RunsTools, get_mode, needs_of
from .modes.text import TextExchange
from .options import check_options, drop_deprecated
from .retry import Retry, Retrying
from .steps import STOP_REASONS, Note, Result, SentBack, Step, tokens_spent
from .stops import Answered, FormatErrors, MaxSteps, Repeated, Stop, Submitted, TimeLimit, TokenBudget
from .templates import CHATML, ChatFormat, get_format
from .tools import Tool, ToolSet
from .tools.execution import cap_outputs
from .trace import TraceWriter, new_run_id, start_record

__all__ = ["STOP_REASONS", "Agent", "FormatError", "Result", "Step"]

log = logging.getLogger(__name__)


class Agent:
    """Run a task with tools on a model in a mode of textagent.modes: ``"text"`` (default),
    ``"constrained"``, ``"native"``, ``"native+fallback"`` or a mode object; the same limits,
    stop reasons, steps, traces and usage accounting in each (reference: docs/agent.md).

    Limits: ``max_steps`` replies; ``max_tokens`` tokens spent in the run (prompt tokens
    evaluated plus completion); ``max_seconds``; ``max_format_errors`` unusable replies in a
    row; ``max_repeats`` (opt-in, None by default) replies in a row with the same calls;
    ``reply_tokens`` one reply; ``max_calls_per_reply``; ``observation_limit`` one result,
    ``step_observation_limit`` the results of one step. ``example``: "auto", an Example, a
    sequence of them, or None; ``example_style``: how the exchanges "auto" builds read
    (prompts.EXAMPLE_STYLES, status by default); ``example_tool``: which tools they show, those
    closest to the question (the default) or the first of the set that takes arguments
    (prompts.EXAMPLE_TOOLS). ``checks``:
    textagent.checks objects (none by default). ``retry``: what the loop does after a failed
    reply beyond its feedback (textagent.retry.Retry: varied feedback for a repeated mistake, a
    reply held to the grammar, a sampled retry, a repeat kept out of the conversation; none by
    default).
    """

    def __init__(
        self,
        backend: Backend,
        tools: Iterable[Any] | Mapping[str, Any] = (),
        *,
        mode: str | Mode = "text",
        max_steps: int = 10,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        max_format_errors: int = 3,
        max_repeats: int | None = None,
        observation_limit: int = 4000,
        tool_timeout: float | None = 30,
        reply_tokens: int = 512,
        chat_format: str | ChatFormat = CHATML,
        system_prompt: str | None = None,
        example: Any = "auto",
        example_style: str = prompts.DEFAULT_EXAMPLE_STYLE,
        example_tool: str = prompts.DEFAULT_EXAMPLE_TOOL,
        strict: bool = False,
        checks: Sequence[Check] = (),
        max_calls_per_reply: int | None = 16,
        step_observation_limit: int | None = 16_000,
        on_step: Callable[[Step], None] | None = None,
        trace: str | Path | IO[str] | None = None,
        retry: Retry | None = None,
        **backend_options: Any,
    ):
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_calls_per_reply is not None and max_calls_per_reply < 1:
            raise ValueError("max_calls_per_reply must be at least 1 (or None for no limit)")
        if max_repeats is not None and max_repeats < 2:
            raise ValueError("max_repeats must be at least 2: the same calls that many times in a row (or None)")
        drop_deprecated(backend_options)
        check_options(backend, backend_options, Agent.__init__)
        self.backend, self.tools = backend, tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.max_steps, self.max_tokens, self.max_seconds = max_steps, max_tokens, max_seconds
        self.max_format_errors, self.reply_tokens, self.tool_timeout = max_format_errors, reply_tokens, tool_timeout
        self.max_calls_per_reply, self.step_observation_limit = max_calls_per_reply, step_observation_limit
        self.max_repeats = max_repeats
        self.checks = as_checks(checks)
        if retry is not None and not isinstance(retry, Retry):
            raise TypeError(f"retry must be a textagent.retry.Retry, not {retry!r:.60}")
        self.retry = retry or Retry()
        self.on_step, self.trace, self.backend_options = on_step, trace, backend_options
        self.example_style = prompts.example_style(example_style)
        self.example_tool = prompts.example_tool(example_tool)
        self.format = get_format(chat_format)
        self.mode = get_mode(mode)
        self.auto_examples = isinstance(example, str) and example == "auto"
        if self.auto_examples:
            self.examples = self._auto_examples()
        else:
            example = () if example is None else (example,) if hasattr(example, "calls") else tuple(example)
            self.examples = prompts.worked_examples(self.tools, example)
        self.mode.setup(
            ModeContext(backend, self.tools, self.format, backend_options, system_prompt, strict, observation_limit)
        )
        self.task = ""
        self.steps: list[Step] = []
        self.shown: list[prompts.Worked] = []
        self.question, self.conversation_id = 0, new_run_id()
        self._added: list[Tool] = []

    # -- the conversation ---------------------------------------------------------------------

    @property
    def conversation(self) -> Conversation:
        """The conversation so far: ``messages``, and ``prompt`` in the text modes."""
        return self.mode.conversation

    def reset(self) -> None:
        """Forget the conversation: the next :meth:`run` starts afresh (system prompt, examples)."""
        self.mode.conversation = Conversation()
        self.question, self.conversation_id = 0, new_run_id()

    def add_tools(self, *tools: Any) -> None:
        """Add tools (Tools, functions or ToolSets) for the questions to come. In a conversation
        under way the model is told of them with the next question (the transcript is only ever
        appended to); before the first question they are simply part of the tool list."""
        before = set(self.tools)
        self.tools = self.tools.with_tools(*tools)
        added = [t for name, t in self.tools.items() if name not in before]
        if self.question:
            self._added += added
        self.mode.set_tools(self.tools)
        if self.auto_examples and not self.question:
            self.examples = self._auto_examples()

    def _auto_examples(self, task: str | None = None) -> list[prompts.Worked]:
        """``example="auto"``: the tools' own examples (those closest to ``task`` when the set
        shows only some); for tools without any, exchanges in ``example_style`` built around the
        tools closest to ``task`` (``example_tool="closest"``) or the set's first, in the
        text modes only: they are a device of the text protocol, and a function-calling client
        sends the server no such turns."""
        own = (
            self.tools.examples_for(task)
            if task is not None and self.tools.max_examples is not None
            else self.tools.examples
        )
        if not own and needs_of(self.mode).tools:
            return []
        return prompts.worked_examples(self.tools, own or None, self.example_style, task, self.example_tool)

    # -- the loop ---------------------------------------------------------------------------
    def run(self, task: str) -> Result:
        """Answer ``task``. A later call goes on with the same conversation, as a follow-up
        question that sees the earlier questions, calls and results (:meth:`reset` starts
        afresh); the limits apply to each question on its own."""
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"the task must be a non-empty question, got {task!r:.80}")
        self._ask(task)
        self.steps = []
        self.usage, self.started, self.spent, self.bad_in_a_row = Usage(), time.monotonic(), 0, 0
        self.same_in_a_row = 0  # see _count_repeats
        self.retrying = Retrying(self.retry, self.tools, task, self.mode.prompts, self._retry_grammar())
        self._last_calls: list[tuple[str, Any]] | None = None
        error: BaseException | None = None
        with TraceWriter(self.trace) as trace:
            trace.write(self.start_record(task))
            self.question += 1
            traced = 0
            try:
                while True:
                    self._check_limits()
                    try:
                        self._step()
                    finally:  # a step that ends the run is traced and reported too
                        for step in self.steps[traced:]:
                            trace.step(step)
                            if self.on_step:
                                self.on_step(step)
                        traced = len(self.steps)
            except Stop as stop:
                reason, answer = stop.reason, stop.text if isinstance(stop, Answered) else None
            except BackendTimeout as exc:
                if isinstance(exc, RunTimeLimit) or self._time_up():
                    reason, answer = "time_limit", None  # the request was cut to the run's time limit
                else:
                    log.info(
                        "the backend timed out after %d steps; the run ends with backend_error: %s",
                        len(self.steps),
                        exc,
                    )
                    reason, answer, error = "backend_error", None, exc
            except BackendError as exc:
                log.info("the backend failed after %d steps; the run ends with backend_error: %s", len(self.steps), exc)
                reason, answer, error = "backend_error", None, exc
            result = Result(
                answer,
                reason,
                self.steps,
                self.usage,
                time.monotonic() - self.started,
                error,
                self.mode.transcript(),
                self.mode.name,
            )
            trace.result(result)
        return result

    def _ask(self, task: str) -> None:
        """Put the question to the model: a follow-up of the conversation under way (after the
        tools added since the last question), or the start of one, with its worked examples."""
        if self.question and self.mode.conversation.messages:
            self.mode.follow(task, self._added)
        else:
            examples = self.examples
            if self.auto_examples and (self.tools.max_examples is not None or self.example_tool == "closest"):
                examples = self._auto_examples(task)  # chosen for this question
            self.shown = examples
            self.mode.start(task, examples)
        self.task, self._added = task, []

    def _step(self) -> Step:
        step = Step(len(self.steps) + 1, "")
        once = self.retrying.options_for_next()  # a retry's grammar or temperature, this request only
        if once:
            step.extra["retry"] = {k: (True if k == "grammar" else v) for k, v in once.items()}
        # every request of the query ends by the run's time limit (its timeouts cut to the time left)
        with request_deadline(None if self.max_seconds is None else self.started + self.max_seconds), self._once(once):
            completion = self.mode.query(step, self._reply_budget())
        step.raw, step.usage, step.timings = completion.text, completion.usage, dict(completion.timings)
        step.finish_reason, step.retries, step.stop_word = (
            completion.finish_reason,
            completion.retries,
            completion.stop_word,
        )
        self.steps.append(step)
        self.usage += completion.usage
        self.spent += tokens_spent(completion, self.mode.transcript)
        try:
            step.reply = self.mode.parse(completion, step)
        except FormatError as err:
            step.parse_error = err.parse_error
            self.bad_in_a_row += 1
            self._last_calls = None  # a reply in between: the calls after it are not "in a row"
            observation = self.retrying.format_error(step, err.observation)
            if not step.rewound:  # a rewound repeat is not written: asked again from before it
                self.mode.reject(step, observation)
            if self.bad_in_a_row >= self.max_format_errors:
                raise FormatErrors() from None
            return step
        self.bad_in_a_row = 0
        if step.reply.is_final:
            self._answer(step)
            return step
        mode = self.mode
        if not isinstance(mode, RunsTools):  # the calls are someone else's to run (the proxy's client)
            mode.answer(step)
            raise Submitted()
        notes = self._refuse_extra_calls(step)
        for index, call in enumerate(step.reply.calls):
            self._check_limits(before_model=False)
            step.outcomes.append(mode.execute(step, index, call, self.tool_timeout_left()))
        step.outcomes = cap_outputs(step.outcomes, self.step_observation_limit)
        step.notes = notes + [
            note for check in self.checks if hasattr(check, "on_step") for note in check.on_step(self._view(), step)
        ]
        step.notes += self.retrying.calls_failed(step)
        if not step.rewound:
            mode.observe(step, step.notes)
        self._count_repeats(step)
        return step

    def _answer(self, step: Step) -> None:
        """A final answer: sent back when it quotes the feedback (a retry) or a check refuses it,
        else the question ends with it."""
        assert step.reply is not None
        answer = step.reply.answer if step.reply.answer is not None else step.reply.thought.strip()
        again = self.retrying.send_back(step, answer)
        if again is not None:
            step.sent_back = SentBack("retry", again)
        for check in (c for c in self.checks if hasattr(c, "on_answer")):
            if step.sent_back is not None:
                break
            sent = check.on_answer(self._view(), answer)
            if sent:
                step.sent_back = sent if isinstance(sent, SentBack) else SentBack(check.name, sent)
        if step.sent_back is not None:
            self._last_calls = None
            self.mode.reject(step, step.sent_back.text)
            return
        self.mode.answer(step)
        raise Answered(answer)

    # -- pieces -----------------------------------------------------------------------------
    def _retry_grammar(self) -> str | None:
        """The grammar a retry is held to: the tool set's, when asked for, in the text protocol
        (constrained mode has it already), on a backend that takes a grammar."""
        if not self.retry.grammar or not isinstance(self.mode, TextExchange) or needs_of(self.mode).grammar:
            return None
        capabilities = getattr(self.backend, "capabilities", None)
        if capabilities is None or not capabilities.grammar or not self.tools:
            return None
        return reply_grammar(self.tools)

    @contextmanager
    def _once(self, options: dict[str, Any]) -> Iterator[None]:
        """``options`` on the next request only: the mode reads the Agent's request options
        (the same mapping its context holds) when it asks."""
        if not options:
            yield
            return
        saved = dict(self.backend_options)
        self.backend_options.update(options)
        try:
            yield
        finally:
            self.backend_options.clear()
            self.backend_options.update(saved)

    def _count_repeats(self, step: Step) -> None:
        """End the run (``repeated``) once ``max_repeats`` replies in a row made the same calls,
        after the last of them ran: a model that sends back what it sent before, whatever the
        results said, is looping (opt-in: by default the other limits end such a run)."""
        assert step.reply is not None
        calls = [(c.name, c.args) for c in step.reply.calls]
        self.same_in_a_row = self.same_in_a_row + 1 if calls == self._last_calls else 1
        self._last_calls = calls
        if self.max_repeats is not None and self.same_in_a_row >= self.max_repeats:
            raise Repeated()

    def start_record(self, task: str) -> dict[str, Any]:
        """The first trace line of a run of ``task`` on this agent (trace.start_record), the
        next question of its conversation."""
        return start_record(
            task=task,
            tools=list(self.tools),
            max_steps=self.max_steps,
            chat_format=self.format.name,
            mode=self.mode.name,
            conversation=self.conversation_id,
            question=self.question + 1,
        )

    def _view(self) -> RunView:
        return RunView(self.task, tuple(self.steps), self.tools, tuple(self.shown), self.mode.prompts)

    def _refuse_extra_calls(self, step: Step) -> list[Note]:
        """Keep the first ``max_calls_per_reply`` calls of the reply; the others are refused in
        one note."""
        assert step.reply is not None  # called once the reply parsed
        calls, limit = step.reply.calls, self.max_calls_per_reply
        if limit is None or len(calls) <= limit:
            return []
        count = step.refused_calls = len(calls) - limit
        step.reply = replace(step.reply, calls=calls[:limit])
        one = count == 1
        return [
            Note(
                "refused_calls",
                self.mode.prompts.render(
                    "refused_calls",
                    count=count,
                    limit=limit,
                    calls="call" if one else "calls",
                    they="it" if one else "they",
                    them="it" if one else "them",
                ),
            )
        ]

    def _reply_budget(self) -> int:
        if self.max_tokens is None:
            return self.reply_tokens
        return max(1, min(self.reply_tokens, self.max_tokens - self.spent))

    def _time_up(self) -> bool:
        return self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds - 0.05

    def _check_limits(self, *, before_model: bool = True) -> None:
        if self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds:
            raise TimeLimit()
        if self.max_tokens is not None and self.spent >= self.max_tokens:
            raise TokenBudget()
        if before_model and len(self.steps) >= self.max_steps:
            raise MaxSteps()

    def tool_timeout_left(self) -> float | None:
        """The timeout for the next tool call: ``tool_timeout``, cut to the time the run has left."""
        if self.max_seconds is None:
            return self.tool_timeout
        left = max(0.01, self.max_seconds - (time.monotonic() - self.started))
        return left if self.tool_timeout is None else min(self.tool_timeout, left)
