"""Reading a reply while it grows, once: :class:`ReplyStream`.

A ReplyStream is fed the reply as it arrives and tells, as events, what no later text can
change: a call complete (and where the line that completed it ends), more of an answer's text,
a point where the reply may be cut (what follows would be thrown away); at the end it gives the
:class:`Reply` itself, from what it has read, without a parse of the whole text. The Agent's
early stop (modes.text.EarlyStop) and the proxy's mode (its calls and answer streamed to the
client, its cut, its reply) both read a reply through one.

Its calls come from :class:`CompleteCalls`, at every line break in time linear in the reply:
what is read for good (the lines before the last point the parser reached without looking past
the end of the text) is never read again, the parse goes on from there with the state it had
(protocol.reader.ReadState), and while an object opened in a call is still open each new line
is only scanned for its brackets. ``complete_calls(text)`` answers the same for one text by
parsing it whole (and with probe lines appended).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .error_table import ParseError
from .lines import (
    QUOTE_PREFIX,
    OpenBracket,
    classify,
    may_become_call_text,
    scan,
    stops_gathering,
    unwrap,
    wrong_keyword,
)
from .reader import LineMark, Reader, ReadState
from .types import Reply, ToolCall
from .words import answer_content, read_words, undecided

__all__ = [
    "AnswerText",
    "CallEnds",
    "CompleteCalls",
    "CutHere",
    "ReplyStream",
    "calls_before_error",
    "complete_calls",
]

_MAYBE_CALL = re.compile(r"tool", re.I | re.A)  # keywords are ASCII (PROTOCOL.md §1)
# Lines that would extend a call the reply ends with, if it could be extended: an ARGS line
# after a call without arguments, an object after `ARGS:` (also on the next line).
_PROBES = ('ARGS: {"_": 0}', '{"_": 0}')
# A line that starts another call (decorations as the parser allows them: "- **TOOL:**", "1. tool").
_NEXT_CALL = re.compile(r"^\W*(?:\d+[.)]\s*)?\W*tool\b", re.I | re.A)
_DECIDE_AFTER = 12  # characters of that line enough to tell (decorations included)


def complete_calls(text: str, tools: Any = None) -> list[ToolCall] | None:
    """The calls of ``text`` (complete lines) if it holds at least one and no line that could
    follow would change them; else None.

    "Could change": the last call has no arguments yet (an ``ARGS:`` line may follow), ends with
    ``ARGS:`` (the object may start on the next line, also in a fence), or has an object still
    open (the parse fails). The check asks the parser itself, with probe lines appended.
    """
    if not _MAYBE_CALL.search(text):
        return None
    try:
        reply = Reader(text, tools).read(False)
    except ParseError:
        return None
    if not reply.calls:
        return None
    for probe in _PROBES:
        try:
            again = Reader(text + "\n" + probe, tools).read(False)
        except ParseError:
            continue  # the probe cannot attach to anything: fine
        if again.calls != reply.calls:
            return None
    return reply.calls


def calls_before_error(text: str, tools: Any = None) -> list[ToolCall]:
    """The calls settled before the first line of ``text`` that no later text could make
    readable (and before a cut last line): what streaming would have taken of a reply that
    does not parse as a whole, such as one cut by max_tokens after a bad line."""
    reader, start = CompleteCalls(tools), 0
    taken: list[ToolCall] = []
    nl = text.find("\n")
    while nl != -1 and not reader.never:
        taken = reader.at(text, start, nl) or taken
        start, nl = nl + 1, text.find("\n", nl + 1)
    return list(taken)


class CompleteCalls:
    """``at(text, start, nl)`` at each line break ``nl`` of a growing reply, in order (the new
    line is ``text[start:nl]``): the same as ``complete_calls(text[:nl])`` (a blank line: None),
    each byte read a bounded number of times. ``never`` turns True at a parse error no later
    text can undo (every later answer is None). ``reply(text)``: the Reply of the whole reply
    ``text`` (which goes on from the text given to ``at``), the same as ``parse_reply(text)``,
    read from where the lines read for good end."""

    def __init__(self, tools: Any = None):
        self.tools = tools
        self.never = False
        self._base = 0  # text[:_base] (whole lines) is read for good ...
        self._state = ReadState()  # ... into this
        self._maybe = False  # text[_base:] mentions "tool" (else it holds no call)
        self._open: tuple[list[OpenBracket], bool] | None = None  # an object still open: (stack, quoted)

    def at(self, text: str, start: int, nl: int) -> list[ToolCall] | None:
        if self.never:
            return None
        line = text[start:nl]
        if not line.strip():
            return None  # skipped wherever a look-ahead meets it: nothing changes
        self._maybe = self._maybe or _MAYBE_CALL.search(line) is not None
        if self._open is not None and self._still_open(line):
            return None  # the reply cannot parse yet
        state = self._state
        done = len(state.calls)
        if not done and not self._maybe:
            return None
        pending = text[self._base : nl]
        reader = Reader(pending, self.tools)
        marks: list[LineMark] = []
        before, in_answer = state.mark(), state.answer is not None
        try:
            reader.read_lines(state, marks)
        except ParseError:
            state.roll_back(before)
            if reader.open_at_end is not None:
                self._open = reader.open_at_end
            elif not reader.at_end:
                self.never = True  # an error that more text cannot undo
            return None
        calls = list(state.calls)
        if not calls:
            if reader.observed:
                self.never = True  # everything from the OBSERVATION on is dropped
            self._advance(text, pending, marks, nl)
            return None
        # (after an OBSERVATION the probes are dropped too)
        settled = reader.observed or self._settled(pending, calls[done:], in_answer)
        self._advance(text, pending, marks, nl)
        return calls if settled else None

    def reply(self, text: str, strict: bool = False) -> Reply:
        """The Reply of ``text``, the whole reply (ParseError when it does not parse)."""
        state = self._state
        if len(text) < self._base:  # not the text read so far: read it afresh
            state, base = ReadState(), 0
        else:
            base = self._base
        before = state.mark()
        reader = Reader(text[base:], self.tools)
        try:
            reader.read_lines(state)
            return reader.reply(state, strict)
        finally:
            state.roll_back(before)

    def _still_open(self, line: str) -> bool:
        """An object open at the end of the text so far: does ``line`` leave it open? Else it is
        forgotten (closed, or something else happened) and the text is read again."""
        assert self._open is not None
        stack, quoted = self._open
        if not stops_gathering(line):
            body = line.rstrip()
            quote = QUOTE_PREFIX.match(body) if quoted else None
            if scan(body[quote.end() :] if quote else body, 0, stack, 0) == "ok" and stack:
                return True
        self._open = None
        return False

    def _settled(self, pending: str, calls: list[ToolCall], in_answer: bool) -> bool:
        """No text that could follow changes the calls read: each probe either cannot attach to
        anything or reads the same calls."""
        for probe in _PROBES:
            try:
                again = Reader(pending + "\n" + probe, self.tools).read(False, in_answer=in_answer)
            except ParseError:
                continue  # the probe cannot attach to anything: fine
            if again.calls != calls:
                return False
        return True

    def _advance(self, text: str, pending: str, marks: list[LineMark], nl: int) -> None:
        """Move ``_base`` to the last place of ``pending`` the parser reached without having
        looked past the end of the text, and the state back to what it held there."""
        line, _, mark = [m for m in marks if not m[1]][-1]
        offset = 0
        for _ in range(line):
            offset = pending.find("\n", offset) + 1 or len(pending) + 1
        self._base += offset
        self._state.roll_back(mark)
        self._state.first += line
        self._maybe = _MAYBE_CALL.search(text, self._base, nl) is not None


@dataclass(frozen=True)
class CallEnds:
    """A call of the reply is complete: no later text changes it. ``end``: where the line that
    completed it ends, after its line break (in the text fed, without the prefix)."""

    call: ToolCall
    end: int


@dataclass(frozen=True)
class AnswerText:
    """More of the answer's content (the keywords a model repeats taken off): no later text of the
    reply takes it back."""

    piece: str


@dataclass(frozen=True)
class CutHere:
    """The reply may end at ``at`` (in the text fed, without the prefix): what follows would be
    thrown away. ``after`` is ``"calls"`` (complete calls, then a line that starts no call) or
    ``"answer"`` (an answer, then a call or an OBSERVATION line). Nothing is read after it."""

    at: int
    after: str


Event = CallEnds | AnswerText | CutHere

_DECIDED = 20  # characters of a line after which it cannot turn into a keyword line
_REREAD = 8  # characters of new answer before its content is put together again
_GROWTH = 16  # ... and at least this fraction of the text read so far


class ReplyStream:
    """One reader of one reply as it arrives (see the module's docstring).

    ``feed(text)``, with the reply so far (each time the same text, longer), gives the events of
    what it added, in the order of the text. ``prefix``: what the reply continues (a prefill),
    read first and never in a position. ``calls``: False when no line can be a call (a request
    without tools: every line is words). ``answers``: the reply is read as a final answer is: a
    call or OBSERVATION line after an answer ends the reply (CutHere "answer"; else only complete
    calls cut it, CutHere "calls"). ``release``: the answer's content is given as it comes
    (AnswerText), after ``skip``, content the reader has already (a prefill's answer).

    At the end, ``kept(text)`` is the reply as kept (to its cut) and ``reply(kept)`` its Reply."""

    def __init__(
        self,
        tools: Any = None,
        *,
        prefix: str = "",
        calls: bool = True,
        answers: bool = False,
        release: bool = False,
        skip: str = "",
    ):
        self.prefix, self.calls, self.answers, self.release, self.skip = prefix, calls, answers, release, skip
        self.cut: int | None = None  # where the reply is kept to (in the text fed)
        self.sent = ""  # the answer's content given so far (after skip)
        self.calls_given: list[ToolCall] = []  # the calls complete so far, in order
        self._reader = CompleteCalls(tools)  # each line read once: linear in the reply
        self._at = 0  # where the next line starts (in prefix + text)
        self._ready: int | None = None  # complete calls end here; the next line decides
        # the answer, line by line (the rule the end keeps to as well, so streamed = plain)
        self._answer = False  # an ANSWER line with content came first: the reply is an answer
        self._pending = False  # an ANSWER line came, its content not yet
        self._off = False  # a call came first, or the text went wrong: no answer to release
        self._parts: list[str] | None = None  # the answer's lines, from its ANSWER line's rest
        self._fence = False  # a fence is open (before the answer) / the answer is in one
        self._read = 0  # length of the text the answer's content was last put together from

    # -- feeding --------------------------------------------------------------------------------
    def feed(self, text: str) -> list[Event]:
        """The events of the reply so far, ``text``, since the last feed."""
        if self.cut is not None:
            return []
        text = self.prefix + text if self.prefix else text
        events: list[Event] = []
        nl = text.find("\n", self._at)
        while True:
            if self._ready is not None and self._calls_end(text, nl, events):
                return events
            if nl == -1:
                break
            start, self._at = self._at, nl + 1
            if self._line(text[start:nl], start, events):
                return events
            if self._ready is None and self.calls:
                self._take(self._reader.at(text, start, nl), nl + 1, events)
            nl = text.find("\n", self._at)
        self._tail(text, events)
        return events

    def _take(self, calls: list[ToolCall] | None, end: int, events: list[Event]) -> None:
        """Complete calls up to ``end``: the new ones are given, and the next line decides."""
        if calls is None:
            return
        events.extend(CallEnds(call, max(0, end - len(self.prefix))) for call in calls[len(self.calls_given) :])
        self.calls_given = calls
        self._ready = end

    def _calls_end(self, text: str, nl: int, events: list[Event]) -> bool:
        """After complete calls: does the next line (as far as it has come) start another call?
        Another call keeps the reply going (independent calls come in one reply); anything else
        cuts it there. True when cut."""
        assert self._ready is not None
        begin = self._ready
        while begin < len(text) and text[begin] in " \t\r\n":
            begin += 1
        end = text.find("\n", begin)
        line = text[begin:] if end == -1 else text[begin:end]
        if end == -1 and len(line) < _DECIDE_AFTER:
            return False  # too little of the line yet to tell
        if _NEXT_CALL.match(line):
            self._ready = None  # read on: the next line break after it is read as usual
            return False
        return self._cut_at(self._ready, "calls", events)

    def _cut_at(self, at: int, after: str, events: list[Event]) -> bool:
        if at < len(self.prefix) and after == "answer":
            return False  # an answer within the prefix: the reply has to go on
        self.cut = max(0, at - len(self.prefix))
        events.append(CutHere(self.cut, after))
        return True

    # -- the answer -----------------------------------------------------------------------------
    def _line(self, line: str, start: int, events: list[Event]) -> bool:
        """One complete line for the answer; True when it ends the reply (cut before it)."""
        if not self.answers:
            return False
        if self._ends_answer(line):
            return self._cut_at(start, "answer", events)
        return False

    def _ends_answer(self, line: str) -> bool:
        """The answer's rule for one complete line: a reply is an answer once an ANSWER line has
        content (on it or on a line after it), before any call; a call or OBSERVATION line after
        that ends it (True); one before that makes the reply calls."""
        info = classify(line)
        kind = info.kind
        if not self.calls and kind in ("call", "args"):
            kind = None
        if self._answer:
            if kind in ("call", "obs"):
                return True
            self._add_part(line, kind)
            return False
        if self._parts is None and self.calls and wrong_keyword(line, info):
            self._off, self._pending = True, False  # `CALL: cd ARGS: {...}` before any ANSWER: will not parse
            return False
        if kind == "answer":
            self._pending = True
            if self._parts is None:
                self._parts = [unwrap(line, info)[info.end :]]
            else:
                self._add_part(line, kind)
            if unwrap(line, info)[info.end :].strip():
                self._answer = True
        elif kind in ("call", "args", "obs"):
            self._off, self._pending = True, False
        elif self._pending and line.strip():
            self._add_part(line, kind)
            self._answer = True  # the answer's content began on a line after its keyword
        elif self._parts is not None:
            self._add_part(line, kind)
        elif kind == "fence" and self.calls:
            self._fence = not self._fence  # a fence opened or closed before the answer
        return False

    def _add_part(self, line: str, kind: str | None) -> None:
        if self._parts is None:
            return
        if self.calls and kind == "fence" and self._fence:
            self._fence = False  # closes the fence the answer started in
            return
        self._parts.append(line[:-1] if self.calls and line.endswith("\r") else line)

    def _tail(self, text: str, events: list[Event]) -> None:
        """The last line, still growing: an answer's content known so far is released; a line
        long enough to be a call or OBSERVATION ends the answer."""
        if not self.answers or self._off:
            return
        tail = text[self._at :]
        info = classify(tail) if tail.strip() else None
        kind = info.kind if info is not None else "blank"
        decided = len(tail.lstrip()) >= _DECIDED
        if self._answer and kind in (("call", "obs") if self.calls else ("obs",)) and decided:
            self._cut_at(self._at, "answer", events)
            return
        if not self.release or not (self._answer or kind == "answer"):
            return
        line = tail[:-1] if self.calls and tail.endswith("\r") else tail
        parts, known = self._parts or [], self._at
        if not self._answer and kind == "answer":  # the ANSWER line itself: its text is the answer's
            assert info is not None
            content = unwrap(tail, info)[info.end :]
            if self._parts is None and self.calls and (wrong_keyword(tail, info) or may_become_call_text(content)):
                return  # it is, or may yet be, `ANSWER: cd ARGS: {...}`: a reply that will not parse
            parts = [content] if self._parts is None else [*self._parts, line]
            known = len(text)
        elif kind in ("blank", "fence") and decided:
            closes = self.calls and kind == "fence" and self._fence
            parts, known = (parts if closes else [*parts, line]), len(text)
        self._release(known, parts, events)

    def _release(self, known: int, parts: list[str], events: list[Event]) -> None:
        grown = known - self._read
        # put together again after _REREAD new characters (or a line end), and at least 1/_GROWTH
        # more of the text: each time costs the answer's length, so the times must grow
        # geometrically for the whole to stay linear
        at_line_end = known == self._at and known > 0
        if grown <= 0 or (grown < _REREAD and not at_line_end) or grown < known // _GROWTH:
            return
        self._read = known
        content = answer_content("\n".join(parts).strip())
        last = content.rfind("\n") + 1
        if undecided(content[last:].lstrip(" \t")):
            content = content[:last].rstrip("\n")  # the last line may become a keyword: not yet
        if not content.startswith(self.skip):
            self._off = True
            return
        content = content[len(self.skip) :]
        if content.startswith(self.sent) and len(content) > len(self.sent):
            piece, self.sent = content[len(self.sent) :], content
            events.append(AnswerText(piece))

    def rest(self, content: str) -> str:
        """The piece of the reply's final ``content`` (after ``skip``) not given yet."""
        if content.startswith(self.sent) and len(content) > len(self.sent):
            piece, self.sent = content[len(self.sent) :], content
            return piece
        return ""

    # -- the end --------------------------------------------------------------------------------
    def kept(self, text: str) -> str:
        """The whole reply ``text`` as kept once the model stopped: to the cut, and an answer
        ends before a call or OBSERVATION line (also the last line, too short to judge before)."""
        if self.cut is None and self.answers:
            whole = self.prefix + text if self.prefix else text
            while self._at <= len(whole):
                nl = whole.find("\n", self._at)
                end = len(whole) if nl == -1 else nl
                start, self._at = self._at, end + 1
                if self._ends_answer(whole[start:end]):
                    self._cut_at(start, "answer", [])
                    break
        return text if self.cut is None else text[: self.cut]

    def reply(self, kept: str, strict: bool = False) -> Reply:
        """The Reply of the reply as kept (the prefix and ``kept``), from what was read of it: only
        what no line break had settled is read now. ParseError when it does not parse."""
        whole = self.prefix + kept if self.prefix else kept
        return self._reader.reply(whole, strict) if self.calls else read_words(whole)
