"""What a reply says in words, for a person (the proxy's client): an answer's content without the
keywords a model repeats, the words of a reply that could not be used, a reply read when no line
can be a call. Every keyword is recognised here or in the line reader (lines.py), nowhere else.
"""

from __future__ import annotations

import re
from typing import Any

from .error_table import ParseError
from .lines import classify, unwrap, wrong_keyword
from .reader import Reader
from .types import Reply

__all__ = [
    "answer_content",
    "answer_in",
    "begins_call",
    "content_of",
    "has_call_line",
    "line_kind",
    "misplaced_call",
    "opens_with_keyword",
    "read_words",
    "words_of",
]

#: Keywords a model repeats at the start of its answer ("ANSWER: ANSWER: four", "ANSWER: Final
#: Answer: four"): never content.
_LEADING_KEYWORD = re.compile(r"\A(?:\s*(?:final[ \t]+)?answer[ \t]*:)+\s*", re.I | re.A)
_LINE_KEYWORD = re.compile(r"^[ \t]*(?:final[ \t]+)?answer[ \t]*:[ \t]*", re.I | re.A | re.M)
_KEYWORDS = ("answer:", "final answer:")
_THOUGHT = re.compile(r"^\s*thought\s*:\s*", re.I | re.A | re.M)
_PROTOCOL_START = re.compile(r"\s*(?:thought|tool|answer|final answer)\s*:", re.I | re.A)


def answer_content(answer: str) -> str:
    """The client's content of an answer: without the keywords a model repeats at its start or
    writes again at the start of a later line (two ANSWER lines: the content holds no keyword)."""
    return _LINE_KEYWORD.sub("", _LEADING_KEYWORD.sub("", answer))


def undecided(content: str) -> bool:
    """Whether the last line of ``content`` (after the keywords already stripped) may still grow
    into a leading keyword: its start is held back until that is decided."""
    head = " ".join(content.lower().split())
    return bool(head) and any(k.startswith(head) for k in _KEYWORDS)


def read_words(text: str) -> Reply:
    """A reply read when no line can be a call (a request without tools): every line is words.
    The answer is what follows the first ANSWER keyword (its following lines verbatim); a reply
    without one is prose (``thought``), as parse_reply reads prose. An OBSERVATION line ends it."""
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


def content_of(reply: Reply) -> str:
    """The words of an answer: its ANSWER text, or prose without its ``Thought:`` lines (all of
    them, keywords taken off, when it has nothing else), without repeated ANSWER keywords."""
    text = reply.answer if reply.answer is not None else reply.thought.strip()
    if text == reply.thought.strip():  # prose without ANSWER: its thought lines are not the answer
        said = "\n".join(line for line in text.split("\n") if not _THOUGHT.match(line)).strip()
        text = said or _THOUGHT.sub("", text).strip()
    return answer_content(text)


def words_of(text: str, reply: Reply | None) -> str:
    """What a reply that could not be used says in words (``reply``: as read, None when it did not
    parse): its answer or prose, never a call line, an ARGS line or a keyword."""
    if reply is not None:
        text = reply.answer if reply.is_final and reply.answer is not None else reply.thought
        return _THOUGHT.sub("", answer_content(text)).strip()
    kept = []
    for line in text.split("\n"):
        info = classify(line)
        if info.kind == "obs":
            break
        if info.kind in ("call", "args"):
            continue
        kept.append(unwrap(line, info)[info.end :] if info.kind == "answer" else line)
    return _THOUGHT.sub("", "\n".join(kept)).strip()


def opens_with_keyword(text: str) -> bool:
    """Whether ``text`` starts with a keyword of the protocol (``Thought:``, ``TOOL:``, ``ANSWER:``)."""
    return _PROTOCOL_START.match(text) is not None


def line_kind(line: str) -> str | None:
    """What one line is to the protocol: ``"call"``, ``"args"``, ``"answer"``, ``"obs"``,
    ``"fence"``, or None (words)."""
    return classify(line).kind


def misplaced_call(text: str) -> str | None:
    """The tool name of a call written after another keyword than TOOL on the first line of
    ``text`` (``CALL: cd ARGS: {}``, ``ANSWER: cd ARGS: {}``: format errors, ``wrong_keyword``),
    else None."""
    line = text.split("\n", 1)[0]
    wrong = wrong_keyword(line, classify(line))
    return wrong.name if wrong is not None else None


#: The call keyword as models write it (and as a reply begun for the model starts: retry's odds).
CALL_KEYWORD = "TOOL:"


def begins_call(piece: str) -> bool:
    """Whether a reply whose first token is ``piece`` may be a call: the token holds the start of
    the ``TOOL:`` keyword as models write it (``TO``, ``TOOL``), or the keyword itself in any
    case and decoration (``tool:``, ``**TOOL``). A token of blanks alone, or one that begins
    prose (``To``, ``The``), does not."""
    text = piece.lstrip()
    return bool(text) and (CALL_KEYWORD.startswith(text) or classify(text).kind == "call")


def has_call_line(text: str) -> bool:
    """Whether a line of ``text`` starts a call (``TOOL:``), parsable or not."""
    return any(classify(line).kind == "call" for line in text.split("\n"))


def answer_in(text: str, tools: Any = None) -> str:
    """The answer the start of a reply holds (a prefill's), "" when it holds calls or does not parse."""
    if not text:
        return ""
    try:
        reply = Reader(text, tools).read(False)
    except ParseError:
        return ""
    return reply.answer or "" if reply.is_final else ""
