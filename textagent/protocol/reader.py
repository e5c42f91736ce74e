"""The pre-pass over a whole reply: finds call, ANSWER and OBSERVATION lines, strips decoration
(indent, list and quote markers, code fences), gathers the lines a multi-line object spans and
maps every position back to the reply. Each call's text goes to the grammar."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .binding import bind, tool_specs
from .error_table import CLASS_BY_LABEL, ParseError, excerpt
from .grammar import (
    GrammarFailure,
    SemanticError,
    clip,
    describe_expected,
    parse_call_text,
    several_objects,
    unique_pairs,
)
from .labels import NOT_EXPECTED, char_class, label_for
from .lines import (
    CLOSER,
    DQ_RE,
    END_STOP_RE,
    FAST_BARE_RE,
    FAST_MULTI_RE,
    FAST_RE,
    FENCE_RE,
    HEAD_RE,
    QUOTE_PREFIX,
    SQ_RE,
    Line,
    OpenBracket,
    Segments,
    classify,
    name_of,
    scan,
    stops_gathering,
    unwrap,
    wrong_keyword,
)
from .types import MAX_DEPTH, Dropped, Reply, ToolCall


class _Answer:
    __slots__ = ("in_fence", "line", "parts")

    def __init__(self, line: int, first: str, in_fence: bool):
        self.line = line
        self.parts = [first]
        self.in_fence = in_fence

    @property
    def text(self) -> str:
        return "\n".join(self.parts).strip()


class _Fences:
    """A reply's code fences: the one open now, whether a call was read inside it, and the fence
    lines that only wrapped calls or an answer (left out of the thought)."""

    __slots__ = ("hidden", "open", "used")

    def __init__(self) -> None:
        self.open: int | None = None
        self.used = False
        self.hidden: list[int] = []  # append-only: ReadState rolls it back by its length

    def call_read(self) -> None:
        if self.open is not None:
            self.used = True

    def answer_starts(self) -> bool:
        """An ANSWER line: True when it is inside a fence, which then only wraps it."""
        if self.open is None:
            return False
        self.hidden.append(self.open)
        return True

    def fence(self, i: int) -> None:
        """A fence line ``i`` outside an answer: it opens a fence or closes the open one."""
        if self.open is None:
            self.open, self.used = i, False
            return
        if self.used:
            self.hidden += (self.open, i)
        self.open = None

    def hidden_lines(self) -> set[int]:
        """At the end of the reply: a fence left open around calls is hidden too."""
        hidden = set(self.hidden)
        if self.open is not None and self.used:
            hidden.add(self.open)
        return hidden


#: ``ReadState.mark()``: the lengths of the calls, prose, answers and dropped lists, the answer
#: going on with its number of parts and whether it is in a fence, and the fences' open, used
#: and number of hidden lines.
Mark = tuple[int, int, int, int, _Answer | None, tuple[int, bool] | None, tuple[int | None, bool, int]]
#: ``Reader.read_lines``' marks: (line index, whether a look-ahead ran into the end before it, the mark).
LineMark = tuple[int, bool, Mark]


class ReadState:
    """What the reading of a reply holds after some of its lines: the calls, the prose lines, the
    fences, the answers, the dropped parts, and the ANSWER the next line continues. A reader of a
    growing reply (protocol.stream.ReplyStream) keeps one, goes on from it with each new piece of
    text and rolls it back to a line (:meth:`mark`, :meth:`roll_back`), so that the reply is read
    once: its end gives the Reply (:meth:`reply`) without a parse of the whole text. ``first`` is
    the reply's line number (0-based) of the first line of the text read next."""

    __slots__ = ("answer", "answers", "calls", "dropped", "fences", "first", "prose")

    def __init__(self) -> None:
        self.first = 0
        self.calls: list[ToolCall] = []
        self.prose: list[tuple[int, str]] = []  # (line, text)
        self.fences = _Fences()
        self.answers: list[_Answer] = []
        self.dropped: list[Dropped] = []
        self.answer: _Answer | None = None

    def mark(self) -> Mark:
        """The state as it is, to roll back to: every list only grows between a mark and a roll-back."""
        a, f = self.answer, self.fences
        return (
            len(self.calls),
            len(self.prose),
            len(self.answers),
            len(self.dropped),
            a,
            (len(a.parts), a.in_fence) if a is not None else None,
            (f.open, f.used, len(f.hidden)),
        )

    def roll_back(self, mark: Mark) -> None:
        calls, prose, answers, dropped, answer, parts, fences = mark
        del self.calls[calls:], self.prose[prose:], self.answers[answers:], self.dropped[dropped:]
        self.answer = answer
        if answer is not None:
            assert parts is not None  # mark() records them whenever there is an answer
            del answer.parts[parts[0] :]
            answer.in_fence = parts[1]
        f = self.fences
        f.open, f.used = fences[0], fences[1]
        del f.hidden[fences[2] :]


class _Where:
    """Where a call's arguments are (``Reader._arguments``): the next line to read, the offset in
    the last segment where `{`/`[` tracking starts (None: nothing to scan), whether the arguments
    may go on over the next lines, the offset just after `ARGS:`, and whether a fence opened
    before the object is to be closed after it."""

    __slots__ = ("args_at", "closing_fence", "gather", "nxt", "scan_from")

    def __init__(self, nxt: int):
        self.nxt = nxt
        self.scan_from: int | None = None
        self.gather = False
        self.args_at: int | None = None
        self.closing_fence = False


def _multi_line_call(text: str) -> ToolCall | None:
    """A call whose object spans lines, read without the grammar when it is strict JSON (no raw
    newline in a string): the one-line shortcut's rule for several lines."""
    fm = FAST_MULTI_RE.match(text)
    if fm is None:
        return None
    try:
        value = json.loads(fm.group(2), object_pairs_hook=unique_pairs)
    except (ValueError, RecursionError):
        return None
    return ToolCall(fm.group(1), value) if type(value) is dict else None


class Reader:
    """One parse of one reply. ``shortcut=False`` reads every call with the grammar, without the
    json.loads shortcut for canonical JSON lines (tests compare the two)."""

    def __init__(self, text: str, tools: Any, *, shortcut: bool = True):
        lines = text.split("\n")
        if "\r" in text:
            lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        self.lines = lines
        self.tools = tools
        self.shortcut = shortcut
        self._specs: dict[str, dict[str, Any]] | None = None
        # What a reader of a growing reply needs (protocol.stream.CompleteCalls): whether a look-ahead
        # ran into the end of the text (more text could change what was read), the `{`/`[`
        # still open there (stack, quoted), and whether a self-written OBSERVATION ended it.
        self.at_end = False
        self.open_at_end: tuple[list[OpenBracket], bool] | None = None
        self.observed = False
        self.first = 0  # the reply's line number of this text's first line (read_lines sets it)

    @property
    def specs(self) -> dict[str, dict[str, Any]]:
        if self._specs is None:
            self._specs = tool_specs(self.tools)
        return self._specs

    def error(
        self,
        label: str,
        line: int,
        column: int,
        *,
        message: str | None = None,
        expected: Iterable[str] = (),
        name: str | None = None,
    ) -> ParseError:
        return ParseError(
            message or CLASS_BY_LABEL[label].title,
            line=self.first + line,
            column=column,
            expected=expected,
            excerpt=excerpt(self.lines, line, column),
            label=label,
            name=name,
            tools=self.tools,
        )

    def next_nonblank(self, j: int) -> int | None:
        lines = self.lines
        while j < len(lines):
            if lines[j].strip():
                return j
            j += 1
        self.at_end = True
        return None

    # ---- the whole reply ----
    def read(self, strict: bool, *, in_answer: bool = False) -> Reply:
        """The reply. ``in_answer``: the text continues an ANSWER (its lines belong to it until
        a call line)."""
        state = ReadState()
        if in_answer:
            state.answer = _Answer(0, "", False)
            state.answers.append(state.answer)
        self.read_lines(state)
        return self.reply(state, strict)

    def read_lines(self, state: ReadState, marks: list[LineMark] | None = None) -> None:
        """Read every line of the text into ``state`` (whose line numbers start at
        ``state.first``). ``marks`` gets ``(line, at_end, state.mark())`` where the loop starts
        reading each line (and once after the last): the state to go on from there, and whether
        a look-ahead ran into the end of the text before it."""
        lines, first = self.lines, state.first
        self.first = first
        n = len(lines)
        fences = state.fences
        i = 0
        while i < n:
            if marks is not None:
                marks.append((i, self.at_end, state.mark()))
            line = lines[i]
            info = classify(line)
            kind = info.kind
            if kind == "obs":
                state.dropped.append(Dropped("observation", first + i + 1, "\n".join(lines[i:])))
                self.observed = True
                break
            answer = state.answer
            if kind == "call":
                state.answer = None
                read, i = self.read_call(i, info)
                state.calls.extend(read)
                fences.call_read()
                continue
            if answer is not None:
                if kind == "fence" and answer.in_fence:
                    answer.in_fence = False  # closes the fence the answer started in
                    fences.open = None
                else:
                    answer.parts.append(line)
                i += 1
                continue
            if kind == "args":
                raise self.error("args_without_tool", i + 1, info.kw + 1, expected=["TOOL: <name>"])
            wrong = wrong_keyword(line, info)
            if wrong is not None:  # `CALL: cd ARGS: {...}`, `ANSWER: cd ARGS: {...}`
                raise self.error("wrong_keyword", i + 1, wrong.keyword + 1, expected=["TOOL:"], name=wrong.name)
            if kind == "answer":
                state.answer = _Answer(first + i + 1, unwrap(line, info)[info.end :], fences.answer_starts())
                state.answers.append(state.answer)
            elif kind == "fence":
                fences.fence(first + i)
                state.prose.append((first + i, line))
            else:
                state.prose.append((first + i, line))
            i += 1
        if marks is not None and not self.observed:
            marks.append((n, self.at_end, state.mark()))

    def reply(self, state: ReadState, strict: bool) -> Reply:
        """What ``state`` holds, as a Reply: the calls (an ANSWER beside them is dropped), else
        the first answer, else the prose as the answer (refused when ``strict``)."""
        hidden = state.fences.hidden_lines()
        thought = "\n".join(text for j, text in state.prose if j not in hidden).strip()
        calls, answers, dropped = list(state.calls), state.answers, list(state.dropped)
        if calls:
            dropped.extend(Dropped("answer_after_calls", a.line, a.text) for a in answers)
            dropped.sort(key=lambda d: d.line)
            return Reply(calls, None, thought, dropped)
        if answers:
            return Reply(calls, answers[0].text, thought, dropped)
        if strict:
            raise self._no_call_or_answer(state)
        return Reply(calls, thought, thought, dropped)

    def _no_call_or_answer(self, state: ReadState) -> ParseError:
        """A reply of prose only, refused: the error points at its first line that is not blank."""
        expected = ["TOOL: <name> ARGS: {...}", "ANSWER: <text>"]
        j, text = next(((j, t) for j, t in state.prose if t.strip()), (None, ""))
        if j is not None and j < self.first:  # in the lines read before this text
            return ParseError(
                CLASS_BY_LABEL["no_call_or_answer"].title,
                line=j + 1,
                column=1,
                expected=expected,
                excerpt=excerpt([text], 1, 1),
                label="no_call_or_answer",
                tools=self.tools,
            )
        k = self.next_nonblank(0)
        return self.error("no_call_or_answer", (k or 0) + 1, 1, expected=expected)

    # ---- one call ----
    def read_call(self, i: int, info: Line) -> tuple[list[ToolCall], int]:
        """Parse the call that starts on line i; returns its calls (one, or one per argument
        object of `ARGS: {...}, {...}`) and the next line to read."""
        line = unwrap(self.lines[i], info)
        head = line[info.kw :]
        fm = FAST_RE.match(head)
        if fm is not None:
            fast = self._one_line_calls(fm)
            if fast is not None:
                return fast, i + 1
        segs = Segments()
        segs.add(i, info.kw, head)
        quoted = QUOTE_PREFIX.match(line) is not None
        hm = HEAD_RE.match(head)
        assert hm is not None  # a call line starts with its `tool` keyword, and the rest of HEAD_RE is optional
        where = self._arguments(segs, head, hm, i + 1, quoted)
        nxt = where.nxt
        if where.scan_from is not None:
            nxt = self.gather(segs, where.scan_from, nxt, quoted, where.gather)
            if where.closing_fence:
                j = self.next_nonblank(nxt)
                if j is not None and FENCE_RE.match(self.lines[j]):
                    nxt = j + 1
        if self.shortcut and len(segs.parts) == 1 and where.args_at is None and where.scan_from is None:
            bare = FAST_BARE_RE.match(head)
            if bare is not None:  # the grammar reads these the same (a property test checks it)
                return [ToolCall(bare.group(1), {})], nxt
        if len(segs.parts) > 1 and self.shortcut:
            multi = _multi_line_call(segs.text())
            if multi is not None:
                return [multi], nxt
        return [self.parse_call(segs)], nxt

    def _one_line_calls(self, fm: re.Match[str]) -> list[ToolCall] | None:
        """A call line in canonical form, `TOOL: name ARGS: {...}` (or several objects), read
        without the grammar; None when it needs the grammar."""
        if self.shortcut:
            try:
                value = json.loads(fm.group(2), strict=False, object_pairs_hook=unique_pairs)
            except (ValueError, RecursionError):
                value = None
            if type(value) is dict and fm.group(2).count("{") + fm.group(2).count("[") <= MAX_DEPTH:
                return [ToolCall(fm.group(1), value)]
        several = several_objects(fm.group(2))
        if several is not None:
            return [ToolCall(fm.group(1), value) for value in several]
        return None

    def _arguments(self, segs: Segments, head: str, hm: re.Match[str], nxt: int, quoted: bool) -> _Where:
        """Where the call's arguments are: after `(`, after `ARGS:` on this line or the next
        (alone on its line), or on the lines after an `ARGS:` that ends its line, maybe in a
        fence. Adds the lines found to ``segs``."""
        lines = self.lines
        where = _Where(nxt)
        if hm.group("paren"):
            where.scan_from, where.gather = hm.end(), True
            return where
        if hm.group("args"):
            where.args_at = hm.end()
        elif not head[hm.end() :].strip():
            j = self.next_nonblank(nxt)
            if j is not None:
                info2 = classify(lines[j])
                if info2.kind == "args":
                    segs.add(j, info2.kw, unwrap(lines[j], info2)[info2.kw :])
                    where.nxt = j + 1
                    where.args_at = info2.end - info2.kw
        if where.args_at is None:
            if hm.end() < len(head):
                where.scan_from = hm.end()  # text after the name: only checked for depth
            return where
        last = segs.parts[-1][2]
        rest = last[where.args_at :].lstrip()
        if rest:
            where.scan_from, where.gather = len(last) - len(rest), rest[0] in "{["
            return where
        # `ARGS:` ends its line: an object may start on the next line, maybe in a fence
        j = self.next_nonblank(where.nxt)
        if j is not None and FENCE_RE.match(lines[j]):
            k = self.next_nonblank(j + 1)
            if k is not None and self._starts_object(lines[k], quoted):
                where.closing_fence = True
                j = k
        if j is not None and self._starts_object(lines[j], quoted):
            body = lines[j].rstrip()
            qm = QUOTE_PREFIX.match(body) if quoted else None
            cut = qm.end() if qm else 0
            segs.add(j, cut, body[cut:])
            where.nxt = j + 1
            where.scan_from, where.gather = 0, True
        return where

    def _starts_object(self, line: str, quoted: bool) -> bool:
        s = line.lstrip(" \t>") if quoted else line.lstrip(" \t")
        return s[:1] in ("{", "[")

    def gather(self, segs: Segments, start: int, nxt: int, quoted: bool, gather: bool) -> int:
        """Add the lines an open `{`/`[` spans. Returns the next line index."""
        lines = self.lines
        stack: list[OpenBracket] = []
        seg = len(segs.parts) - 1
        status = scan(segs.parts[seg][2], start, stack, seg, gather)
        while gather and status == "ok" and stack:
            if nxt >= len(lines) or stops_gathering(lines[nxt]):
                if nxt >= len(lines):
                    self.at_end, self.open_at_end = True, (stack, quoted)
                ch, s, off = stack[-1]
                line, col = segs.where(s, off)
                raise self.error(
                    "unbalanced_braces",
                    line,
                    col,
                    message=f"the `{ch}` at line {self.first + line}, column {col} is never closed",
                    expected=[f"`{CLOSER[ch]}`"],
                    name=name_of(segs.parts[0][2]),
                )
            body = lines[nxt].rstrip()
            cut = 0
            if quoted:
                qm = QUOTE_PREFIX.match(body)
                cut = qm.end() if qm else 0
            segs.add(nxt, cut, body[cut:])
            nxt += 1
            seg += 1
            status = scan(segs.parts[seg][2], 0, stack, seg)
        if status == "deep":
            ch, s, off = stack[-1]
            line, col = segs.where(s, off)
            raise self.error("too_deep", line, col, expected=[f"`{CLOSER[ch]}`"], name=name_of(segs.parts[0][2]))
        return nxt

    def parse_call(self, segs: Segments) -> ToolCall:
        text = END_STOP_RE.sub(r"\1", segs.text())
        try:
            syn = parse_call_text(text)
        except GrammarFailure as f:
            raise self.grammar_error(f, segs, text) from None
        except SemanticError as e:
            line, col = segs.locate(e.pos)
            raise self.error(e.label, line, col, message=e.message, expected=e.expected, name=name_of(text)) from None
        if syn.kind == "array":
            line, col = segs.locate(syn.pos)
            raise self.error("args_not_object", line, col, expected=["`{`"], name=syn.name)
        if syn.kind == "bare":
            return ToolCall(syn.name, bind(syn.name, syn.value, self.specs) if self.tools is not None else syn.value)
        return ToolCall(syn.name, syn.value)

    def grammar_error(self, f: GrammarFailure, segs: Segments, text: str) -> ParseError:
        offset = f.offset
        name = name_of(text)
        key = (f.state, frozenset(f.expected) - NOT_EXPECTED, char_class(text, offset), (name or "").lower() == "args")
        label = label_for(key, _read_plain)
        line, col = (
            segs.locate(offset) if offset < len(text) else segs.where(len(segs.parts) - 1, len(segs.parts[-1][2]))
        )
        found = _found(text, offset)
        title = CLASS_BY_LABEL[label].title
        message = f"{title}: found {found}" if found else f"{title}: the call ends too early"
        err = self.error(label, line, col, message=message, expected=describe_expected(f.expected), name=name)
        err._key = key
        return err


_FOUND_RE = re.compile(r"[A-Za-z0-9_.$-]+|\S")


def _found(text: str, offset: int) -> str:
    if offset >= len(text):
        return ""
    ch = text[offset]
    m = (DQ_RE if ch == '"' else SQ_RE if ch == "'" else _FOUND_RE).match(text, offset)
    piece = m.group() if m else ch
    return "`" + clip(piece, 30) + "`"


def _read_plain(text: str) -> Reply:
    """A reply read without tools (how labels.py reads its known-bad examples)."""
    return Reader(text, None).read(False)
