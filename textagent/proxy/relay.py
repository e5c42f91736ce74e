"""The proxy's mode: the client's conversation asked of the upstream in the text protocol, on the
Agent's loop, whose format-error budget is the repair budget (``max_format_errors =
max_repairs + 1``; the mode counts nothing itself).

Nothing runs here (the client runs its tools). Each reply is read by one ReplyStream, whose events
go to the client as they come (the answer's text; each call as soon as it is complete and valid),
and judged (judge.py): a usable reply ends the run (calls ``submitted``, or the ``answer``); one
that cannot be used is a FormatError, its feedback written as the text mode writes it, and a reply
cut by max_tokens is not asked again (``format_errors``). ``ended`` makes the client's Answer of
how the run ended (answering.py builds the mode and the loop for one request).
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
from ..protocol import AnswerText, CutHere, ParseError, Reply, ReplyStream, ToolCall, answer_in, words_of
from ..protocol.stream import calls_before_error
from ..steps import Result, Step
from ..stops import FormatErrors
from . import judge
from .answer import Answer
from .convert import ChatRequest
from .errors import Cancelled, ModelFailed

__all__ = ["RelayMode"]


@dataclass
class _Reading:
    """One reply: its reader, what came of it and how it was judged."""

    lead: str  # the prefill this reply continues ("" after the first)
    skip: str  # the answer text the prefill holds already (the client has it)
    stream: ReplyStream
    calls: bool  # its calls go to the client as each is complete
    before: int  # calls the client had before this reply
    repeats: set[tuple[str, str]]  # calls sent, as the client runs them
    begun: bool  # the lead is the loop's (a retry's odds), not the client's: the conversation lacks it
    seen: int = 0  # calls of the reply judged
    stop_at: int | None = None  # where the reply was stopped after a call
    failures: list[str] = field(default_factory=list)  # observations on its calls that failed
    text: str = ""  # the reply as read: the prefill, then what was kept of the completion
    # how it was judged: what the client gets if the run ends with it
    reply: Reply | None = None  # as read (None: it did not parse)
    length: bool = False  # cut by max_tokens
    valid: list[dict[str, Any]] = field(default_factory=list)  # its valid calls
    submit: list[dict[str, Any]] | None = None  # the calls the client gets now


class RelayMode(TextExchange):
    """The proxy's text-protocol turn on the Agent's loop (see the module's docstring):
    ``start`` writes the client's turns, ``query`` reads the reply through one ReplyStream and
    forwards its events, ``parse`` judges it."""

    name = "proxy"
    needs = Needs()
    reading: _Reading  # the reply asked last (query), or the one the run ends with (answer)

    def __init__(
        self,
        request: ChatRequest,
        turns: list[dict[str, str]],
        *,
        grammar: str | None,
        cancelled: threading.Event,
        on_content: Callable[[str, int], Any] | None = None,
        on_call: Callable[[dict[str, Any], int], Any] | None = None,
    ):
        super().__init__()
        self.request, self.turns, self.grammar = request, turns, grammar
        self.cancelled, self.on_call = cancelled, on_call
        self.prefill = turns[-1]["content"] if turns[-1]["role"] == "assistant" else ""
        self.out = Answer(None, [], "stop")
        self.written: list[dict[str, str]] = []  # the turns after the client's: replies and feedback
        self.streams = on_content is not None and request.format is None and request.tool_choice in ("auto", "none")
        self.streams_calls = on_call is not None and request.tool_choice != "none"
        self.repairs = 0  # the replies sent back before the one asked now (its step's index - 1)
        self.send = None if on_content is None else (lambda piece: on_content(piece, self.repairs))
        self.rejected = 0  # the step last sent back
        self.readings: dict[int, _Reading] = {}  # each step's reply as read
        self.results_before = request.last_results  # what the first reply answers (Retrying's errors)
        self.ran_before = request.called_tools  # what an answer may say ran (Retrying's claims)

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
        """Send the reply back with ``feedback`` (a repair: the loop's budget says whether the
        model is asked again; if not, :func:`answer` takes it back as not sent)."""
        kept, lead = self._kept(step), self.reading.lead
        self.written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
        prefilled = lead and not self.reading.begun  # the client's prefill is in the prompt already
        if prefilled:
            self.conversation.messages.pop()
        self._append(step, kept[len(lead) :] if prefilled else kept, [feedback])
        if prefilled:
            self.conversation.messages[-2]["content"] = kept
        self.rejected = step.index

    def answer(self, step: Step) -> None:
        """The run's last reply: the client gets its calls, or its content (no protocol keyword;
        JSON under response_format)."""
        self.reading = self.readings.get(step.index, self.reading)  # a reply kept out, taken after all
        reading, out = self.reading, self.out
        step.reply = reading.reply  # as read (None: the streamed answer's rest did not parse)
        self.written.append({"role": "assistant", "content": self._kept(step)})
        out.turns = self.written
        length = step.finish_reason == "length"
        if reading.submit is not None:
            out.calls, out.content, out.finish_reason = reading.submit, None, "length" if length else "tool_calls"
            return
        reply = reading.reply
        content = judge.content_for(reply, self.request) if reply is not None else reading.skip + reading.stream.sent
        skip = reading.skip
        out.content = content[len(skip) :] if skip and content.startswith(skip) else content
        out.finish_reason = "length" if length else "stop"
        piece = reading.stream.rest(out.content) if reading.stream.release else out.content
        if self.send is not None and piece:
            self.send(piece)

    # -- asking -------------------------------------------------------------------------------------
    def can_lead(self) -> bool:
        """The odds may begin the first reply unless the client's prefill does (or a grammar holds it)."""
        return super().can_lead() and not self.prefill

    def can_take_back(self) -> bool:
        """Not a reply whose answer the client's stream has begun to show, nor one after calls the
        client has already."""
        return not self.reading.stream.sent and not self.out.calls

    def stop(self) -> list[str]:
        return [*super().stop(), *self.request.stop]  # the text or constrained mode's, and the client's

    def query(self, step: Step, max_tokens: int) -> Completion:
        if self.cancelled.is_set():  # the client went away: nothing more is sent upstream
            raise Cancelled()
        tools, out = self.ctx.tools, self.out
        self.repairs = step.index - 1
        # the first reply continues the client's prefill; a reply a retry begins (the odds' call
        # keyword, the call an answer claimed) continues the retry's lead
        prefilled = step.index == 1 and bool(self.prefill)
        begun = "" if prefilled else self.ctx.options.get("lead", "")
        lead = self.prefill if prefilled else begun
        skip = answer_in(lead, tools)
        release = bool(self.streams and self.send and not out.calls)
        stream = ReplyStream(tools, prefix=lead, calls=bool(tools), answers=True, release=release, skip=skip)
        # a prefill holding an answer: a call after it ends the answer, none is streamed
        calls = self.streams_calls and not skip
        keys = {judge.call_key(c) for c in out.calls}
        reading = _Reading(lead, skip, stream, calls, len(out.calls), keys, bool(begun))
        self.reading = self.readings[step.index] = reading

        def on_text(text: str) -> bool:
            return self.cancelled.is_set() or self._events(reading, stream.feed(text))

        options = {**self.options(), "stream": True, "on_text": on_text}
        options.pop("lead", None)  # the odds' lead goes in as ``begun`` (a client's prefill is in the conversation)
        completion = complete(
            self.ctx, self.conversation, stop=self.stop(), max_tokens=max_tokens, lead=begun, **options
        )
        if self.cancelled.is_set():
            raise Cancelled()
        text = completion.text
        if reading.stop_at is not None and completion.finish_reason == "early_stop":
            text = text[: reading.stop_at]
        reading.text = lead + stream.kept(text)
        return completion

    def _events(self, reading: _Reading, events: list) -> bool:
        """The reader's events, forwarded: answer text, each complete call that is valid. True:
        stop reading (the reply may be cut there)."""
        for event in events:
            if isinstance(event, AnswerText):
                assert self.send is not None
                self.send(event.piece)
            elif isinstance(event, CutHere):
                return True
            elif reading.calls and self._take(event.call, reading):
                reading.stop_at = event.end
                return True
        return False

    def _take(self, call: ToolCall, reading: _Reading) -> bool:
        """A call of the reply complete: the client gets it at once when valid. True: read no more."""
        out, limit = self.out, None if self.request.parallel else 1
        if limit is not None and reading.seen >= limit:
            return True
        reading.seen += 1
        valid, failure = judge.judge_call(call, self.ctx.tools)
        if valid is None:
            reading.failures.append(failure)
        elif judge.call_key(valid) not in reading.repeats and len(out.calls) < judge.MAX_CALLS_PER_REPLY:
            reading.repeats.add(judge.call_key(valid))  # a repair may repeat an accepted call, keys in any order
            out.calls.append(valid)  # ... and a reply the same call twice
            assert self.on_call is not None
            self.on_call(valid, self.repairs)
        # the cap is the answer's, repairs included
        return len(out.calls) >= judge.MAX_CALLS_PER_REPLY or (limit is not None and reading.seen >= limit)

    # -- judging --------------------------------------------------------------------------------------
    def parse(self, completion: Completion, step: Step) -> Reply:
        """The reply the run ends with (its calls, which the client gets, or the answer), or
        FormatError with the feedback; FormatErrors (the run ends) for an unusable reply cut by
        max_tokens: it is not asked again with the same budget."""
        reading, tools, out = self.reading, self.ctx.tools, self.out
        length = completion.finish_reason == "length"
        reply, unparsed = self._read(reading.text, step, length)
        step.reply = reading.reply = reply
        reading.length = length
        if out.calls:  # the client has calls: they stay, and only what failed goes back
            feedback = self._after_calls(reply, unparsed, step)
            if feedback is None or length or len(out.calls) >= judge.MAX_CALLS_PER_REPLY:
                return self._submit(step, out.calls, feedback)
            raise FormatError(feedback, step.parse_error)
        feedback, valid = (unparsed, []) if reply is None else judge.problem(self.request, reply, tools)
        if reading.stream.sent:
            feedback, valid = None, []  # the client has this answer's start: it is the answer
        reading.valid = valid
        if feedback is None and not valid:
            return reply if reply is not None and reply.is_final else Reply([], "", "")
        if feedback is None or len(valid) >= judge.MAX_CALLS_PER_REPLY:  # full: a repair could add no call
            _accepted(step, valid)
            return self._submit(step, valid, feedback)
        if length:
            _unsent(step, feedback)
            raise FormatErrors()
        if valid:  # they are kept (as streaming keeps them), only the others go back
            assert reply is not None
            out.calls = valid
            _accepted(step, valid)
            feedback = judge.committed_feedback(valid, judge.judge_calls(reply.calls, tools, set())[1], None)
        assert feedback is not None
        raise FormatError(feedback, step.parse_error)

    def _read(self, text: str, step: Step, length: bool) -> tuple[Reply | None, str | None]:
        """The reply ``text`` holds (from its reader: not parsed again), or the feedback on why it
        does not parse. With no tools nothing is a call: a line "Tool: a hammer" is words."""
        tools, reading = self.ctx.tools, self.reading
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
                if self._take(call, reading):
                    break
        return reply, None

    def _after_calls(self, reply: Reply | None, unparsed: str | None, step: Step) -> str | None:
        """The feedback on a reply once the client has calls: its failures, told which calls
        were accepted; None when nothing failed (an answer, or nothing more)."""
        reading, out = self.reading, self.out
        if not reading.calls and reply is not None:  # not streamed: this reply's calls are judged now
            room = judge.MAX_CALLS_PER_REPLY - len(out.calls)
            calls = reply.calls if self.request.parallel else []
            more, failed = judge.judge_calls(calls, self.ctx.tools, reading.repeats, room)
            out.calls += more
            reading.failures += failed
        _accepted(step, out.calls[reading.before :], streamed=True)
        return judge.committed_feedback(out.calls, reading.failures, unparsed)

    def _submit(self, step: Step, calls: list[dict[str, Any]], feedback: str | None) -> Reply:
        """The run ends with ``calls`` for the client (``feedback`` on the reply is not sent)."""
        if feedback is not None:
            _unsent(step, feedback)
        self.reading.submit = calls
        return Reply([ToolCall(c["name"], c["args"], c["id"]) for c in calls], None, "")

    def ended(self, result: Result) -> Answer:
        """The client's Answer of how the run ended: the reply usable (calls or content), or no
        reply could be used (format_errors): the calls the client has or the last reply's valid
        ones; else an error where ``tool_choice`` or ``response_format`` demanded something; else
        the reply's words."""
        out, reading, request = self.out, self.reading, self.request
        out.attempts, out.usage, out.repairs = result.steps, result.usage, max(0, len(result.steps) - 1)
        if result.error is not None:
            raise result.error
        if result.stop_reason != "format_errors":
            return out
        last = out.attempts[-1]
        if self.rejected == last.index:  # its feedback was not sent: the repairs were spent
            del self.written[-2:]
            last.extra["feedback_sent"] = False
        out.turns = [*self.written, {"role": "assistant", "content": self._kept(last)}]
        if out.calls or reading.valid:
            if not out.calls:
                _accepted(last, reading.valid)
            out.calls = out.calls or reading.valid
            out.content, out.finish_reason = None, "length" if reading.length else "tool_calls"
            return out
        error = request.not_met(out.repairs)
        if error is not None and not (reading.length and request.format is not None):
            raise ModelFailed(error, out)
        out.content, out.finish_reason = words_of(reading.text, reading.reply), "length" if reading.length else "stop"
        if not out.content:
            # an OpenAI endpoint does not fail a request over what the model wrote: the client gets
            # an empty message (its agent goes on), the failure is in the trace and a response header
            out.failure = f"the model wrote no usable reply after {out.repairs} repairs"
        elif self.send is not None:
            self.send(out.content)
        return out

    def _kept(self, step: Step) -> str:
        """The reply as it enters the conversation: read (prefill, cut), up to an invented observation."""
        return kept_text(Step(step.index, self.reading.text, reply=step.reply))


def _accepted(attempt: Step, calls: list[dict[str, Any]], streamed: bool = False) -> None:
    """Note on ``attempt`` the calls of it the client got (``streamed``: each as soon as it was complete)."""
    if calls:
        attempt.extra["accepted"] = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls]
        if streamed:
            attempt.extra["streamed"] = True


def _unsent(attempt: Step, feedback: str) -> None:
    """Note the feedback on a reply that was not sent back (the repairs were spent, or max_tokens cut it)."""
    attempt.observations.append(feedback)
    attempt.extra["feedback_sent"] = False
