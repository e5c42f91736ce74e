"""The agent loop: query -> parse -> dispatch -> observe -> append, until an answer or a limit.

What differs between the text, constrained and native modes (how the model is asked, how its
reply is read, how the conversation is written) lives in textagent/modes; opt-in heuristics that
second-guess the model live in textagent/checks. This loop is shared and neutral.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from . import prompts
from .backends import request_deadline
from .backends.base import Backend, Completion, Usage, capabilities_of
from .checks import RunView
from .config import AgentConfig
from .errors import BackendError, BackendTimeout, RunTimeLimit
from .gbnf import reply_grammar
from .modes import Conversation, FormatError, Mode, ModeContext, RunsTools, get_mode, needs_of
from .modes.text import TextExchange
from .options import check_options, drop_deprecated
from .retry import RULED_OUT, VERIFY_TOKENS, Retrying, facts
from .steps import STOP_REASONS, Note, Result, RetryFacts, SentBack, Step, tokens_spent
from .stops import Answered, CallErrors, FormatErrors, MaxSteps, Repeated, Stop, Submitted, TimeLimit, TokenBudget
from .tools import Tool, ToolSet
from .tools.execution import cap_outputs
from .trace import TraceWriter, new_run_id, start_record

__all__ = ["STOP_REASONS", "Agent", "AgentConfig", "Checkpoint", "FormatError", "QuestionRun", "Result", "Step"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    """Where an Agent's conversation was (Agent.checkpoint): the conversation, the number of
    questions asked, the tools added since the last one, the tools that ran in it."""

    conversation: Conversation
    question: int
    added: tuple[Tool, ...]
    ran: frozenset[str] = frozenset()


class Agent:
    """Run questions with tools on a model in a mode of textagent.modes: ``"text"`` (default),
    ``"constrained"``, ``"native"``, ``"native+fallback"`` or a mode object; the same limits,
    stop reasons, steps, traces and usage accounting in each (reference: docs/agent.md).

    ``config``: an :class:`AgentConfig` (limits, worked examples, checks, retries); its fields may
    also be given as keyword arguments (``Agent(backend, tools, max_steps=5)``), over ``config``.
    The other keyword arguments are request options passed through to the backend
    (``temperature``, ``seed``, ``stream``, ...). ``on_step`` is called with each step as it
    ends; ``trace`` (a path or a text file) receives the JSONL trace of every question.

    The Agent holds the conversation; each :meth:`run` is one question of it, run by a fresh
    :class:`QuestionRun` that holds that question's steps and counters.
    """

    def __init__(
        self,
        backend: Backend,
        tools: Iterable[Any] | Mapping[str, Any] = (),
        config: AgentConfig | None = None,
        *,
        mode: str | Mode = "text",
        on_step: Callable[[Step], None] | None = None,
        trace: str | Path | IO[str] | None = None,
        **options: Any,
    ):
        if config is not None and not isinstance(config, AgentConfig):
            raise TypeError(f"config must be a textagent.AgentConfig, not {config!r:.60}")
        drop_deprecated(options)
        config, options = AgentConfig.split(config, options)
        check_options(backend, options, ("mode", "on_step", "trace", *AgentConfig.names()))
        self.backend, self.config = backend, config
        self.tools = tools if isinstance(tools, ToolSet) else ToolSet(tools)
        self.on_step, self.trace, self.backend_options = on_step, trace, options
        self.mode = get_mode(mode)
        self.mode.setup(
            ModeContext(
                backend,
                self.tools,
                config.format,
                options,
                config.system_prompt,
                config.strict,
                config.observation_limit,
            )
        )
        self.shown: list[prompts.Worked] = []  # the worked examples the conversation started with
        self.question, self.conversation_id = 0, new_run_id()
        self.last: QuestionRun | None = None  # the question running or run last
        self._added: list[Tool] = []
        self._ran: set[str] = set()  # the tools that ran in the conversation (a retry's claims)
        # the retry grammars made for a tool set, kept while it is the Agent's: a conversation's
        # later questions (BFCL's multi-turn turns) need not build a large set's grammar again
        self._grammars: tuple[ToolSet, dict[bool, str | None]] = (self.tools, {})

    # -- the conversation ---------------------------------------------------------------------

    @property
    def conversation(self) -> Conversation:
        """The conversation so far: ``messages``, and ``prompt`` in the text modes."""
        return self.mode.conversation

    @property
    def steps(self) -> list[Step]:
        """The steps of the question running or run last (also when it raised)."""
        return self.last.steps if self.last is not None else []

    def reset(self) -> None:
        """Forget the conversation: the next :meth:`run` starts afresh (system prompt, examples)."""
        self.mode.conversation = Conversation()
        self.question, self.conversation_id = 0, new_run_id()
        self._ran = set()

    def checkpoint(self) -> Checkpoint:
        """Where the conversation is now, to :meth:`restore` it later: ``textagent chat`` takes an
        interrupted question (or one the server refused) back this way."""
        return Checkpoint(self.conversation.copy(), self.question, tuple(self._added), frozenset(self._ran))

    def restore(self, checkpoint: Checkpoint) -> None:
        """Put the conversation back where ``checkpoint`` found it: the questions asked since
        are gone from it, so the next question does not carry them."""
        self.mode.conversation = checkpoint.conversation.copy()
        self.question, self._added = checkpoint.question, list(checkpoint.added)
        self._ran = set(checkpoint.ran)

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

    def examples_for(self, task: str) -> list[prompts.Worked]:
        """The worked examples a conversation starting with ``task`` shows: those given, or
        (``example="auto"``) the tools' own (those closest to ``task`` when the set shows only
        some); for tools without any, exchanges in ``example_style`` built around the tools
        closest to ``task`` (``example_tool="closest"``) or the set's first, in the text modes
        only: they are a device of the text protocol, and a function-calling client sends the
        server no such turns."""
        config = self.config
        if not config.auto_examples:
            return prompts.worked_examples(self.tools, config.given_examples)
        own = self.tools.examples_for(task) if self.tools.max_examples is not None else self.tools.examples
        if not own and needs_of(self.mode).tools:
            return []
        return prompts.worked_examples(self.tools, own or None, config.example_style, task, config.example_tool)

    # -- a question -----------------------------------------------------------------------------
    def run(self, task: str) -> Result:
        """Answer ``task``. A later call goes on with the same conversation, as a follow-up
        question that sees the earlier questions, calls and results (:meth:`reset` starts
        afresh); the limits apply to each question on its own."""
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"the task must be a non-empty question, got {task!r:.80}")
        self._ask(task)
        self.last = QuestionRun(self, task)
        with TraceWriter(self.trace) as trace:
            trace.write(self.start_record(task))
            self.question += 1
            try:
                result = self.last.run(trace)
            finally:
                self._ran |= self.last.retrying.ran
            trace.result(result)
        return result

    def _ask(self, task: str) -> None:
        """Put the question to the model: a follow-up of the conversation under way (after the
        tools added since the last question), or the start of one, with its worked examples."""
        if self.question and self.mode.conversation.messages:
            self.mode.follow(task, self._added)
        else:
            self.shown = self.examples_for(task)
            self.mode.start(task, self.shown)
        self._added = []

    def retry_grammar(self, abstain: bool = False) -> str | None:
        """The grammar a retry is held to: the tool set's, when the Retry asks for it, in the text
        protocol (constrained mode has it already), on a backend that takes a grammar.
        ``abstain``: the gate's re-ask's (Retry.abstain), an answer only after a line naming the
        closest listed tool and why it does not fit. Built once for a tool set."""
        tools, made = self._grammars
        if tools is not self.tools:  # tools added (or the set replaced): made anew
            self._grammars = tools, made = self.tools, {}
        if abstain not in made:
            made[abstain] = self._make_retry_grammar(abstain)
        return made[abstain]

    def _make_retry_grammar(self, abstain: bool) -> str | None:
        mode, retry = self.mode, self.config.retry
        if not (retry.abstain if abstain else retry.grammar) or not isinstance(mode, TextExchange):
            return None
        capabilities = getattr(self.backend, "capabilities", None)
        if capabilities is None or not capabilities.grammar or not self.tools:
            return None
        # no more call lines than the loop runs: the rest would be refused (max_calls_per_reply)
        most = self.config.max_calls_per_reply
        if not abstain:  # constrained mode holds every reply to the grammar already
            return None if needs_of(mode).grammar else reply_grammar(self.tools, max_calls=most)
        before, after = mode.prompts.template("retry_abstain_line").template.split("$tool")
        return reply_grammar(self.tools, max_calls=most, abstain=(before, after))

    def start_record(self, task: str) -> dict[str, Any]:
        """The first trace line of a run of ``task`` on this agent (trace.start_record), the
        next question of its conversation."""
        return start_record(
            task=task,
            tools=list(self.tools),
            max_steps=self.config.max_steps,
            chat_format=self.config.format.name,
            mode=self.mode.name,
            conversation=self.conversation_id,
            question=self.question + 1,
        )


class QuestionRun:
    """One question of an Agent's conversation, asked: the loop (query -> parse -> dispatch ->
    observe -> append, until an answer or a limit), its steps, counters and retry memory. The
    Agent makes one per :meth:`Agent.run`; nothing of it outlives the question but its Result."""

    def __init__(self, agent: Agent, task: str):
        self.agent, self.config, self.mode, self.task = agent, agent.config, agent.mode, task
        self.steps: list[Step] = []
        self.usage, self.started, self.spent = Usage(), time.monotonic(), 0
        self.bad_in_a_row = 0  # unusable replies in a row (max_format_errors)
        self.same_in_a_row = 0  # see _count_repeats
        self.failed_in_a_row = 0  # replies in a row with a call that failed (max_call_errors)
        self.last_calls: list[tuple[str, Any]] | None = None
        self.retrying = Retrying(
            self.config.retry,
            agent.tools,
            task,
            self.mode.prompts,
            agent.retry_grammar,
            self._first_tokens,
            self._sketch,
            self._judge,
        )
        # a mode whose question begins after calls someone else ran (the proxy's client) says
        # what they returned: an answer right after them is "right after calls" too
        self.retrying.results_came(getattr(self.mode, "results_before", ()))
        # an answer may say what ran in an earlier question, or ran as the proxy's client's call
        self.retrying.ran.update(agent._ran, getattr(self.mode, "ran_before", ()))

    def run(self, trace: TraceWriter) -> Result:
        """Ask until an answer or a limit; every step is traced and handed to ``on_step`` as it ends."""
        error: BaseException | None = None
        traced = 0
        try:
            while True:
                self._check_limits()
                try:
                    self._step()
                finally:  # a step that ends the run is traced and reported too
                    for step in self.steps[traced:]:
                        trace.step(step)
                        if self.agent.on_step:
                            self.agent.on_step(step)
                    traced = len(self.steps)
        except Stop as stop:
            reason, answer = stop.reason, stop.text if isinstance(stop, Answered) else None
        except BackendTimeout as exc:
            if isinstance(exc, RunTimeLimit) or self._time_up():
                reason, answer = "time_limit", None  # the request was cut to the run's time limit
            else:
                log.info(
                    "the backend timed out after %d steps; the run ends with backend_error: %s", len(self.steps), exc
                )
                reason, answer, error = "backend_error", None, exc
        except BackendError as exc:
            log.info("the backend failed after %d steps; the run ends with backend_error: %s", len(self.steps), exc)
            reason, answer, error = "backend_error", None, exc
        elapsed = time.monotonic() - self.started
        return Result(answer, reason, self.steps, self.usage, elapsed, error, self.mode.transcript(), self.mode.name)

    def _step(self) -> Step:
        step = Step(len(self.steps) + 1, "")
        once = self.retrying.options_for_next()  # a retry's grammar or temperature, this request only
        if once:
            step.retry = RetryFacts("grammar" in once, once.get("temperature"), once.get("seed"), lead=once.get("lead"))
        once.update(self.retrying.opening(step))  # the odds' lead, this request only
        # every request of the query ends by the run's time limit (its timeouts cut to the time left)
        with self._deadline(), self._once(once):
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
            self.last_calls = None  # a reply in between: the calls after it are not "in a row"
            observation = self.retrying.format_error(step, err.observation)
            self._claim_after_all(step)
            if not step.rewound:  # a rewound repeat is not written: asked again from before it
                self.mode.reject(step, observation)
            if self.bad_in_a_row >= self.config.max_format_errors:
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
        step.outcomes = cap_outputs(step.outcomes, self.config.step_observation_limit)
        step.notes = notes + [
            note
            for check in self.config.checks
            if hasattr(check, "on_step")
            for note in check.on_step(self._view(), step)
        ]
        step.notes += self.retrying.calls_failed(step)
        if step.outcomes and all(o.error in RULED_OUT for o in step.outcomes):
            self._claim_after_all(step)
        if not step.rewound:
            mode.observe(step, step.notes)
        self._count_repeats(step)
        self._count_failures(step)
        return step

    def _answer(self, step: Step) -> None:
        """A final answer: sent back when it quotes the feedback (a retry) or a check refuses it,
        else the question ends with it."""
        assert step.reply is not None
        answer = step.reply.answer if step.reply.answer is not None else step.reply.thought.strip()
        if self._may_take_back(step) and self.retrying.claimed(step, answer):
            self.last_calls = None
            return  # kept out of the conversation: the next reply is begun with the call it claims
        again = self.retrying.send_back(step, answer)
        if again is not None:
            step.sent_back = SentBack("retry", again)
        for check in (c for c in self.config.checks if hasattr(c, "on_answer")):
            if step.sent_back is not None:
                break
            sent = check.on_answer(self._view(), answer)
            if sent:
                step.sent_back = sent if isinstance(sent, SentBack) else SentBack(check.name, sent)
        if step.sent_back is not None:
            self.last_calls = None
            self.mode.reject(step, step.sent_back.text)
            return
        self.mode.answer(step)
        raise Answered(answer)

    # -- pieces -----------------------------------------------------------------------------
    def _claim_after_all(self, step: Step) -> None:
        """A reply begun as the call an answer claimed (Retrying's claims) that cannot be used: it
        is kept out, and the answer that claimed the call ends the question after all, where the
        mode can still take the reply back (nothing of it went to anyone)."""
        claim = self.retrying.claim_for(step)
        if claim is None or not self._may_take_back(step, last_step_ok=True):
            return
        kept, answer = claim
        facts(step).rewound = True
        self.mode.answer(kept)
        raise Answered(answer)

    def _may_take_back(self, step: Step, *, last_step_ok: bool = False) -> bool:
        """Whether a reply may be kept out of the conversation (Retrying's claims): a reply may
        follow it (unless ``last_step_ok``), in a mode that can begin one and has shown nothing
        of this reply to anyone yet."""
        mode = self.mode
        return (
            (last_step_ok or step.index < self.config.max_steps)
            and isinstance(mode, TextExchange)
            and mode.can_lead()
            and mode.can_take_back()
        )

    def _first_tokens(self, k: int) -> tuple[tuple[str, float], ...]:
        """The next reply's likeliest first tokens (Retrying's odds): asked of a backend with
        ``token_probs`` in the text protocol without a grammar (the lead must be free to
        follow), else none. The request's tokens count in the question's usage."""
        mode = self.mode
        if (
            not isinstance(mode, TextExchange)
            or not mode.can_lead()
            or not capabilities_of(self.agent.backend).token_probs
        ):
            return ()
        return self._aside(lambda: mode.first_tokens(k)).top_tokens

    def _sketch(self, lead: str) -> str:
        """The next reply begun with ``lead``, asked and not written (Retrying's verify), where the
        first tokens can be had; else "". Its tokens count in the question's usage."""
        mode = self.mode
        if not isinstance(mode, TextExchange) or not mode.can_lead():
            return ""
        return self._aside(lambda: mode.sketch(lead, self._reply_budget())).text  # the reply the lead brings, whole

    def _judge(self, system: str, question: str) -> tuple[tuple[str, float], ...]:
        """The likeliest first tokens of the model's answer to a question outside the conversation
        (Retrying's verify), on a backend with ``token_probs``; else none."""
        mode = self.mode
        if not isinstance(mode, TextExchange) or not capabilities_of(self.agent.backend).token_probs:
            return ()
        return self._aside(lambda: mode.judge_tokens(system, question, VERIFY_TOKENS)).top_tokens

    def _aside(self, ask: Callable[[], Completion]) -> Completion:
        """A request a retry asks beside the replies: it ends by the question's time limit, and
        its tokens count in the question's usage."""
        with self._deadline():
            completion = ask()
        self.usage += completion.usage
        return completion

    def _deadline(self) -> AbstractContextManager[None]:
        """The requests made in it end by the question's time limit (request_deadline)."""
        max_seconds = self.config.max_seconds
        return request_deadline(None if max_seconds is None else self.started + max_seconds)

    @contextmanager
    def _once(self, options: dict[str, Any]) -> Iterator[None]:
        """``options`` on the next request only: the mode reads the Agent's request options
        (the same mapping its context holds) when it asks."""
        if not options:
            yield
            return
        held = self.agent.backend_options
        saved = dict(held)
        held.update(options)
        try:
            yield
        finally:
            held.clear()
            held.update(saved)

    def _count_repeats(self, step: Step) -> None:
        """End the run (``repeated``) once ``max_repeats`` replies in a row made the same calls,
        after the last of them ran: a model that sends back what it sent before, whatever the
        results said, is looping (opt-in: by default the other limits end such a run)."""
        assert step.reply is not None
        calls = [(c.name, c.args) for c in step.reply.calls]
        self.same_in_a_row = self.same_in_a_row + 1 if calls == self.last_calls else 1
        self.last_calls = calls
        if self.config.max_repeats is not None and self.same_in_a_row >= self.config.max_repeats:
            raise Repeated()

    def _count_failures(self, step: Step) -> None:
        """End the run (``call_errors``) once ``max_call_errors`` replies in a row had a call that
        failed, after its results went back (opt-in: a reply whose calls all ran breaks the row)."""
        self.failed_in_a_row = self.failed_in_a_row + 1 if step.call_failed else 0
        limit = self.config.max_call_errors
        if limit is not None and self.failed_in_a_row >= limit:
            raise CallErrors()

    def _view(self) -> RunView:
        agent = self.agent
        return RunView(self.task, tuple(self.steps), agent.tools, tuple(agent.shown), self.mode.prompts)

    def _refuse_extra_calls(self, step: Step) -> list[Note]:
        """Keep the first ``max_calls_per_reply`` calls of the reply; the others are refused in
        one note."""
        assert step.reply is not None  # called once the reply parsed
        calls, limit = step.reply.calls, self.config.max_calls_per_reply
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
        max_tokens, reply_tokens = self.config.max_tokens, self.config.reply_tokens
        if max_tokens is None:
            return reply_tokens
        return max(1, min(reply_tokens, max_tokens - self.spent))

    def _time_up(self) -> bool:
        max_seconds = self.config.max_seconds
        return max_seconds is not None and time.monotonic() - self.started >= max_seconds - 0.05

    def _check_limits(self, *, before_model: bool = True) -> None:
        config = self.config
        if config.max_seconds is not None and time.monotonic() - self.started >= config.max_seconds:
            raise TimeLimit()
        if config.max_tokens is not None and self.spent >= config.max_tokens:
            raise TokenBudget()
        if before_model and len(self.steps) >= config.max_steps:
            raise MaxSteps()

    def tool_timeout_left(self) -> float | None:
        """The timeout for the next tool call: ``tool_timeout``, cut to the time the run has left."""
        max_seconds, timeout = self.config.max_seconds, self.config.tool_timeout
        if max_seconds is None:
            return timeout
        left = max(0.01, max_seconds - (time.monotonic() - self.started))
        return left if timeout is None else min(timeout, left)
