"""The line level of the pre-pass: what kind of line each is (call, ARGS, ANSWER, OBSERVATION,
fence, prose), its decoration, and string-aware `{`/`[` tracking across lines.

Keywords (TOOL, ARGS, ANSWER, OBSERVATION) match in any case, in ASCII only (re.A): under re.I
alone `ſ` (U+017F) would read as `s` and `K` (U+212A) as `k`. Look-alikes are prose.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .types import MAX_DEPTH, NAME_PATTERN, NAME_RE

_EMPH = r"(?:\*\*|__)"
# Emphasis closing the `TOOL:` keyword (`**TOOL:** name`); never the start of a name (`TOOL:__init`)
# and never the name itself (`TOOL:__  ARGS: {}` calls `__`). grammars/reply.lark's KW_COLON agrees.
_COLON_EMPH = r"(?:\*\*|__(?![A-Za-z0-9_.-])(?![ \t]*" + _EMPH + r"?args" + _EMPH + r"?[ \t]*:))"
# Blank before a keyword: spaces and tabs, and what looks like nothing or like a space to a
# model or a terminal (a BOM, zero-width spaces, NBSP, ideographic and other Unicode spaces).
_BLANK = "[ \t\u00a0\u1680\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]"
# Decoration before a keyword: indentation, quote markers, one list marker.
_DECOR = _BLANK + r"*(?:>[ \t]*)*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?"
_LINE_RE = re.compile(
    _DECOR
    + r"(?:(?P<fence>`{3,}|~{3,})"
    + r"|(?P<bt>`(?!`))?(?P<kw>"
    + _EMPH
    + r"?"
    + r"(?P<word>(?P<tool>tool)|(?P<args>args)|(?P<answer>(?:final[ \t]+)?answer)|(?P<obs>observation))"
    + r"(?!(?!__)[A-Za-z0-9_])(?P<close>"
    + _EMPH
    + r")?)"
    + r"[ \t]*(?P<colon>:(?P<close2>"
    + _EMPH
    + r")?)?)",
    re.I | re.A,
)
# A call written after another keyword than TOOL (`CALL: cd ARGS: {...}`, `**Action:** cd ARGS:`,
# `ANSWER: cd ARGS: {...}`): the keyword, a tool name, then the ARGS keyword. Without ARGS a line
# like `Note: see below` is prose and `ANSWER: Paris` an answer; with it the line can only be a
# call that lost its keyword.
_NAME_THEN_ARGS = r"[ \t]*`?(?P<name>" + NAME_PATTERN + r")`?[ \t]+" + _EMPH + r"?args" + _EMPH + r"?[ \t]*:"
_MISNAMED_RE = re.compile(
    _DECOR
    + r"(?P<bt>`(?!`))?"
    + _EMPH
    + r"?(?P<word>[A-Za-z][A-Za-z_]*)"
    + _EMPH
    + r"?[ \t]*:"
    + _EMPH
    + r"?"
    + _NAME_THEN_ARGS,
    re.I | re.A,
)
_CALL_TEXT_RE = re.compile(_NAME_THEN_ARGS, re.I | re.A)
# The start of such a text, still growing (a streamed ANSWER line): it may yet become one.
_CALL_TEXT_START_RE = re.compile(
    r"[ \t]*`?(?:"
    + NAME_PATTERN
    + r"`?(?:[ \t]+(?:\*{1,2}|_{1,2})?(?:a(?:r(?:g(?:s(?:\*{1,2}|_{1,2})?[ \t]*)?)?)?)?)?)?\Z",
    re.I | re.A,
)


QUOTE_PREFIX = re.compile(r"[ \t]*(?:>[ \t]*)+")
FENCE_RE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:`{3,}|~{3,})")

# The canonical one-line form `TOOL: name ARGS: {...}` (emphasis allowed), read with json.loads.
# The grammar accepts these lines with the same result (a property test checks it); this path
# only saves time on the common case. Anything json.loads rejects goes to the grammar.
FAST_RE = re.compile(
    _EMPH
    + r"?tool"
    + _EMPH
    + r"?[ \t]*:"
    + _COLON_EMPH
    + r"?[ \t]*("
    + NAME_PATTERN
    + r")[ \t]+"
    + _EMPH
    + r"?args"
    + _EMPH
    + r"?[ \t]*:"
    + _EMPH
    + r"?[ \t]*(\{.*\})\Z",
    re.I | re.A,
)
FAST_MULTI_RE = re.compile(
    _EMPH
    + r"?tool"
    + _EMPH
    + r"?[ \t]*:"
    + _COLON_EMPH
    + r"?[ \t]*("
    + NAME_PATTERN
    + r")[ \t\r\n]+"
    + _EMPH
    + r"?args"
    + _EMPH
    + r"?[ \t]*:"
    + _EMPH
    + r"?[ \t\r\n]*(\{.*\})\Z",
    re.I | re.S | re.A,
)
# A call without arguments, alone on its line (`TOOL: get_time`), when no ARGS line follows.
FAST_BARE_RE = re.compile(
    _EMPH + r"?tool" + _EMPH + r"?[ \t]*:" + _COLON_EMPH + r"?[ \t]*(" + NAME_PATTERN + r")[ \t]*\Z",
    re.I | re.A,
)
# Enough of a call head to find where its arguments start (the grammar does the real parse).
HEAD_RE = re.compile(
    _EMPH
    + r"?tool"
    + _EMPH
    + r"?[ \t]*(?::"
    + _COLON_EMPH
    + r"?)?[ \t]*"
    + r"(?P<name>`[^`]*`|\"[^\"]*\"|'[^']*'|"
    + NAME_PATTERN
    + r")?[ \t]*"
    + r"(?:(?P<args>"
    + _EMPH
    + r"?args"
    + _EMPH
    + r"?[ \t]*:"
    + _EMPH
    + r"?)|(?P<paren>\())?",
    re.I | re.A,
)
_SCAN_RE = re.compile(r"[{}\[\]\"']")
DQ_RE = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
SQ_RE = re.compile(r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'")
CLOSER = {"{": "}", "[": "]"}
#: An open `{`/`[` on :func:`scan`'s stack: (bracket, segment, offset in the segment).
OpenBracket = tuple[str, int, int]
# A full stop or semicolon after the closing brace or parenthesis ends the sentence the call was
# written as ("...ARGS: {"expression": "sqrt(2025)"}."); it is not a comment.
END_STOP_RE = re.compile(r"([})])[ \t]*[.;]$")


class Line:
    """What the pre-pass knows about one line."""

    __slots__ = ("col", "end", "kind", "kw", "open_emph", "upper")

    def __init__(self, kind=None, col=0, end=0, kw=0, upper=False, open_emph=False):
        self.kind = kind  # None (prose), "fence", "call", "args", "answer", "obs"
        self.col = col  # where the keyword (or the backtick before it) starts
        self.end = end  # just after the keyword and its colon
        self.kw = kw  # where the keyword itself (with emphasis) starts
        self.upper = upper  # keyword written in capitals
        self.open_emph = open_emph  # emphasis opened before the keyword and not closed after it


_PROSE = Line()


def classify(line: str) -> Line:
    m = _LINE_RE.match(line)
    if m is None:
        return _PROSE
    if m.group("fence"):
        return Line("fence", m.start("fence"))
    col = m.start("bt") if m.group("bt") else m.start("kw")
    colon = m.group("colon")
    word = m.group("word")
    upper = word.isupper()
    kw = m.group("kw")
    open_emph = kw[:2] in ("**", "__") and not m.group("close") and not m.group("close2")
    if m.group("tool"):
        kind = "call" if colon or word == "TOOL" else None
    elif m.group("args"):
        kind = "args" if colon else None
    elif m.group("answer"):
        kind = "answer" if colon else None
    else:
        # OBSERVATION: with a colon, a parenthesis or bracket, alone on the line, or in capitals.
        rest = line[m.end("kw") :].lstrip(" \t")
        kind = "obs" if colon or not rest or rest[0] in "([-\u2014" or word == "OBSERVATION" else None
    if kind is None:
        return _PROSE
    return Line(kind, col, m.end(), m.start("kw"), upper, open_emph)


class WrongKeyword(NamedTuple):
    """A call written after another keyword than TOOL: its tool name, where the keyword starts
    and where the name starts (0-based columns of the line)."""

    name: str
    keyword: int
    name_at: int


def wrong_keyword(line: str, info: Line) -> WrongKeyword | None:
    """The call on ``line`` (as :func:`classify` read it) written after another keyword than TOOL:
    on a prose line ``CALL: cd ARGS: {...}``, on an ANSWER line ``ANSWER: cd ARGS: {...}``; None
    for any other line."""
    if info.kind is None:
        m = _MISNAMED_RE.match(line)
        return None if m is None else WrongKeyword(m.group("name"), m.start("word"), m.start("name"))
    if info.kind == "answer":
        m = _CALL_TEXT_RE.match(line, info.end)
        return None if m is None else WrongKeyword(m.group("name"), info.kw, m.start("name"))
    return None


def may_become_call_text(content: str) -> bool:
    """Whether the text after an ANSWER keyword, its line still growing, may yet become a call
    (:func:`wrong_keyword`): a name, then the start of the ARGS keyword."""
    return _CALL_TEXT_START_RE.match(content) is not None


def unwrap(line: str, info: Line) -> str:
    """The line without trailing whitespace and without a wrapper closed at its end: the inline
    code backtick of `` `TOOL: x` `` or the emphasis of ``**TOOL: x ARGS: {}**``."""
    s = line.rstrip()
    if info.col != info.kw and s.endswith("`") and len(s) - 1 > info.end:
        s = s[:-1].rstrip()
    if info.open_emph:
        mark = line[info.kw : info.kw + 2]
        if s.endswith(mark) and len(s) - 2 >= info.end:
            s = s[:-2].rstrip()
    return s


def stops_gathering(line: str) -> bool:
    """While an object is open, a fence line or a keyword line in capitals (TOOL:, ANSWER:,
    OBSERVATION) ends it; lower-case `answer:` may be an unquoted key of a relaxed object."""
    info = classify(line)
    return info.kind == "fence" or (info.kind is not None and info.upper)


def name_of(call_text: str) -> str | None:
    """The tool name of a call, when its head has a valid one."""
    m = HEAD_RE.match(call_text)
    if m is None or not m.group("name"):
        return None
    name = m.group("name").strip("`\"'")
    return name if NAME_RE.match(name) else None


class Segments:
    """The call text: pieces of original lines joined by "\\n", mapped back to (line, column)."""

    __slots__ = ("length", "parts", "starts")

    def __init__(self):
        self.parts: list[tuple[int, int, str]] = []  # (0-based line, 0-based column, text)
        self.starts: list[int] = []
        self.length = -1

    def add(self, line: int, col: int, text: str) -> None:
        self.starts.append(self.length + 1)
        self.parts.append((line, col, text))
        self.length += len(text) + 1

    def text(self) -> str:
        return "\n".join(p[2] for p in self.parts)

    def locate(self, offset: int) -> tuple[int, int]:
        """Offset in the call text -> (1-based line, 1-based column) in the reply."""
        i = len(self.starts) - 1
        while i > 0 and self.starts[i] > offset:
            i -= 1
        line, col, text = self.parts[i]
        within = min(max(offset - self.starts[i], 0), len(text))
        return line + 1, col + within + 1

    def where(self, seg: int, offset: int) -> tuple[int, int]:
        line, col, _ = self.parts[seg]
        return line + 1, col + offset + 1


def scan(text: str, pos: int, stack: list[OpenBracket], seg: int, gather: bool = True) -> str:
    """Track `{`/`[` nesting in text[pos:], string-aware and in linear time. Stack entries are
    (bracket, segment, offset). Returns "ok", "mismatch" (a closer that does not match: the
    grammar reports it), "string" (a string does not end on its line: the grammar reports it;
    only when gathering, else the quote is taken as a plain character) or "deep" (more than
    MAX_DEPTH levels)."""
    search = _SCAN_RE.search
    while True:
        m = search(text, pos)
        if m is None:
            return "ok"
        ch = m.group()
        i = m.start()
        if ch == '"' or ch == "'":
            sm = (DQ_RE if ch == '"' else SQ_RE).match(text, i)
            if sm is None:
                if gather:
                    return "string"
                pos = i + 1
            else:
                pos = sm.end()
            continue
        if ch == "{" or ch == "[":
            stack.append((ch, seg, i))
            if len(stack) > MAX_DEPTH:
                return "deep"
        elif stack and CLOSER[stack[-1][0]] == ch:
            stack.pop()
        else:
            return "mismatch"
        pos = i + 1
