"""What of a reply can reach the client while the model still writes it.

An answer's text can: once a line of the reply is an ``ANSWER:`` line (with only prose or
thoughts before it), the reply is an answer, and the content read so far is a prefix of the
content of the whole reply (``parse_reply`` joins the answer's lines and strips the ends). What
would change that is cut off: a later line that starts a call or a self-written OBSERVATION
ends the reply there (the stream to the upstream is closed), so a reply whose content has been
sent stays that answer.

A call can too: once the line that ends it has ended (no later line can change it:
protocol.stream.CompleteCalls), each call of the reply, in order, is judged on its own (``CallStream``); the
repair loop sends a valid one to the client at once. A later call that fails does not take back
the ones sent: only the failing ones go back to the model (repair.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..protocol import ParseError, Reply, ToolCall, parse_reply
from ..protocol.lines import classify, unwrap
from ..protocol.stream import CompleteCalls

__all__ = ["LEADING_KEYWORD", "AnswerStream", "CallStream", "answer_content", "answer_cut", "words_only"]

#: Keywords a model repeats at the start of its answer ("ANSWER: ANSWER: four", "ANSWER: Final
#: Answer: four"): never content.
LEADING_KEYWORD = re.compile(r"\A(?:\s*(?:final[ \t]+)?answer[ \t]*:)+\s*", re.I | re.A)
_KEYWORDS = ("answer:", "final answer:")


def _undecided(content: str) -> bool:
    """Whether ``content`` (after the keywords already stripped) may still grow into another
    leading keyword: its start is held back until that is decided."""
    head = " ".join(content.lower().split())
    return bool(head) and any(k.startswith(head) for k in _KEYWORDS)


def words_only(text: str) -> Reply:
    """A reply read when the request has no tools: nothing in it is a call, every line is words.
    The answer is what follows the first ANSWER keyword (its following lines verbatim); a reply
    without one is prose (``thought``), as parse_reply reads prose."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        info = classify(line)
        if info.kind == "obs":
            break
        if info.kind == "answer":
            rest = []
            for later in lines[i + 1 :]:
                if classify(later).kind == "obs":
                    break
                rest.append(later)
            return Reply([], "\n".join([unwrap(line, info)[info.end :], *rest]).strip(), "\n".join(lines[:i]))
    kept = []
    for line in lines:
        if classify(line).kind == "obs":
            break
        kept.append(line)
    return Reply([], None, "\n".join(kept))


_LINE_KEYWORD = re.compile(r"^[ \t]*(?:final[ \t]+)?answer[ \t]*:[ \t]*", re.I | re.A | re.M)


def answer_content(answer: str) -> str:
    """The client's content of an answer: without the keywords a model repeats at its start or
    writes again at the start of a later line (two ANSWER lines: the content holds no keyword)."""
    return _LINE_KEYWORD.sub("", LEADING_KEYWORD.sub("", answer))


_DECIDED = 20  # characters of a line after which it cannot turn into a keyword line
_REREAD = 8  # characters of new text before the answer is read again
_GROWTH = 16  # ... and at least this fraction of the text read so far


class AnswerStream:
    """The ``on_text`` watcher of one attempt: ``send(piece)`` gets each new piece of the
    answer's content. ``skip`` is content the client has already (a prefill's answer), not
    sent again. True (close the stream) once a line that would end the answer begins; ``cut``
    is where the reply is then kept to."""

    def __init__(self, send: Callable[[str], Any], tools: Any, *, prefix: str = "", skip: str = "", calls: bool = True):
        self.send, self.tools, self.prefix, self.skip = send, tools, prefix, skip
        self.calls = calls  # False: the request has no tools, no line is a call (words_only)
        self.sent = ""  # content sent so far (after skip)
        self.cut: int | None = None
        self._lines = 0  # complete lines classified
        self._at = 0  # where the next line starts
        self._answer = False  # an ANSWER line with content came first: the reply is an answer
        self._pending = False  # an ANSWER line came, its content not yet
        self._off = False  # a call came first, or the text went wrong: nothing to stream
        self._read = 0  # length of the text last read

    @property
    def started(self) -> bool:
        return bool(self.sent)

    def __call__(self, text: str) -> bool:
        if self._off or self.cut is not None:
            return self.cut is not None
        text = self.prefix + text
        while True:
            nl = text.find("\n", self._at)
            if nl == -1:
                break
            if self._line(text[self._at : nl]):
                self.cut = self._at - len(self.prefix)
                return True
            self._at = nl + 1
        if self._off:
            return False
        tail = text[self._at :]
        kind = classify(tail).kind if tail.strip() else "blank"
        if not self._answer and kind == "answer":
            known = text  # the ANSWER line itself: its text is the answer's
        elif self._answer and kind in ("prose", "blank", "fence") and len(tail.lstrip()) >= _DECIDED:
            known = text
        elif self._answer and self._answer_kind(kind, tail):
            self.cut = self._at - len(self.prefix)
            return True
        else:
            known = text[: self._at]
        if self._answer or kind == "answer":
            self._emit(known)
        return False

    def _answer_kind(self, kind: str, tail: str) -> bool:
        return kind in (("call", "obs") if self.calls else ("obs",)) and len(tail.lstrip()) >= _DECIDED

    def _line(self, line: str) -> bool:
        """Takes one complete line; True when it ends the answer. A reply is an answer once an
        ANSWER line has content (on it or on a line after it), before any call: a call or
        OBSERVATION line after that ends it; one before that makes the reply calls. The plain
        path keeps to the same rule (``answer_cut``), so streamed = plain."""
        info = classify(line)
        kind = info.kind
        if not self.calls and kind in ("call", "args"):
            kind = "prose"
        if self._answer:
            return kind in ("call", "obs")
        if kind == "answer":
            self._pending = True
            if unwrap(line, info)[info.end :].strip():
                self._answer = True
        elif kind in ("call", "args", "obs"):
            self._off = True
            self._pending = False
        elif self._pending and line.strip():
            self._answer = True  # the answer's content began on a line after its keyword
        return False

    def _emit(self, known: str) -> None:
        grown = len(known) - self._read
        # read again after _REREAD new characters (or a line end), and at least 1/_GROWTH more of
        # the text: the answer is parsed whole each time, so the reads of a long answer must
        # grow geometrically for its cost to stay linear (128 KB took 3.1 s of CPU)
        if grown <= 0 or (grown < _REREAD and not known.endswith("\n")) or grown < len(known) // _GROWTH:
            return
        self._read = len(known)
        try:
            reply = parse_reply(known, self.tools) if self.calls else words_only(known)
        except ParseError:
            return
        if reply.calls or reply.answer is None:
            return
        content = answer_content(reply.answer)
        last = content.rfind("\n") + 1
        if _undecided(content[last:].lstrip(" \t")):
            content = content[:last].rstrip("\n")  # the last line may become a keyword: not yet
        if not content.startswith(self.skip):
            self._off = True
            return
        content = content[len(self.skip) :]
        if content.startswith(self.sent) and len(content) > len(self.sent):
            piece, self.sent = content[len(self.sent) :], content
            self.send(piece)

    def close(self, text: str) -> str:
        """The whole reply ``text`` as kept once the model stopped: an answer that has been sent
        ends before a call or OBSERVATION line, also a last line too short to judge before."""
        if self.started and self.cut is None:
            whole = self.prefix + text
            while self._at <= len(whole):
                nl = whole.find("\n", self._at)
                end = len(whole) if nl == -1 else nl
                if self._line(whole[self._at : end]):
                    self.cut = self._at - len(self.prefix)
                    break
                self._at = end + 1
        return text if self.cut is None else text[: self.cut]

    def finish(self, content: str) -> None:
        """The rest of the reply's final ``content`` (after ``skip``)."""
        if content.startswith(self.sent) and len(content) > len(self.sent):
            piece, self.sent = content[len(self.sent) :], content
            self.send(piece)


class CallStream:
    """The ``on_text`` watcher of one attempt for its calls: at each line break, the calls that
    no later line can change (protocol.stream.CompleteCalls at that line break) are given to
    ``judge(call)`` one at a time, in order, each once. ``judge`` returns True when the reply
    needs no more text (no later call can be used): the stream is then closed, ``cut`` where the
    reply is kept to. ``limit``: judge at most this many calls of the reply."""

    def __init__(self, judge: Callable[[ToolCall], bool], tools: Any, *, prefix: str = "", limit: int | None = None):
        self.judge, self.tools, self.prefix, self.limit = judge, tools, prefix, limit
        self.seen = 0  # calls judged
        self.cut: int | None = None
        self._at = 0  # text checked up to here
        self._reader = CompleteCalls(tools)  # each line read once: linear in the reply

    def __call__(self, text: str) -> bool:
        if self.cut is not None:
            return True
        text = self.prefix + text
        while True:
            nl = text.find("\n", self._at)
            if nl == -1:
                return False
            start, self._at = self._at, nl + 1
            calls = self._reader.at(text, start, nl)
            if calls and self._take(calls):
                self.cut = max(0, nl + 1 - len(self.prefix))
                return True

    def _take(self, calls: list[ToolCall]) -> bool:
        for call in calls[self.seen :]:
            if self.limit is not None and self.seen >= self.limit:
                return True
            self.seen += 1
            if self.judge(call):
                return True
        return self.limit is not None and self.seen >= self.limit

    def finish(self, reply: Reply) -> None:
        """The reply ended: its calls not judged yet are judged now."""
        if self.cut is None:
            self._take(list(reply.calls))


def answer_cut(text: str) -> int | None:
    """Where a whole reply is cut by the rule streaming keeps to (``AnswerStream._line``): after
    an answer with content, the start of the first call or OBSERVATION line; None when nothing
    is cut."""
    stream = AnswerStream(lambda piece: None, None)
    at = 0
    for line in text.split("\n"):
        if stream._line(line):
            return at
        at += len(line) + 1
    return None
