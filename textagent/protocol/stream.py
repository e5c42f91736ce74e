"""Reading a reply while it grows: at each line break, the calls that no later line can change.

``complete_calls(text)`` answers that for one text by parsing it whole (and with probe lines
appended); :class:`CompleteCalls` answers it at every line break of a growing reply in time
linear in the reply: what is read for good (the lines before the last point the parser reached
without looking past the end of the text) is never read again, the parse goes on from there with
the state it had (inside an ANSWER or not, the calls so far), and while an object opened in a
call is still open each new line is only scanned for its brackets. The Agent's early stop
(modes.text.EarlyStop) and the proxy's call-by-call streaming (proxy.watch.CallStream) both read
a reply through it.
"""

from __future__ import annotations

import re
from typing import Any

from .error_table import ParseError
from .lines import QUOTE_PREFIX, scan, stops_gathering
from .reader import Reader
from .types import ToolCall

__all__ = ["CompleteCalls", "calls_before_error", "complete_calls"]

_MAYBE_CALL = re.compile(r"tool", re.I | re.A)  # keywords are ASCII (PROTOCOL.md §1)
# Lines that would extend a call the reply ends with, if it could be extended: an ARGS line
# after a call without arguments, an object after `ARGS:` (also on the next line).
_PROBES = ('ARGS: {"_": 0}', '{"_": 0}')


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
    text can undo (every later answer is None)."""

    def __init__(self, tools: Any = None):
        self.tools = tools
        self.never = False
        self._base = 0  # text[:_base] (whole lines) is read for good
        self._in_answer = False  # ... and ends inside an ANSWER
        self._done: list[ToolCall] = []  # ... holding these calls
        self._maybe = False  # text[_base:] mentions "tool" (else it holds no call)
        self._open: tuple[list, bool] | None = None  # an object still open: (stack, quoted)

    def at(self, text: str, start: int, nl: int) -> list[ToolCall] | None:
        if self.never:
            return None
        line = text[start:nl]
        if not line.strip():
            return None  # skipped wherever a look-ahead meets it: nothing changes
        self._maybe = self._maybe or _MAYBE_CALL.search(line) is not None
        if self._open is not None and self._still_open(line):
            return None  # the reply cannot parse yet
        if not self._done and not self._maybe:
            return None
        pending = text[self._base : nl]
        reader = Reader(pending, self.tools)
        marks: list = []
        try:
            reply = reader.read(False, in_answer=self._in_answer, marks=marks)
        except ParseError:
            if reader.open_at_end is not None:
                self._open = reader.open_at_end
            elif not reader.at_end:
                self.never = True  # an error that more text cannot undo
            return None
        if not self._done and not reply.calls:
            if reader.observed:
                self.never = True  # everything from the OBSERVATION on is dropped
            self._advance(text, pending, marks, reply.calls, nl)
            return None
        calls = [*self._done, *reply.calls]
        # (after an OBSERVATION the probes are dropped too)
        settled = reader.observed or self._settled(pending, reply.calls)
        self._advance(text, pending, marks, reply.calls, nl)
        return (calls or None) if settled else None

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

    def _settled(self, pending: str, calls: list[ToolCall]) -> bool:
        """No text that could follow changes the calls read: each probe either cannot attach to
        anything or reads the same calls."""
        for probe in _PROBES:
            try:
                again = Reader(pending + "\n" + probe, self.tools).read(False, in_answer=self._in_answer)
            except ParseError:
                continue  # the probe cannot attach to anything: fine
            if again.calls != calls:
                return False
        return True

    def _advance(self, text: str, pending: str, marks: list, calls: list[ToolCall], nl: int) -> None:
        """Move ``_base`` to the last place of ``pending`` the parser reached without having
        looked past the end of the text."""
        line, in_answer, count, _ = [m for m in marks if not m[3]][-1]
        offset = 0
        for _ in range(line):
            offset = pending.find("\n", offset) + 1 or len(pending) + 1
        self._base += offset
        self._in_answer = in_answer
        self._done += calls[:count]
        self._maybe = _MAYBE_CALL.search(text, self._base, nl) is not None
