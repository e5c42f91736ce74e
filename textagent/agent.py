"""The agent loop: query -> parse -> dispatch -> observe -> append, until an answer or a limit.

What differs between the text, constrained and native modes (how the model is asked, how its
reply is read, how the conversation is written) lives in textagent/modes; this loop is shared.
"""
from __future__ import annotations

import difflib
import inspect
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from . import prompts
from .backends._http import request_deadline
from .backends.base import REQUEST_OPTIONS, Backend, Completion, Usage
from .errors import BackendError, BackendTimeout
from .grounding import Unlooked, unlooked_items, unsupported_numbers
from .modes import FormatError, Mode, get_mode
from .protocol import ParseError, Reply, ToolCall
from .templates import CHATML, ChatFormat, get_format
from .tools import ToolOutcome, ToolSet, truncate
from .trace import TraceWriter, result_record, step_record

__all__ = ["Agent", "Result", "Step", "STOP_REASONS", "FormatError"]

log = logging.getLogger(__name__)

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
    # Mode-specific facts: early_stop (text modes, streaming); native, tool_calls,
    # decode_failure, content_calls, fallback, invalid_arguments (native modes).
    details: dict[str, Any] = field(default_factory=dict)

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
    mode: str = "text"

    @property
    def ok(self) -> bool:
        return self.stop_reason == "answer"

    @property
    def format_errors(self) -> int:
        """Replies that could not be used (they did not parse, or were empty)."""
        return sum(s.reply is None for s in self.steps)

    @property
    def tool_errors(self) -> int:
        return sum(not o.ok for s in self.steps for o in s.outcomes)

    @property
    def decode_failures(self) -> int:
        """Native modes: replies whose content held a call the server did not decode."""
        return sum("decode_failure" in s.details for s in self.steps)

    @property
    def unsupported_answers(self) -> int:
        """Answers sent back because they stated numbers no tool result held (check_numbers)."""
        return sum("unsupported_numbers" in s.details for s in self.steps)

    @property
    def unlooked_answers(self) -> int:
        """Answers sent back because they spoke of listed items no call covered (check_items)."""
        return sum("unlooked_items" in s.details for s in self.steps)

    @property
    def early_stops(self) -> int:
        """Text modes with streaming: replies whose stream was closed after a complete call."""
        return sum("early_stop" in s.details for s in self.steps)


class _Stop(Exception):
    """Ends the run; carries the stop reason and, for 'answer', the answer."""

    def __init__(self, reason: str, answer: str | None = None):
        super().__init__(reason)
        self.reason, self.answer = reason, answer


class Agent:
    """Run a task with tools on a model, in one of three modes (the same limits, stop reasons,
    steps, traces and usage accounting in each):

    * ``mode="text"`` (default): the model writes ``TOOL: name ARGS: {...}`` lines, parsed by
      the text protocol; with ``stream=True`` the stream is closed at the first complete call;
    * ``mode="constrained"``: the same, with the server held to a GBNF grammar built from the
      tools' schemas (llama.cpp; other backends are refused with ModeNotSupported);
    * ``mode="native"``: the server's function calling (``tools`` on the chat endpoint), for
      comparison; ``"native+fallback"`` also reads calls the model wrote into its content.
      A mode object (textagent.modes) may be given instead of a name.

    Limits: ``max_steps`` model calls; ``max_tokens`` tokens spent in the whole run (prompt
    tokens the server actually evaluated, or all prompt tokens when it does not say, plus
    completion tokens); ``max_seconds`` wall time; ``max_format_errors`` unusable replies in
    a row. ``reply_tokens`` caps one reply.

    Size of a step: ``max_calls_per_reply`` calls of one reply run (default 16; None: all),
    the others are refused in one observation that says how many; ``observation_limit`` cuts
    each result, ``step_observation_limit`` all the results of one step together (default
    16,000 characters; each result is cut to what the results before it left).

    ``example`` is the worked exchange shown before the task: "auto" (the tool set's own
    examples, else one built from a tool of the set), a tools.Example or a sequence of them,
    or None for none. With "auto" and a ToolSet that has ``max_examples``, run() shows each
    task the examples ToolSet.examples_for(task) picks.

    ``check_numbers``: a final answer that states numbers found neither in the task nor in any
    tool result is sent back once, as an observation naming them, when the run called a tool
    (textagent.grounding): small models fill in values they skipped looking up.
    ``check_items``: likewise, an answer that speaks of an item the task lists beside one the
    run called a tool for ("in Paris and in Tokyo" after get_time for Paris), which no call and
    no tool result covers, is sent back once with the calls to make; once they are made, their
    last result is followed by a reminder that every item has its result.
    """

    def __init__(self, backend: Backend, tools: Iterable[Any] | Mapping[str, Any] = (), *,
                 mode: str | Mode = "text", max_steps: int = 10, max_tokens: int | None = None,
                 max_seconds: float | None = None, max_format_errors: int = 3, observation_limit: int = 4000,
                 tool_timeout: float | None = 30, reply_tokens: int = 512, chat_format: str | ChatFormat = CHATML,
                 system_prompt: str | None = None, example: Any = "auto", strict: bool = False,
                 check_numbers: bool = True, check_items: bool = True, max_calls_per_reply: int | None = 16,
                 step_observation_limit: int | None = 16_000,
                 on_step: Callable[[Step], None] | None = None, trace: str | Path | IO[str] | None = None,
                 **backend_options: Any):
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_calls_per_reply is not None and max_calls_per_reply < 1:
            raise ValueError("max_calls_per_reply must be at least 1 (or None for no limit)")
        self.max_calls_per_reply, self.step_observation_limit = max_calls_per_reply, step_observation_limit
        _check_options(backend, backend_options)
        self.backend = backend
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.max_steps, self.max_tokens, self.max_seconds = max_steps, max_tokens, max_seconds
        self.max_format_errors, self.observation_limit = max_format_errors, observation_limit
        self.tool_timeout, self.reply_tokens, self.strict = tool_timeout, reply_tokens, strict
        self.check_numbers, self.check_items, self.task = check_numbers, check_items, ""
        self.format = get_format(chat_format)
        self.system_prompt = system_prompt if system_prompt is not None else prompts.system_prompt(self.tools)
        self.system_prompt_given = system_prompt is not None  # native mode writes its own otherwise
        self.auto_examples = isinstance(example, str) and example == "auto"
        if self.auto_examples:
            example = self.tools.examples or None   # None: prompts builds a placeholder
        else:   # None here means no examples at all
            example = () if example is None else (example,) if hasattr(example, "calls") else tuple(example)
        self._show_examples(example)
        self.on_step, self.trace, self.backend_options = on_step, trace, backend_options
        self.mode = get_mode(mode)
        self.mode.setup(self)
        self.messages: list[dict[str, Any]] = []
        self.prompt = ""

    def _show_examples(self, example: Any) -> None:
        # (task, [(tool, args, result)], answer) for each example; modes write them their own way
        self.example_source = prompts.worked_examples(self.tools, example)
        self.example = prompts.example_turns(self.tools, example)

    # -- the loop ---------------------------------------------------------------------------
    def run(self, task: str) -> Result:
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"the task must be a non-empty question, got {task!r:.80}")
        self.task = task
        if self.auto_examples and self.tools.max_examples is not None:
            self._show_examples(self.tools.examples_for(task) or None)
        self.mode.start(self, task)
        self.steps: list[Step] = []
        # items an answer was sent back for; those not yet called
        self.unlooked: list[Unlooked] = []
        self.uncalled: list[Unlooked] = []
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
                    log.info("the backend timed out after %d steps; the run ends with backend_error: %s",
                             len(self.steps), exc)
                    reason, answer, error = "backend_error", None, exc
            except BackendError as exc:
                log.info("the backend failed after %d steps; the run ends with backend_error: %s", len(self.steps), exc)
                reason, answer, error = "backend_error", None, exc
            result = Result(answer, reason, self.steps, self.usage, time.monotonic() - self.started, error,
                            self.mode.transcript(self), self.mode.name)
            trace.write({**result_record(result), "mode": result.mode, "decode_failures": result.decode_failures,
                         "early_stops": result.early_stops})
        return result

    def step(self) -> Step:
        step = Step(len(self.steps) + 1, "")
        # every request of the query ends by the run's time limit (its timeouts cut to the time left)
        with request_deadline(None if self.max_seconds is None else self.started + self.max_seconds):
            completion = self.mode.query(self, step, self._reply_budget())
        step.raw, step.usage, step.timings = completion.text, completion.usage, dict(completion.timings)
        step.finish_reason, step.retries = completion.finish_reason, completion.retries
        self.steps.append(step)
        self.usage += completion.usage
        self.spent += _spent(completion, self.mode.transcript(self) if _needs_prompt(completion) else "")
        try:
            step.reply = self.mode.parse(self, completion, step)
        except FormatError as err:
            step.parse_error = err.parse_error
            self.bad_in_a_row += 1
            self.mode.reject(self, step, err.observation)
            if self.bad_in_a_row >= self.max_format_errors:
                raise _Stop("format_errors") from None
            return step
        self.bad_in_a_row = 0
        if step.reply.is_final:
            answer = step.reply.answer if step.reply.answer is not None else step.reply.thought.strip()
            native = self.mode.name.startswith("native")
            unlooked = self._unlooked(answer)
            if unlooked:
                step.details["unlooked_items"] = [u.item for u in unlooked]
                self.unlooked = self.uncalled = unlooked
                self.mode.reject(self, step, prompts.unlooked_answer(unlooked, native=native))
                return step
            unsupported = self._unsupported(answer)
            if unsupported:
                step.details["unsupported_numbers"] = unsupported
                copied = self._from_examples(unsupported)
                self.mode.reject(self, step, prompts.unsupported_answer(unsupported, copied=copied, native=native))
                return step
            self.mode.answer(self, step)
            raise _Stop("answer", answer)
        self._refuse_extra_calls(step)
        for call in step.reply.calls:
            self._check_limits(before_model=False)
            step.outcomes.append(self.mode.execute(self, step, call))
        self._cap_observations(step)
        if self.uncalled:
            self._remind(step)
        self.mode.observe(self, step)
        return step

    # -- pieces -----------------------------------------------------------------------------
    def _refuse_extra_calls(self, step: Step) -> None:
        """Keep the first ``max_calls_per_reply`` calls of the reply; the others are refused in one
        note (``step.details["refused_calls"]`` is how many, ``["refusal"]`` the note the modes
        append to the step's observations)."""
        calls, limit = step.reply.calls, self.max_calls_per_reply
        if limit is None or len(calls) <= limit:
            return
        count = len(calls) - limit
        step.reply = replace(step.reply, calls=calls[:limit])
        step.details["refused_calls"] = count
        step.details["refusal"] = prompts.template("refused_calls.txt").substitute(
            count=count, limit=limit, calls="call" if count == 1 else "calls", they="it" if count == 1 else "they",
            them="it" if count == 1 else "them")

    def _cap_observations(self, step: Step) -> None:
        """Cut the step's results so that together they hold at most ``step_observation_limit``
        characters: each keeps what the ones before it left (with the ``[truncated N chars]``
        marker)."""
        left = self.step_observation_limit
        if left is None or sum(len(o.output) for o in step.outcomes) <= left:
            return
        for i, outcome in enumerate(step.outcomes):
            output = truncate(outcome.output, max(left, 0))
            if output != outcome.output:
                step.outcomes[i] = replace(outcome, output=output)
            left -= len(output)

    def _unsupported(self, answer: str) -> list[str]:
        """The answer's numbers that neither the task nor a tool result holds, when the answer
        is to be sent back: ``check_numbers`` is on, the run called a tool (an answer from the
        model's own knowledge is not second-guessed) and no answer was sent back before."""
        outputs = [o.output for s in self.steps for o in s.outcomes]
        if not self.check_numbers or not outputs or any("unsupported_numbers" in s.details for s in self.steps):
            return []
        return unsupported_numbers(answer, [self.task, *outputs])

    def _unlooked(self, answer: str) -> list[Unlooked]:
        """The listed items the answer speaks of that no call covered, with the call to make,
        when the answer is to be sent back: ``check_items`` is on and none was sent back for
        this before."""
        outcomes = [o for s in self.steps for o in s.outcomes]
        if not self.check_items or not outcomes or any("unlooked_items" in s.details for s in self.steps):
            return []
        calls = [(o.name, o.args) for o in outcomes if isinstance(o.args, Mapping)]
        return unlooked_items(self.task, answer, calls, [o.output for o in outcomes])

    def _from_examples(self, numbers: list[str]) -> list[str]:
        """Those of ``numbers`` the worked examples shown hold (arguments, results, answers)."""
        shown = [json.dumps(args, default=str) + " " + result
                 for worked in self.example_source for _, args, result in worked.calls]
        shown += [worked.answer for worked in self.example_source]
        return [n for n in numbers if not unsupported_numbers(n, shown)]

    def _remind(self, step: Step) -> None:
        """Once the calls an answer was sent back for are made, the last result is followed by a
        reminder to answer for every item (``step.details["reminder"]``)."""
        made = [(o.name, v.lower()) for o in step.outcomes if o.ok and isinstance(o.args, Mapping)
                for v in o.args.values() if isinstance(v, str)]
        self.uncalled = [u for u in self.uncalled
                         if not any(name == u.tool and u.item.lower() in value for name, value in made)]
        if not self.uncalled:
            step.details["reminder"] = prompts.items_called(self.unlooked, self.task,
                                                            native=self.mode.name.startswith("native"))

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
