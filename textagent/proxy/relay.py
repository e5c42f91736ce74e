"""The proxy's mode: the client's conversation asked of the upstream in the text protocol, on
the Agent's loop.

Nothing runs here (the client runs its tools): a reply is read, its calls validated, and a reply
that cannot be used goes back to the model with textagent's feedback, through the same writer,
stop words and step records as the text mode. The repair budget is the loop's format-error
budget (``max_format_errors = max_repairs + 1``); the loop ends with ``submitted`` when the reply
can be used (or is cut by max_tokens: it is not asked again with the same budget), with
``format_errors`` when the repairs are spent, and :func:`repair.answer` makes the client's
answer of how it ended. What is judged and how is worded lives in repair.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..backends.base import Completion
from ..modes import Conversation, FormatError, Needs, fixed_part
from ..modes.base import complete
from ..modes.text import TextExchange, kept_text
from ..protocol import AnswerText, CutHere, ParseError, Reply, ReplyStream, ToolCall
from ..protocol.stream import calls_before_error
from ..steps import Step
from ..stops import Submitted
from . import repair
from .convert import ChatRequest
from .errors import Cancelled, ModelFailed
from .upstream import Upstream

__all__ = ["RelayMode", "answer"]


@dataclass
class _Reading:
    """One reply as it was asked and read: its one reader (ReplyStream) and what came of it."""

    lead: str  # the prefill this reply continues ("" after the first)
    skip: str  # the answer text the prefill holds already (the client has it)
    stream: ReplyStream
    calls: bool  # its calls go to the client as each is complete
    seen: int = 0  # calls of the reply judged
    stop_at: int | None = None  # where the reply was stopped after a call
    failures: list[str] = field(default_factory=list)  # observations on streamed calls that failed
    repeats: set[tuple[str, str]] = field(default_factory=set)  # calls sent, as the client runs them
    before: int = 0  # calls the client had before this reply
    text: str = ""  # the reply as read: the prefill, then what was kept of the completion


@dataclass
class _Verdict:
    """How the last reply was judged, for the answer when the loop ends without a usable one."""

    text: str
    reply: Reply | None
    valid: list[dict[str, Any]]
    feedback: str | None
    length: bool


class RelayMode(TextExchange):
    """The proxy's text-protocol turn on the Agent's loop (see the module's docstring)."""

    name = "proxy"
    needs = Needs()

    def __init__(
        self,
        request: ChatRequest,
        turns: list[dict[str, str]],
        *,
        grammar: str | None,
        stop: Sequence[str],
        max_repairs: int,
        cancelled: threading.Event,
        on_content: Callable[[str, int], Any] | None = None,
        on_call: Callable[[dict[str, Any], int], Any] | None = None,
    ):
        super().__init__()
        self.request, self.turns, self.grammar, self.stop_words = request, turns, grammar, list(stop)
        self.max_repairs, self.cancelled, self.on_call = max_repairs, cancelled, on_call
        self.prefill = turns[-1]["content"] if turns[-1]["role"] == "assistant" else ""
        self.out = repair.Answer(None, [], "stop")
        self.written: list[dict[str, str]] = []  # the turns after the client's: replies and feedback
        self.streams = on_content is not None and request.format is None and request.tool_choice in ("auto", "none")
        self.streams_calls = on_call is not None and request.tool_choice != "none"
        self.send = None if on_content is None else (lambda piece: on_content(piece, self.out.repairs))
        self.reading: _Reading | None = None
        self.verdict: _Verdict | None = None
        self.cut = False  # the last reply was cut by max_tokens and could not be used: not asked again

    # -- the conversation -------------------------------------------------------------------------
    def start(self, task: str, examples: Sequence[Any]) -> None:
        """The client's conversation as it is (no system prompt or examples of textagent's)."""
        fmt = self.ctx.format
        first = next((i for i, t in enumerate(self.turns) if t["role"] == "user"), None)
        fixed = 0
        if first is not None:  # the client's system prompt and tools: the same in each request
            fixed = fixed_part(fmt, self.turns[: first + 1])
        prompt = fmt.render(self.turns)
        if prompt[:fixed] != fmt.render(self.turns[: first + 1] if first is not None else self.turns)[:fixed]:
            fixed = 0
        self.conversation = Conversation([dict(t) for t in self.turns], prompt, fixed)

    def reject(self, step: Step, feedback: str) -> None:
        """Send the reply back with ``feedback`` (a repair), or note it unsent when the repairs are
        spent (the loop ends: its format-error budget is the repair budget)."""
        if self.out.repairs >= self.max_repairs:
            repair._unsent(step, feedback)
            return
        assert self.reading is not None
        kept = self._kept(step)
        self.written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
        lead = self.reading.lead
        if lead:  # the prefill is in the prompt already: the reply goes on from it
            self.conversation.messages.pop()
        self._append(step, kept[len(lead) :] if lead else kept, [feedback])
        if lead:
            self.conversation.messages[-2]["content"] = kept
        self.out.repairs += 1

    def answer(self, step: Step) -> None:
        """A usable answer: the client's content (no protocol keyword; JSON under response_format)."""
        reading, out, verdict = self.reading, self.out, self.verdict
        assert reading is not None and verdict is not None
        step.reply = verdict.reply  # as read (None: the streamed answer's rest did not parse)
        self.written.append({"role": "assistant", "content": self._kept(step)})
        out.turns = self.written
        stream = reading.stream
        if verdict.reply is not None:
            content = repair._content(verdict.reply, self.request)
        else:
            content = reading.skip + stream.sent
        skip = reading.skip
        out.content = content[len(skip) :] if skip and content.startswith(skip) else content
        out.finish_reason = "length" if step.finish_reason == "length" else "stop"
        piece = stream.rest(out.content) if stream.release else out.content
        if self.send is not None and piece:
            self.send(piece)

    # -- asking -------------------------------------------------------------------------------------
    def query(self, step: Step, max_tokens: int) -> Completion:
        if self.cancelled.is_set():  # the client went away: nothing more is sent upstream
            raise Cancelled()
        tools, out = self.ctx.tools, self.out
        lead = "" if self.reading is not None else self.prefill  # only the first reply continues the prefill
        skip = repair._prefilled_answer(lead, tools)
        release = bool(self.streams and self.send and not out.calls)
        stream = ReplyStream(tools, prefix=lead, calls=bool(tools), answers=True, release=release, skip=skip)
        # a prefill holding an answer: a call after it ends the answer, none is streamed
        reading = _Reading(lead, skip, stream, self.streams_calls and not skip, before=len(out.calls))
        reading.repeats = {repair._call_key(c) for c in out.calls}  # sent before this reply
        self.reading = reading

        def on_text(text: str) -> bool:
            return self.cancelled.is_set() or self._events(reading, stream.feed(text))

        options: dict[str, Any] = {**self.options(), "stream": True, "on_text": on_text}
        if self.grammar:
            options["grammar"] = self.grammar
        completion = complete(self.ctx, self.conversation, stop=self.stop_words, max_tokens=max_tokens, **options)
        if self.cancelled.is_set():
            raise Cancelled()
        text = completion.text
        if reading.stop_at is not None and completion.finish_reason == "early_stop":
            text = text[: reading.stop_at]
        reading.text = lead + stream.kept(text)
        return completion

    def _events(self, reading: _Reading, events: list) -> bool:
        """What the reply's reader found in its newest text, forwarded to the client: answer text,
        each complete call that is valid. True: stop reading (the reply may be cut there)."""
        for event in events:
            if isinstance(event, AnswerText):
                assert self.send is not None
                self.send(event.piece)
            elif isinstance(event, CutHere):
                return True
            elif reading.calls and self._judge_streamed(event.call, reading):
                reading.stop_at = event.end
                return True
        return False

    def _judge_streamed(self, call: ToolCall, reading: _Reading) -> bool:
        """A call complete in the stream: sent to the client at once when valid. True: stop reading."""
        out, limit = self.out, None if self.request.parallel else 1
        if limit is not None and reading.seen >= limit:
            return True
        reading.seen += 1
        valid, failure = repair._judge(call, self.ctx.tools)
        if valid is None:
            reading.failures.append(failure)
        elif repair._call_key(valid) not in reading.repeats and len(out.calls) < repair.MAX_CALLS_PER_REPLY:
            reading.repeats.add(repair._call_key(valid))  # a repair may repeat an accepted call, keys in any order
            out.calls.append(valid)  # ... and a reply the same call twice
            assert self.on_call is not None
            self.on_call(valid, out.repairs)
        # the cap is the answer's, repairs included
        return len(out.calls) >= repair.MAX_CALLS_PER_REPLY or (limit is not None and reading.seen >= limit)

    # -- reading --------------------------------------------------------------------------------------
    def parse(self, completion: Completion, step: Step) -> Reply:
        """The reply, when it is a usable answer; FormatError (with the feedback) when it goes
        back; Submitted when the client gets its calls, or nothing more is asked."""
        reading, tools = self.reading, self.ctx.tools
        assert reading is not None
        length = completion.finish_reason == "length"
        reply, unparsed = self._read(reading.text, step, length)
        step.reply = reply
        if self.out.calls:  # the client has calls: they stay, and only what failed goes back
            self._after_calls(reply, unparsed, step, length)
        feedback, valid = (unparsed, []) if reply is None else repair._problem(self.request, reply, tools)
        if reading.stream.sent:
            feedback, valid = None, []  # the client has this answer's start: it is the answer
        self.verdict = _Verdict(reading.text, reply, valid, feedback, length)
        if feedback is None:
            if valid:  # a reply cut by max_tokens says so: finish_reason "length"
                self._submit(step, valid, length)
            # an answer: the loop ends with it (the reply itself, when the streamed answer came
            # before calls, goes back on the step in answer())
            return reply if reply is not None and reply.is_final else Reply([], "", "")
        if length:  # a reply cut by max_tokens is not asked again with the same budget
            repair._unsent(step, feedback)
            self.cut = True
            raise Submitted()
        if len(valid) >= repair.MAX_CALLS_PER_REPLY:  # the answer is full: a repair could add no call
            repair._unsent(step, feedback)
            self._submit(step, valid, length)
        if valid and self.out.repairs < self.max_repairs:
            # some calls are valid: they are kept (as streaming keeps them), only the others go back
            assert reply is not None
            self.out.calls = valid
            repair._accepted(step, valid)
            feedback = repair._committed(self.out, repair._judged(reply.calls, tools, set())[1], None)
            assert feedback is not None
        raise FormatError(feedback, step.parse_error)

    def _read(self, text: str, step: Step, length: bool) -> tuple[Reply | None, str | None]:
        """The reply ``text`` holds (from its reader: not parsed again), or the feedback on why it
        does not parse. With no tools nothing is a call: a line "Tool: a hammer" is words."""
        tools, reading = self.ctx.tools, self.reading
        assert reading is not None
        try:
            reply = reading.stream.reply(text[len(reading.lead) :])
        except ParseError as err:
            step.parse_error = err
            if length and not reading.calls and tools:
                # cut by max_tokens: the calls settled before the first unreadable line (a bad
                # line before the cut, or the cut line) are the reply, as streaming takes them
                # (an upstream that did not stream: read for them now)
                before_cut = reading.stream.calls_given or calls_before_error(text, tools)
                if before_cut:
                    return Reply(list(before_cut), None, ""), None
            return None, prompts.feedback(prompts.parse_feedback(err, tools))
        if reading.calls and reading.stop_at is None:
            for call in reply.calls[reading.seen :]:  # the calls the reply's end completed
                if self._judge_streamed(call, reading):
                    break
        return reply, None

    def _after_calls(self, reply: Reply | None, unparsed: str | None, step: Step, length: bool) -> None:
        """A reply once the client has calls: its failures go back alone, told which were
        accepted; nothing failed (an answer, or nothing more): the calls are the answer."""
        reading, out = self.reading, self.out
        assert reading is not None
        failures = reading.failures
        if not reading.calls and reply is not None:  # not streamed: this reply's calls are judged now
            room = repair.MAX_CALLS_PER_REPLY - len(out.calls)
            more, failed = repair._judged(
                reply.calls if self.request.parallel else [], self.ctx.tools, reading.repeats, room
            )
            out.calls += more
            failures += failed
        feedback = repair._committed(out, failures, unparsed)
        repair._accepted(step, out.calls[reading.before :], streamed=True)
        full = len(out.calls) >= repair.MAX_CALLS_PER_REPLY  # a repair could add no call
        if feedback is None or length or full or out.repairs >= self.max_repairs:
            if feedback is not None:
                repair._unsent(step, feedback)
            out.turns = [*self.written, {"role": "assistant", "content": self._kept(step)}]
            out.content, out.finish_reason = None, "length" if length else "tool_calls"
            raise Submitted()
        raise FormatError(feedback, step.parse_error)

    def _submit(self, step: Step, valid: list[dict[str, Any]], length: bool) -> None:
        out = self.out
        self.written.append({"role": "assistant", "content": self._kept(step)})
        out.turns = self.written
        out.calls, out.finish_reason = valid, "length" if length else "tool_calls"
        repair._accepted(step, valid)
        raise Submitted()

    def _kept(self, step: Step) -> str:
        """The reply as it enters the conversation: read (prefill, cut), up to an invented observation."""
        assert self.reading is not None
        return kept_text(Step(step.index, self.reading.text, reply=step.reply))


def answer(
    upstream: Upstream,
    request: ChatRequest,
    turns: list[dict[str, str]],
    *,
    constrained: bool,
    max_repairs: int,
    slot: int,
    cancelled: threading.Event,
    on_content: Callable[[str, int], Any] | None = None,
    on_call: Callable[[dict[str, Any], int], Any] | None = None,
) -> repair.Answer:
    """Ask until the reply can be used or ``max_repairs`` repairs are spent, on the Agent's loop.
    A conversation ending with an assistant turn is a prefill: the first reply continues it, and
    the content is what the model added to it. ``on_content(piece, repairs)`` gets the answer's
    content in pieces, some while the model writes it; ``on_call(call, repairs)`` each valid call
    as soon as its line is complete (both from the reply's one reader, protocol.ReplyStream): such a call
    stays in the answer, and a later call that fails goes back to the model alone. Raises
    Cancelled when ``cancelled`` is set (the stream to the upstream is closed at its next token),
    BackendError when the upstream fails, ModelFailed when ``tool_choice`` or ``response_format``
    cannot be met."""
    from ..agent import Agent

    tools = request.tools.select(request.function) if request.function else request.tools
    grammar = repair.grammar_for(request, constrained) if upstream.takes_grammar else None
    mode = RelayMode(
        request,
        turns,
        grammar=grammar,
        stop=[*([] if grammar else ["OBSERVATION"]), *upstream.format.stop, *request.stop],
        max_repairs=max_repairs,
        cancelled=cancelled,
        on_content=on_content,
        on_call=on_call,
    )
    options: dict[str, Any] = dict(upstream.options(slot))
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.seed is not None:
        options["seed"] = request.seed
    agent = Agent(
        upstream.backend_for(request.sampling),
        tools,
        mode=mode,
        max_steps=max_repairs + 1,
        max_format_errors=max_repairs + 1,  # the repair budget
        reply_tokens=request.max_tokens or repair.DEFAULT_REPLY_TOKENS,
        chat_format=upstream.format,
        example=None,
        max_calls_per_reply=None,  # the mode collapses repeats and caps the calls itself
        **options,
    )
    result = agent.run(turns[-1]["content"] or "(the client's conversation)")
    out = mode.out
    out.attempts, out.usage = result.steps, result.usage
    if result.error is not None:
        raise result.error
    if result.stop_reason == "format_errors" or mode.cut:
        return _spent(mode)
    return out


def _spent(mode: RelayMode) -> repair.Answer:
    """The answer when the repairs are spent: the last reply's valid calls; else an error where
    ``tool_choice`` or ``response_format`` demanded something; else the reply's words."""
    out, verdict, request = mode.out, mode.verdict, mode.request
    assert verdict is not None and mode.reading is not None
    last = out.attempts[-1]
    out.turns = [*mode.written, {"role": "assistant", "content": mode._kept(last)}]
    finish = "length" if verdict.length else "tool_calls"
    if verdict.valid:
        out.calls, out.finish_reason = verdict.valid, finish
        repair._accepted(last, verdict.valid)
        return out
    error = repair._not_met(request, out.repairs)
    if error is not None and not (verdict.length and request.format is not None):
        raise ModelFailed(error, out)
    out.content, out.finish_reason = repair._prose(verdict.text, verdict.reply), "length" if verdict.length else "stop"
    if not out.content:
        # an OpenAI endpoint does not fail a request over what the model wrote: the client gets an
        # empty message (its agent goes on), the failure is in the trace and a response header
        out.failure = f"the model wrote no usable reply after {out.repairs} repairs"
        return out
    if mode.send is not None:
        mode.send(out.content)
    return out
