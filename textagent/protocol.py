"""The text protocol: turn a model's reply into tool calls, an answer, or a precise error.

A reply is read line by line (see PROTOCOL.md for the full contract)::

    Thought: I need the weather first.
    TOOL: get_weather ARGS: {"city": "Paris", "days": 3}

gives ``Reply(calls=[ToolCall("get_weather", {"city": "Paris", "days": 3})], answer=None, ...)``.

Two layers do the work:

* a line-oriented pre-pass (this module) finds call, ANSWER and OBSERVATION lines, strips
  decoration (indent, list and quote markers, code fences), gathers the lines a multi-line
  object spans (string-aware, linear time), and maps every position back to the reply;
* the LALR grammar ``grammars/reply.lark`` parses each call: its ``TOOL: name ARGS: ...`` head
  and every argument form. ``_CallTransformer`` turns the parse into a frozen ``CallSyntax``.

Errors are :class:`ParseError` with the line and column in the original reply, what was expected
there, an excerpt with a caret, and a ``label`` taken from :data:`ERROR_CLASSES`, a table of
known-bad replies consulted the way lark's ``UnexpectedInput.match_examples`` does it: each
example is parsed once, the parser state and the offending character class where it fails are
remembered, and a later failure in the same state gets that example's label.

This is the only module of textagent that imports lark.
"""
from __future__ import annotations

import difflib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ._schema import example_value

__all__ = [
    "ToolCall",
    "Dropped",
    "Reply",
    "ParseError",
    "ErrorClass",
    "ERROR_CLASSES",
    "KNOWN_BAD",
    "CallSyntax",
    "parse_reply",
    "parse_call",
    "render_call",
    "render_answer",
    "grammar_text",
    "NAME_PATTERN",
    "MAX_DEPTH",
]

#: A tool name: ``[A-Za-z_][A-Za-z0-9_.-]*``.
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
#: Deepest nesting of ``{``/``[`` accepted in arguments (deeper is a ParseError, label ``too_deep``).
MAX_DEPTH = 256


# ---------------------------------------------------------------------------------------------
# Public data
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its arguments.

    ``args`` is a dict, except for a bare argument (``ARGS: 17 * 24``) that could not be bound to
    a parameter because no schema was known: then it is the argument text.
    """

    name: str
    args: dict | str = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args}


@dataclass(frozen=True)
class Dropped:
    """Text the parser dropped on purpose.

    ``kind`` is ``"observation"`` (the model wrote its own OBSERVATION line: it and everything
    after it are dropped) or ``"answer_after_calls"`` (an ANSWER in a reply that also calls
    tools: the calls win). ``line`` is 1-based.
    """

    kind: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Reply:
    """A parsed reply. Either ``calls`` is non-empty and ``answer`` is None, or there are no calls
    and ``answer`` is the final answer (the ANSWER text, or the whole prose when the reply had
    neither calls nor ANSWER). ``thought`` is the prose: every line that is not a call, an answer,
    a dropped part or a code fence wrapped around a call."""

    calls: list[ToolCall]
    answer: str | None
    thought: str
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def truncated_at(self) -> int | None:
        """1-based line where a self-written OBSERVATION started (the reply was cut there)."""
        for d in self.dropped:
            if d.kind == "observation":
                return d.line
        return None

    @property
    def is_final(self) -> bool:
        """True when the reply calls no tools (it is the final answer)."""
        return not self.calls

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``textagent parse`` prints."""
        return {
            "calls": [c.to_dict() for c in self.calls],
            "answer": self.answer,
            "thought": self.thought,
            "dropped": [d.to_dict() for d in self.dropped],
        }


@dataclass(frozen=True)
class CallSyntax:
    """What the grammar read from one call, before binding to a tool schema.

    ``kind`` is ``"none"`` (no arguments), ``"object"`` (JSON/relaxed object), ``"kv"``
    (key=value pairs), ``"bare"`` (a bare argument, or one positional argument of the
    shorthand; ``value`` is its text), or ``"array"`` (rejected: arguments must be an object).
    ``pos`` is the offset of the arguments in the call text (for errors).
    """

    name: str
    kind: str
    value: Any
    pos: int = 0


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ErrorClass:
    """One class of format error: a label, what is wrong, how to fix it, and known-bad replies."""

    label: str
    title: str
    hint: str
    examples: tuple[str, ...]


#: The table of known-bad replies, in priority order (an earlier class wins when two examples
#: fail in the same parser state). Every example must raise ParseError with its label.
ERROR_CLASSES: tuple[ErrorClass, ...] = (
    ErrorClass(
        "missing_colon", "a `:` is missing",
        "Write `TOOL: <name> ARGS: {...}` with a colon after TOOL and after ARGS, and `\"key\": value` "
        "inside objects.",
        ("TOOL search ARGS: {}", "TOOL search", "TOOL: search ARGS {}", 'TOOL: search ARGS {"q": 1}',
         'TOOL: search ARGS: {"q" "cats"}', 'TOOL: search ARGS: {"q" 1}', "TOOL: search ARGS: {q}",
         "TOOL: search ARGS: {'q', 1}", 'TOOL: search ARGS: {"q"}', "TOOL: search ARGS: {q 1}",
         "TOOL: search ARGS", "TOOL: search ARGS x", "TOOL: search ARGS: {'q' 'x'}", "TOOL: search ARGS: {q x}",
         "TOOL: search ARGS: {q [1]}", 'TOOL: search ARGS: {q "x"}', "TOOL: search ARGS: {q {}}",
         "TOOL: search ARGS: {q, x: 1}", "TOOL: search ARGS: {q}}", "TOOL: search ARGS: {'q'}"),
    ),
    ErrorClass(
        "empty_tool_line", "the TOOL line has no tool name",
        "Put the tool name on the same line, right after `TOOL:`.",
        ("TOOL:", "TOOL:   ", "**TOOL:**", "- Tool :", "TOOL", "Thought: let me look.\nTOOL:\nsearch"),
    ),
    ErrorClass(
        "missing_name", "the tool name is missing",
        "Write the tool name between `TOOL:` and `ARGS:`.",
        ('TOOL: ARGS: {"q": "cats"}', 'TOOL: {"q": "cats"}', "TOOL: (q=cats)", "TOOL: [1]", "tool: : x",
         "TOOL: = x"),
    ),
    ErrorClass(
        "bad_name", "the tool name is not valid",
        "A tool name starts with a letter or `_` and contains only letters, digits, `_`, `.` and `-`.",
        ("TOOL: 3search ARGS: {}", 'TOOL: "search ARGS: {}', "TOOL: <search> ARGS: {}", "TOOL: -x ARGS: {}",
         "TOOL: `search ARGS: {}", "TOOL: 'search ARGS: {}", "TOOL: \u00e9t\u00e9 ARGS: {}",
         "TOOL: /search ARGS: {}", "TOOL: *search* ARGS: {}", "TOOL: )"),
    ),
    ErrorClass(
        "missing_args_keyword", "there is text after the tool name but no `ARGS:`",
        "Write `ARGS:` between the tool name and the arguments.",
        ("TOOL: search cats", 'TOOL: search {"q": "cats"}', "TOOL: search [1]", 'TOOL: search "cats"',
         "TOOL: search, ARGS: {}", "TOOL: search: cats", "TOOL: `search` 1", "TOOL: search 'x'",
         "TOOL: search = 1", "TOOL: search )", "TOOL: search }"),
    ),
    ErrorClass(
        "unbalanced_braces", "the braces of the arguments do not balance",
        "Close every `{` with `}` (and every `[` with `]`), and add nothing after the closing brace; "
        "for several calls, write one TOOL line per call.",
        ('TOOL: search ARGS: {"q": "cats"', 'TOOL: search ARGS: {"q": {"lang": "en"}',
         'TOOL: search ARGS: {"q": "cats"}}', 'TOOL: search ARGS: {"q": ["a", "b"]}]',
         'TOOL: search({"q": "cats"})}', 'TOOL: search({"q": "cats"}]', 'TOOL: search ARGS: {"q": "x"} {',
         'TOOL: search ARGS: {"q": "x"} [', "TOOL: search({})})",
         'TOOL: search ARGS: {"q": ["a"}', "TOOL: search ARGS: {]", 'TOOL: search ARGS: {"q": 1]',
         'TOOL: search ARGS: {"q": 1)}', 'TOOL: search ARGS: {"q": [1)]}', 'TOOL: search ARGS: {"q": [1]]}'),
    ),
    ErrorClass(
        "unterminated_string", "a string is not closed",
        "End every string with the same quote it started with, on the same line; write a newline "
        "inside a string as \\n.",
        ('TOOL: search ARGS: {"q": "cats}', "TOOL: search ARGS: {'q': 'cats}", 'TOOL: search ARGS: {"q: "cats"}',
         "TOOL: search ARGS: {'q: 1}", 'TOOL: search ARGS: q="cats', "TOOL: search ARGS: q='cats",
         'TOOL: search(q="cats)', "TOOL: search(q='cats)", 'TOOL: search ARGS: {"q": ["cats]}',
         'TOOL: search ARGS: {"q": "a", "b: 1}', 'TOOL: search ARGS: {"q": 1, "r": "x\ny"}',
         'TOOL: search ARGS: q=1, r="x', 'TOOL: search(q=1, r="x)', "TOOL: search ARGS: {'q': ['x]}",
         'TOOL: search ARGS: {"q": 1 "r}', 'TOOL: search ARGS: {"q" "r}', "TOOL: search ARGS: {'q' 'r}", "TOOL: search ARGS: ['x]"),
    ),
    ErrorClass(
        "duplicate_key", "an argument is given twice",
        "Give each argument once. For several calls of a tool (several items, several values), "
        "write one TOOL line per call, each with its own arguments.",
        ('TOOL: play ARGS: {"artist": "A", "minutes": 20, "artist": "B", "minutes": 15}',
         'TOOL: search ARGS: {"q": "cats", "q": "dogs"}', "TOOL: search ARGS: q=cats, q=dogs",
         'TOOL: search(q="cats", q="dogs")', 'TOOL: search ARGS: {"filter": {"lang": "en", "lang": "fr"}}',
         'TOOL: search ARGS:\n{"q": "cats",\n "q": "dogs"}'),
    ),
    ErrorClass(
        "args_not_object", "the arguments are not an object",
        "Give the arguments as one JSON object of named values: `ARGS: {\"name\": value}`.",
        ("TOOL: search ARGS: [1, 2]", "TOOL: search ARGS: []", 'TOOL: search ARGS: ["cats"]',
         'TOOL: search ARGS:\n["cats",\n "dogs"]'),
    ),
    ErrorClass(
        "bad_key_value", "the key=value arguments are malformed",
        'Write key=value pairs separated by commas, quoting values that contain commas: '
        '`city="Paris, France", days=3` (or use a JSON object).',
        ("TOOL: search ARGS: q=, n=3", 'TOOL: search ARGS: q="cats" n=3', "TOOL: search ARGS: q=cats, =3",
         'TOOL: search ARGS: q="cats", dogs', "TOOL: search ARGS: q=cats n=3", "TOOL: search ARGS: q=",
         "TOOL: search ARGS: q=1 n=2", "TOOL: search ARGS: q=cats,, n=3", 'TOOL: search ARGS: q="a"b',
         "TOOL: search ARGS: q=[1] n=2", "TOOL: search ARGS: q=true n=2", "TOOL: search ARGS: q={} x",
         "TOOL: search(q=, n=3)", 'TOOL: search(q="cats" n=3)', "TOOL: search(q=cats n=3)",
         'TOOL: search(q="cats", dogs)', "TOOL: search(q=)", "TOOL: search(q=1 n=2)", "TOOL: search(q=cats,, n=3)",
         "TOOL: search ARGS: q=1, n=2 x=3", "TOOL: search(q=[1] x)",
         "TOOL: search ARGS: q=cats, n=}", "TOOL: search ARGS: q=a, n=x y=1", "TOOL: search(q=a, n=x y=1)",
         "TOOL: search(q=1, n=)", "TOOL: search ARGS: q=1, n=2, =3", "TOOL: search(q=1, =2)"),
    ),
    ErrorClass(
        "unclosed_paren", "the `(` of the call is not closed",
        "End the call with `)` on the same line: `TOOL: name(key=value)`.",
        ("TOOL: search(q=cats", "TOOL: search(", 'TOOL: search("cats"', "TOOL: search(q=1, n=2",
         "TOOL: search(q=1,", 'TOOL: search({"q": 1}', "TOOL: search(q=1) x", "TOOL: search(q='x' ",
         "TOOL: search(q=cats) and more", 'TOOL: search("a") then'),
    ),
    ErrorClass(
        "missing_comma", "a `,` is missing between two items",
        "Separate the items of an object or list with commas.",
        ('TOOL: search ARGS: {"q": "cats" "n": 3}', 'TOOL: search ARGS: {"q": [1 2]}', "TOOL: search ARGS: {'q': 'a' 'n': 1}",
         'TOOL: search ARGS: {"q": 1 n: 2}', 'TOOL: search ARGS: {"q": [1 "a"]}', 'TOOL: search ARGS: {"q": {} "n": 1}',
         'TOOL: search ARGS: {"q": [[] []]}', "TOOL: search ARGS: {'q': ['a' 'b']}", 'TOOL: search ARGS: {"q": 1 {}}',
         'TOOL: search ARGS: {"q": [1 {}]}', 'TOOL: search ARGS: {"q": true false}',
         'TOOL: search ARGS: {"q": [1 true]}', 'TOOL: search ARGS: {"q": 1 [2]}', "TOOL: search ARGS: {'q': 'a' [1]}",
         "TOOL: search ARGS: {'q': [1 'a']}", "TOOL: search ARGS: {'q': [1 [2]]}", 'TOOL: search ARGS: {"q": "a" {}}'),
    ),
    ErrorClass(
        "missing_value", "a value is missing",
        "Give every key a value: `\"key\": value`.",
        ('TOOL: search ARGS: {"q": }', 'TOOL: search ARGS: {"q":, "n": 1}', 'TOOL: search ARGS: {"q": [1, , 2]}',
         'TOOL: search ARGS: {"q": }}', 'TOOL: search ARGS: {"q": [}]}',
         "TOOL: search ARGS: {q: }", 'TOOL: search ARGS: {"q": [,]}', 'TOOL: search ARGS: {"q": ]}',
         'TOOL: search ARGS: {,}', 'TOOL: search ARGS: {"q": 1,,}', 'TOOL: search ARGS: {"q": :}',
         'TOOL: search ARGS: {"q": [:]}'),
    ),
    ErrorClass(
        "unquoted_string", "a text value is not quoted",
        'Put text values in double quotes: `"city": "Paris"`.',
        ('TOOL: search ARGS: {"q": cats}', 'TOOL: search ARGS: {"q": [cats]}', "TOOL: search ARGS: {q: cats}",
         'TOOL: search ARGS: {"q": c@ts}', 'TOOL: search ARGS: {"q": +1}', 'TOOL: search ARGS: {"q": .5}',
         'TOOL: search ARGS: {"q": 01}', 'TOOL: search ARGS: {"q": -}', 'TOOL: search ARGS: {"q": [-]}',
         'TOOL: search ARGS: {"q": [.5]}', 'TOOL: search ARGS: {"q": `x`}', 'TOOL: search ARGS: {"q": [`x`]}',
         'TOOL: search ARGS: {"q": (1)}', 'TOOL: search ARGS: {"q": [(1)]}', 'TOOL: search ARGS: {"q": =}',
         'TOOL: search ARGS: {"q": [=]}', 'TOOL: search ARGS: {"q": 1.}', 'TOOL: search ARGS: {"q": [1x]}',
         'TOOL: search ARGS: {"q": 12abc}', 'TOOL: search ARGS: {"q": truex}', 'TOOL: search ARGS: {"q": )}',
         'TOOL: search ARGS: {"q": [)]}',
         'TOOL: search ARGS: {"q": ?}', 'TOOL: search ARGS: {"q": [?]}'),
    ),
    ErrorClass(
        "bad_key", "an object key is not valid",
        'Write keys as quoted strings: `{"key": value}`.',
        ('TOOL: search ARGS: {1: "cats"}', 'TOOL: search ARGS: {[1]: "cats"}', 'TOOL: search ARGS: {{}: 1}',
         'TOOL: search ARGS: {-1: 2}', 'TOOL: search ARGS: {@q: 1}', 'TOOL: search ARGS: {"q": 1, 2: 3}',
         'TOOL: search ARGS: {: 1}', 'TOOL: search ARGS: {"q": 1, [x]: 1}', 'TOOL: search ARGS: {"q": 1, {}: 1}',
         'TOOL: search ARGS: {"q": 1, : 1}', 'TOOL: search ARGS: {"q": 1, ]}', 'TOOL: search ARGS: {"q": 1, )}',
         "TOOL: search ARGS: {(q): 1}", "TOOL: search ARGS: {=: 1}", "TOOL: search ARGS: {`q`: 1}",
         "TOOL: search ARGS: {)}", 'TOOL: search ARGS: {"q": 1, `x`: 1}', 'TOOL: search ARGS: {"q": 1, (x): 1}',
         'TOOL: search ARGS: {"q": 1, =: 1}', 'TOOL: search ARGS: {"q": 1, @: 1}'),
    ),
    ErrorClass(
        "trailing_text", "there is text after the arguments",
        "End the line after the arguments; write any comment on a line of its own.",
        ('TOOL: search ARGS: {"q": "cats"} please', 'TOOL: search ARGS: {"q": "cats"} "x"',
         "TOOL: search ARGS: {} 1", "TOOL: search() x", 'TOOL: search ARGS: {"q": 1}:', "TOOL: search ARGS: {} 'x'",
         "TOOL: search ARGS: {} (x)", "TOOL: search ARGS: {} = 1", "TOOL: search() 'x'", 'TOOL: search() "x"',
         "TOOL: search() 1", "TOOL: search() {}", "TOOL: search() :", "TOOL: search() ,",
         "TOOL: search() (", "TOOL: search() )", "TOOL: search() =", "TOOL: search() `x`", "TOOL: search ARGS: {} `x`",
         "TOOL: search ARGS: {} ?", "TOOL: search() ?", "TOOL: search ARGS: {} )"),
    ),
    ErrorClass(
        "bad_number", "a number is out of range",
        "Write numbers with at most a few thousand digits, or pass them as strings.",
        ("TOOL: search ARGS: {\"n\": " + "9" * 5000 + "}",),
    ),
    ErrorClass(
        "too_deep", f"the arguments nest deeper than {MAX_DEPTH} levels",
        "Flatten the arguments.",
        ("TOOL: search ARGS: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
         "TOOL: search ARGS: {\"q\": " + "{\"q\": " * MAX_DEPTH + "1" + "}" * (MAX_DEPTH + 1)),
    ),
    ErrorClass(
        "args_without_tool", "an `ARGS:` line has no TOOL line before it",
        "Write `TOOL: <name>` first; `ARGS:` belongs to the same line (or the line right after it).",
        ('ARGS: {"q": "cats"}', 'I will search now.\nARGS: {"q": "cats"}', '- **ARGS:** {"q": 1}'),
    ),
    ErrorClass(
        "no_call_or_answer", "the reply has neither a tool call nor an answer",
        "Either call a tool with `TOOL: <name> ARGS: {...}` or finish with `ANSWER: <text>`.",
        (),
    ),
    ErrorClass(
        "bad_call", "the tool call could not be read",
        "Write the call exactly as `TOOL: <name> ARGS: {\"key\": value}`.",
        (),
    ),
)

#: label -> known-bad example replies (the same table as ERROR_CLASSES).
KNOWN_BAD: dict[str, tuple[str, ...]] = {c.label: c.examples for c in ERROR_CLASSES}
_CLASS_BY_LABEL: dict[str, ErrorClass] = {c.label: c for c in ERROR_CLASSES}


class ParseError(ValueError):
    """A reply that breaks the protocol.

    ``line``/``column`` are 1-based positions in the original reply text (the column may be one
    past the end of the line, meaning "at the end of the line"). ``expected`` lists what would
    have been accepted there, ``excerpt`` is the line with a caret under the column, ``label``
    is the error class (a key of :data:`KNOWN_BAD`), ``name`` the tool name when it was read.
    ``str(err)`` is a one-line message; :meth:`feedback` is the text for the model.
    """

    def __init__(self, message: str, *, line: int = 1, column: int = 1, expected: Iterable[str] = (),
                 excerpt: str = "", label: str = "bad_call", name: str | None = None,
                 tools: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.expected = list(expected)
        self.excerpt = excerpt
        self.label = label
        self.name = name
        self._tools = tools
        self._key: tuple | None = None

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"

    def __reduce__(self):
        return (_rebuild_error, (self.message, self.line, self.column, self.expected, self.excerpt,
                                 self.label, self.name))

    @property
    def hint(self) -> str:
        cls = _CLASS_BY_LABEL.get(self.label)
        return cls.hint if cls else ""

    def feedback(self, tools: Any = None) -> str:
        """Text for the model: what is wrong, where, how to fix it and one correct example.

        ``tools`` (or the tools given to :func:`parse_reply`) makes the example use a real tool
        name (the one the model tried when it exists, else the closest) and its parameters.
        """
        tools = tools if tools is not None else self._tools
        specs = _tool_specs(tools)
        example = _example_call(specs, self.name)
        names = ", ".join(specs) if specs else ""
        expected = ", ".join(self.expected) if self.expected else ""
        values = {
            "message": self.message,
            "line": str(self.line),
            "column": str(self.column),
            "excerpt": _indent(self.excerpt, "    ") if self.excerpt else "    (empty reply)",
            "hint": self.hint,
            "expected": f"Expected here: {expected}." if expected else "",
            "example": example,
            "tools": f"Available tools: {names}." if names else "",
        }
        text = _feedback_template().safe_substitute(values)
        text = re.sub(r"\n{3,}", "\n\n", text)
        return text.strip()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``textagent parse`` prints under ``"error"``."""
        return {
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "expected": list(self.expected),
            "label": self.label,
            "excerpt": self.excerpt,
            "feedback": self.feedback(),
        }


def _rebuild_error(message, line, column, expected, excerpt, label, name):
    return ParseError(message, line=line, column=column, expected=expected, excerpt=excerpt, label=label,
                      name=name)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + ln for ln in text.split("\n"))


@lru_cache(maxsize=1)
def _feedback_template() -> Template:
    return Template(_read_resource(("prompts", "text", "format_error.txt"),
                                   Path(__file__).resolve().parent / "prompts" / "text" / "format_error.txt"))


def _read_resource(parts: tuple[str, ...], fallback: Path) -> str:
    try:
        res = resources.files("textagent")
        for p in parts:
            res = res / p
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError, AttributeError):
        pass
    return fallback.read_text(encoding="utf-8")


def grammar_text() -> str:
    """The text of ``grammars/reply.lark`` (from the installed package or the source checkout)."""
    return _read_resource(("grammars", "reply.lark"),
                          Path(__file__).resolve().parent.parent / "grammars" / "reply.lark")


# ---------------------------------------------------------------------------------------------
# Grammar and transformer
# ---------------------------------------------------------------------------------------------

class _Semantic(Exception):
    """Raised inside the transformer for errors the grammar cannot express."""

    def __init__(self, label: str, pos: int, message: str, expected: Iterable[str] = ()):
        super().__init__(message)
        self.label = label
        self.pos = pos
        self.message = message
        self.expected = list(expected)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_ESC_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.S)


def _unescape_lenient(body: str) -> str:
    """Decode JSON-style escapes; an unknown escape keeps its backslash (as Python does)."""
    if "\\" not in body:
        return body

    def one(m: re.Match) -> str:
        s = m.group(1)
        if len(s) == 5:
            return chr(int(s[1:], 16))
        return _ESCAPES.get(s, "\\" + s)

    out = _ESC_RE.sub(one, body)
    # join surrogate pairs written as two \\u escapes, as json does
    if any("\ud800" <= ch <= "\udfff" for ch in out):
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    return out


def _decode_dq(tok: str) -> str:
    try:
        return json.loads(tok, strict=False)
    except ValueError:
        return _unescape_lenient(tok[1:-1])


def _decode_sq(tok: str) -> str:
    return _unescape_lenient(tok[1:-1])


def _number(tok: Token) -> int | float:
    s = str(tok)
    try:
        if s == "NaN":
            return float("nan")
        if s.endswith("Infinity"):
            return float("-inf") if s[0] == "-" else float("inf")
        if "." in s or "e" in s or "E" in s:
            return float(s)
        return int(s)
    except ValueError:
        raise _Semantic("bad_number", tok.start_pos, _CLASS_BY_LABEL["bad_number"].title,
                        ["a shorter number"]) from None


_DQ_FULL = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"\Z')
_SQ_FULL = re.compile(r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'\Z")


def _bare_text(raw: str) -> str:
    """A bare argument's value: the text, unquoted when it is exactly one quoted string."""
    s = raw.strip()
    if s[:1] == '"' and _DQ_FULL.match(s):
        return _decode_dq(s)
    if s[:1] == "'" and _SQ_FULL.match(s):
        return _decode_sq(s)
    return s


_TLS = threading.local()  # the call text being parsed (continuation pieces are cut from it)


def _pairs(children: list, more_type: str) -> dict:
    """Fold key=value pairs; a continuation piece extends the previous unquoted value.

    (The UQ / SH_UQ terminals take the pieces that continue them in already; a piece met here
    follows a value that is not unquoted, an error, or an unquoted value the lexer ended at a
    line break. The extended text is cut from the call text once, when the value is complete.)
    """
    out: dict = {}
    last_key = None
    last_tok: Token | None = None  # the unquoted value token the next piece may extend
    end: int | None = None         # where the pieces that extend it end

    def extend() -> None:
        text = getattr(_TLS, "text", None)
        if text is not None and last_tok is not None and end is not None:
            out[last_key] = text[last_tok.start_pos:end].rstrip()

    for ch in children:
        if isinstance(ch, tuple):
            extend()
            key, value, pos = ch
            _unique(out, [(key, None, pos)])
            end = None
            if isinstance(value, Token):  # an unquoted value
                last_tok = value
                value = value.value.rstrip()
            else:
                last_tok = None
            out[key] = value
            last_key = key
        elif isinstance(ch, Token) and ch.type == more_type:
            if last_tok is None:
                raise _Semantic(
                    "bad_key_value", ch.start_pos,
                    f"`{_clip(ch.value.strip())}` is not a key=value pair (only an unquoted value "
                    "continues after a comma)", ["key=value"])
            end = ch.end_pos
    extend()
    return out


def _unique(into: dict, members: list[tuple[Any, Any, int]]) -> dict:
    """Add (key, value, position) members to ``into``; a key given twice is an error: which of
    its values was meant cannot be known (small models write the arguments of several calls
    into one object)."""
    for key, value, pos in members:
        if key in into:
            raise _Semantic("duplicate_key", pos, f"`{_clip(str(key))}` is given twice",
                            ["each argument once", "one TOOL line per call"])
        into[key] = value
    return into


def _several_objects(text: str) -> list[dict] | None:
    """`{...}, {...}`: two or more JSON objects after one `ARGS:`, each the arguments of a call of
    the same tool (small models list the calls of a parallel question so); None otherwise."""
    if text.count("{") + text.count("[") > MAX_DEPTH:
        return None
    try:
        value = json.loads("[" + text + "]", strict=False, object_pairs_hook=_unique_pairs)
    except (ValueError, RecursionError):
        return None
    if len(value) >= 2 and all(type(v) is dict for v in value):
        return value
    return None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    """json.loads' object_pairs_hook: refuses a key given twice (the grammar then says where)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


class _CallTransformer(Transformer):
    """Builds a CallSyntax from the parse of one call (applied inline by the LALR parser)."""

    def start(self, c):
        return c[0]

    def call_args(self, c):  # TOOL KW_COLON name [args_clause]
        if len(c) == 3:
            return CallSyntax(c[2], "none", {})
        return CallSyntax(c[2], *c[3])

    def call_shorthand(self, c):  # TOOL KW_COLON name LPAR [params] RPAR
        if len(c) == 5:
            return CallSyntax(c[2], "none", {}, c[3].start_pos)
        params = c[4]
        if isinstance(params, dict):
            return CallSyntax(c[2], "object", params, c[3].end_pos)
        return CallSyntax(c[2], *params)

    def name(self, c):
        t = c[0]
        return t.value[1:-1] if t.type == "QUOTED_NAME" else t.value

    def args_clause(self, c):  # ARGS KW_COLON [args]
        if len(c) == 2:
            return ("none", {}, c[1].end_pos)
        args = c[2]
        if isinstance(args, dict):
            return ("object", args, c[1].end_pos)
        return args

    # ---- argument forms: each returns (kind, value, pos) ----
    def top_array(self, c):
        return ("array", [v for v in c[1:-1] if not _is_punct(v)], c[0].start_pos)

    def kv_pairs(self, c):
        return ("kv", _pairs(c, "KV_MORE"), -1)

    def sh_pairs(self, c):
        return ("kv", _pairs(c, "SH_MORE"), -1)

    def kv_pair(self, c):  # KEY EQ value ; an unquoted value stays a Token for _pairs
        return (c[0].value, c[2], c[0].start_pos)

    sh_pair = kv_pair

    def bare(self, c):
        return ("bare", _bare_text(c[0].value), c[0].start_pos)

    sh_bare = bare

    # ---- values ----
    def object(self, c):
        return _unique({}, [m for m in c if isinstance(m, tuple)])

    def member(self, c):  # key COLON value; the colon's place stands for the key's
        return (c[0], c[2], c[1].start_pos)

    def key(self, c):
        t = c[0]
        if t.type == "STRING":
            return _decode_dq(t.value)
        if t.type == "SQ_STRING":
            return _decode_sq(t.value)
        return t.value

    def array(self, c):
        return [v for v in c[1:-1] if not _is_punct(v)]

    def string(self, c):
        return _decode_dq(c[0].value)

    def sq_string(self, c):
        return _decode_sq(c[0].value)

    def number(self, c):
        return _number(c[0])

    def true(self, c):
        return True

    def false(self, c):
        return False

    def null(self, c):
        return None


def _is_punct(v) -> bool:
    return isinstance(v, Token) and v.type == "COMMA"


def _clip(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"


class _NoRootFallback:
    """Stands in for the contextual lexer's root lexer.

    When no terminal of the current state matches, lark re-lexes the position with every
    terminal of the grammar to name what it found. Terminals such as BARE can match a whole
    line, so that costs a scan of the rest of the line per error (seconds for a 10 MB
    unterminated string) and names nothing useful: errors are labelled from the known-bad
    table instead. Raising here makes lark report the original UnexpectedCharacters."""

    def next_token(self, lexer_state, parser_state=None):
        raise UnexpectedCharacters("\0", 0, 1, 1)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    parser = Lark(grammar_text(), parser="lalr", lexer="contextual", transformer=_CallTransformer(),
                  maybe_placeholders=False, propagate_positions=False)
    lexer = getattr(parser.parser, "lexer", None)
    if hasattr(lexer, "root_lexer"):
        lexer.root_lexer = _NoRootFallback()
    return parser


_PARSER = _parser()


# ---------------------------------------------------------------------------------------------
# The line pre-pass
# ---------------------------------------------------------------------------------------------

_EMPH = r"(?:\*\*|__)"
# Keywords (TOOL, ARGS, ANSWER, OBSERVATION) match in any case, in ASCII only (re.A): under
# re.I alone `ſ` (U+017F) would read as `s` and `K` (U+212A) as `k`. Look-alikes are prose.
# Emphasis closing the `TOOL:` keyword (`**TOOL:** name`); never the start of a name (`TOOL:__init`)
# and never the name itself (`TOOL:__  ARGS: {}` calls `__`). grammars/reply.lark's KW_COLON agrees.
_COLON_EMPH = r"(?:\*\*|__(?![A-Za-z0-9_.-])(?![ \t]*" + _EMPH + r"?args" + _EMPH + r"?[ \t]*:))"
# Decoration before a keyword: indentation, quote markers, one list marker.
_DECOR = r"[ \t]*(?:>[ \t]*)*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?"
_LINE_RE = re.compile(
    _DECOR
    + r"(?:(?P<fence>`{3,}|~{3,})"
    + r"|(?P<bt>`(?!`))?(?P<kw>" + _EMPH + r"?"
    + r"(?P<word>(?P<tool>tool)|(?P<args>args)|(?P<answer>(?:final[ \t]+)?answer)|(?P<obs>observation))"
    + r"(?!(?!__)[A-Za-z0-9_])(?P<close>" + _EMPH + r")?)"
    + r"[ \t]*(?P<colon>:(?P<close2>" + _EMPH + r")?)?)",
    re.I | re.A,
)
_QUOTE_PREFIX = re.compile(r"[ \t]*(?:>[ \t]*)+")
_FENCE_RE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:`{3,}|~{3,})")

# The canonical one-line form `TOOL: name ARGS: {...}` (emphasis allowed), read with json.loads.
# The grammar accepts these lines with the same result (a property test checks it); this path
# only saves time on the common case. Anything json.loads rejects goes to the grammar.
_FAST_RE = re.compile(
    _EMPH + r"?tool" + _EMPH + r"?[ \t]*:" + _COLON_EMPH + r"?[ \t]*(" + NAME_PATTERN + r")[ \t]+"
    + _EMPH + r"?args" + _EMPH + r"?[ \t]*:" + _EMPH + r"?[ \t]*(\{.*\})\Z",
    re.I | re.A,
)
_FAST_MULTI_RE = re.compile(
    _EMPH + r"?tool" + _EMPH + r"?[ \t]*:" + _COLON_EMPH + r"?[ \t]*(" + NAME_PATTERN + r")[ \t\r\n]+"
    + _EMPH + r"?args" + _EMPH + r"?[ \t]*:" + _EMPH + r"?[ \t\r\n]*(\{.*\})\Z",
    re.I | re.S | re.A,
)
#: Tests turn the json.loads shortcut off to compare it with the grammar.
_FAST_PATH = True
# Enough of a call head to find where its arguments start (the grammar does the real parse).
_HEAD_RE = re.compile(
    _EMPH + r"?tool" + _EMPH + r"?[ \t]*(?::" + _COLON_EMPH + r"?)?[ \t]*"
    + r"(?P<name>`[^`]*`|\"[^\"]*\"|'[^']*'|" + NAME_PATTERN + r")?[ \t]*"
    + r"(?:(?P<args>" + _EMPH + r"?args" + _EMPH + r"?[ \t]*:" + _EMPH + r"?)|(?P<paren>\())?",
    re.I | re.A,
)
_SCAN_RE = re.compile(r"[{}\[\]\"']")
_DQ_RE = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_SQ_RE = re.compile(r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'")
_CLOSER = {"{": "}", "[": "]"}
_KEY_EQ = re.compile(NAME_PATTERN + r"[ \t]*=(?!=)")
_NAME_FULL = re.compile(NAME_PATTERN + r"\Z")


class _Line:
    """What the pre-pass knows about one line."""

    __slots__ = ("kind", "col", "end", "kw", "upper", "open_emph")

    def __init__(self, kind=None, col=0, end=0, kw=0, upper=False, open_emph=False):
        self.kind = kind            # None (prose), "fence", "call", "args", "answer", "obs"
        self.col = col              # where the keyword (or the backtick before it) starts
        self.end = end              # just after the keyword and its colon
        self.kw = kw                # where the keyword itself (with emphasis) starts
        self.upper = upper          # keyword written in capitals
        self.open_emph = open_emph  # emphasis opened before the keyword and not closed after it


_PROSE = _Line()


def _classify(line: str) -> _Line:
    m = _LINE_RE.match(line)
    if m is None:
        return _PROSE
    if m.group("fence"):
        return _Line("fence", m.start("fence"))
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
        rest = line[m.end("kw"):].lstrip(" \t")
        kind = "obs" if colon or not rest or rest[0] in "([-\u2014" or word == "OBSERVATION" else None
    if kind is None:
        return _PROSE
    return _Line(kind, col, m.end(), m.start("kw"), upper, open_emph)


_END_STOP_RE = re.compile(r"([})])[ \t]*[.;]$")


def _unwrap(line: str, info: _Line) -> str:
    """The line without trailing whitespace and without a wrapper closed at its end: the inline
    code backtick of `` `TOOL: x` `` or the emphasis of ``**TOOL: x ARGS: {}**``."""
    s = line.rstrip()
    if info.col != info.kw and s.endswith("`") and len(s) - 1 > info.end:
        s = s[:-1].rstrip()
    if info.open_emph:
        mark = line[info.kw:info.kw + 2]
        if s.endswith(mark) and len(s) - 2 >= info.end:
            s = s[:-2].rstrip()
    return s


class _Segments:
    """The call text: pieces of original lines joined by "\\n", mapped back to (line, column)."""

    __slots__ = ("parts", "starts", "length")

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


def _scan(text: str, pos: int, stack: list, seg: int, gather: bool = True) -> str:
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
            sm = (_DQ_RE if ch == '"' else _SQ_RE).match(text, i)
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
        elif stack and _CLOSER[stack[-1][0]] == ch:
            stack.pop()
        else:
            return "mismatch"
        pos = i + 1


class _Answer:
    __slots__ = ("line", "parts", "in_fence")

    def __init__(self, line: int, first: str, in_fence: bool):
        self.line = line
        self.parts = [first]
        self.in_fence = in_fence

    @property
    def text(self) -> str:
        return "\n".join(self.parts).strip()


class _Reader:
    """One parse of one reply."""

    def __init__(self, text: str, tools: Any):
        lines = text.split("\n")
        if "\r" in text:
            lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        self.lines = lines
        self.tools = tools
        self._specs: dict | None = None
        # What a reader of a growing reply needs (modes.text.EarlyStop): whether a look-ahead
        # ran into the end of the text (more text could change what was read), the `{`/`[`
        # still open there (stack, quoted), and whether a self-written OBSERVATION ended it.
        self.at_end = False
        self.open_at_end: tuple[list, bool] | None = None
        self.observed = False

    @property
    def specs(self) -> dict:
        if self._specs is None:
            self._specs = _tool_specs(self.tools)
        return self._specs

    def error(self, label: str, line: int, column: int, *, message: str | None = None,
              expected: Iterable[str] = (), name: str | None = None) -> ParseError:
        return ParseError(message or _CLASS_BY_LABEL[label].title, line=line, column=column, expected=expected,
                          excerpt=_excerpt(self.lines, line, column), label=label, name=name, tools=self.tools)

    def next_nonblank(self, j: int) -> int | None:
        lines = self.lines
        while j < len(lines):
            if lines[j].strip():
                return j
            j += 1
        self.at_end = True
        return None

    # ---- the whole reply ----
    def read(self, strict: bool, *, in_answer: bool = False, marks: list | None = None) -> Reply:
        """The reply. ``in_answer``: the text continues an ANSWER (its lines belong to it until
        a call line). ``marks`` gets ``(line, in_answer, calls so far, at_end)`` where the loop
        starts reading each line (and once after the last): the state to go on from there."""
        lines = self.lines
        n = len(lines)
        calls: list[ToolCall] = []
        prose: list[int] = []
        hidden: set[int] = set()  # fence lines that only wrapped calls or an answer
        answers: list[_Answer] = []
        dropped: list[Dropped] = []
        fence_open: int | None = None
        fence_used = False
        answer: _Answer | None = None
        if in_answer:
            answer = _Answer(0, "", False)
            answers.append(answer)
        i = 0
        while i < n:
            if marks is not None:
                marks.append((i, answer is not None, len(calls), self.at_end))
            line = lines[i]
            info = _classify(line)
            kind = info.kind
            if kind == "obs":
                dropped.append(Dropped("observation", i + 1, "\n".join(lines[i:])))
                self.observed = True
                break
            if kind == "call":
                answer = None
                read, i = self.read_call(i, info)
                calls.extend(read)
                if fence_open is not None:
                    fence_used = True
                continue
            if answer is not None:
                if kind == "fence" and answer.in_fence:
                    answer.in_fence = False  # closes the fence the answer started in
                    fence_open = None
                else:
                    answer.parts.append(line)
                i += 1
                continue
            if kind == "args":
                raise self.error("args_without_tool", i + 1, info.kw + 1, expected=["TOOL: <name>"])
            if kind == "answer":
                answer = _Answer(i + 1, _unwrap(line, info)[info.end:], fence_open is not None)
                if fence_open is not None:
                    hidden.add(fence_open)
                answers.append(answer)
            elif kind == "fence":
                if fence_open is None:
                    fence_open, fence_used = i, False
                else:
                    if fence_used:
                        hidden.add(fence_open)
                        hidden.add(i)
                    fence_open = None
                prose.append(i)
            else:
                prose.append(i)
            i += 1
        if marks is not None and not self.observed:
            marks.append((n, answer is not None, len(calls), self.at_end))
        if fence_open is not None and fence_used:
            hidden.add(fence_open)
        thought = "\n".join(lines[j] for j in prose if j not in hidden).strip()
        if calls:
            dropped.extend(Dropped("answer_after_calls", a.line, a.text) for a in answers)
            dropped.sort(key=lambda d: d.line)
            return Reply(calls, None, thought, dropped)
        if answers:
            return Reply(calls, answers[0].text, thought, dropped)
        if strict:
            j = self.next_nonblank(0)
            raise self.error("no_call_or_answer", (j or 0) + 1, 1,
                             expected=["TOOL: <name> ARGS: {...}", "ANSWER: <text>"])
        return Reply(calls, thought, thought, dropped)

    # ---- one call ----
    def read_call(self, i: int, info: _Line) -> tuple[list[ToolCall], int]:
        """Parse the call that starts on line i; returns its calls (one, or one per argument
        object of `ARGS: {...}, {...}`) and the next line to read."""
        lines = self.lines
        line = _unwrap(lines[i], info)
        col0 = info.kw
        head = line[col0:]
        fm = _FAST_RE.match(head)
        if fm is not None:
            if _FAST_PATH:
                try:
                    value = json.loads(fm.group(2), strict=False, object_pairs_hook=_unique_pairs)
                except (ValueError, RecursionError):
                    value = None
                if type(value) is dict and fm.group(2).count("{") + fm.group(2).count("[") <= MAX_DEPTH:
                    return [ToolCall(fm.group(1), value)], i + 1
            several = _several_objects(fm.group(2))
            if several is not None:
                return [ToolCall(fm.group(1), value) for value in several], i + 1

        segs = _Segments()
        segs.add(i, col0, head)
        quoted = _QUOTE_PREFIX.match(line) is not None
        nxt = i + 1
        scan_from: int | None = None   # offset in the last segment where `{`/`[` tracking starts
        gather = False                 # may the arguments continue on the next lines?
        args_at: int | None = None     # offset in the last segment just after `ARGS:`
        closing_fence = False
        hm = _HEAD_RE.match(head)
        if hm.group("paren"):
            scan_from, gather = hm.end(), True
        elif hm.group("args"):
            args_at = hm.end()
        elif not head[hm.end():].strip():
            j = self.next_nonblank(nxt)
            if j is not None:
                info2 = _classify(lines[j])
                if info2.kind == "args":
                    segs.add(j, info2.kw, _unwrap(lines[j], info2)[info2.kw:])
                    nxt = j + 1
                    args_at = info2.end - info2.kw
        if args_at is not None:
            last = segs.parts[-1][2]
            rest = last[args_at:].lstrip()
            if rest:
                scan_from = len(last) - len(rest)
                gather = rest[0] in "{["
            else:
                # `ARGS:` ends its line: an object may start on the next line, maybe in a fence
                j = self.next_nonblank(nxt)
                if j is not None and _FENCE_RE.match(lines[j]):
                    k = self.next_nonblank(j + 1)
                    if k is not None and self._starts_object(lines[k], quoted):
                        closing_fence = True
                        j = k
                if j is not None and self._starts_object(lines[j], quoted):
                    body = lines[j].rstrip()
                    cut = _QUOTE_PREFIX.match(body).end() if quoted and _QUOTE_PREFIX.match(body) else 0
                    segs.add(j, cut, body[cut:])
                    nxt = j + 1
                    scan_from, gather = 0, True
        elif scan_from is None and hm.end() < len(head):
            scan_from = hm.end()  # text after the name: only checked for depth
        if scan_from is not None:
            nxt = self.gather(segs, scan_from, nxt, quoted, gather)
            if closing_fence:
                j = self.next_nonblank(nxt)
                if j is not None and _FENCE_RE.match(lines[j]):
                    nxt = j + 1
        if len(segs.parts) > 1 and _FAST_PATH:
            # a multi-line object: the same shortcut as above (strict JSON: no raw newline in strings)
            fm = _FAST_MULTI_RE.match(segs.text())
            if fm is not None:
                try:
                    value = json.loads(fm.group(2), object_pairs_hook=_unique_pairs)
                except (ValueError, RecursionError):
                    value = None
                if type(value) is dict:
                    return [ToolCall(fm.group(1), value)], nxt
        return [self.parse_call(segs)], nxt

    def _starts_object(self, line: str, quoted: bool) -> bool:
        s = line.lstrip(" \t>") if quoted else line.lstrip(" \t")
        return s[:1] in ("{", "[")

    def gather(self, segs: _Segments, start: int, nxt: int, quoted: bool, gather: bool) -> int:
        """Add the lines an open `{`/`[` spans. Returns the next line index."""
        lines = self.lines
        stack: list = []
        seg = len(segs.parts) - 1
        status = _scan(segs.parts[seg][2], start, stack, seg, gather)
        while gather and status == "ok" and stack:
            if nxt >= len(lines) or _stops_gathering(lines[nxt]):
                if nxt >= len(lines):
                    self.at_end, self.open_at_end = True, (stack, quoted)
                ch, s, off = stack[-1]
                line, col = segs.where(s, off)
                raise self.error("unbalanced_braces", line, col,
                                 message=f"the `{ch}` at line {line}, column {col} is never closed",
                                 expected=[f"`{_CLOSER[ch]}`"], name=_name_of(segs.parts[0][2]))
            body = lines[nxt].rstrip()
            cut = 0
            if quoted:
                qm = _QUOTE_PREFIX.match(body)
                cut = qm.end() if qm else 0
            segs.add(nxt, cut, body[cut:])
            nxt += 1
            seg += 1
            status = _scan(segs.parts[seg][2], 0, stack, seg)
        if status == "deep":
            ch, s, off = stack[-1]
            line, col = segs.where(s, off)
            raise self.error("too_deep", line, col, expected=[f"`{_CLOSER[ch]}`"],
                             name=_name_of(segs.parts[0][2]))
        return nxt

    def parse_call(self, segs: _Segments) -> ToolCall:
        # A full stop or semicolon after the closing brace or parenthesis ends the sentence the
        # call was written as ("...ARGS: {"expression": "sqrt(2025)"}."); it is not a comment.
        text = _END_STOP_RE.sub(r"\1", segs.text())
        _TLS.text = text
        try:
            syn = _PARSER.parse(text)
        except UnexpectedInput as e:
            raise self.grammar_error(e, segs, text) from None
        except _Semantic as e:
            line, col = segs.locate(e.pos)
            raise self.error(e.label, line, col, message=e.message, expected=e.expected,
                             name=_name_of(text)) from None
        finally:
            _TLS.text = None
        if syn.kind == "array":
            line, col = segs.locate(syn.pos)
            raise self.error("args_not_object", line, col, expected=["`{`"], name=syn.name)
        if syn.kind == "bare":
            return ToolCall(syn.name, _bind(syn.name, syn.value, self.specs) if self.tools is not None else syn.value)
        return ToolCall(syn.name, syn.value)

    def grammar_error(self, e: UnexpectedInput, segs: _Segments, text: str) -> ParseError:
        if isinstance(e, UnexpectedToken):
            expected = e.expected
            offset = len(text) if e.token.type == "$END" else e.token.start_pos
        elif isinstance(e, UnexpectedCharacters):
            expected = e.allowed
            offset = e.pos_in_stream
        else:  # pragma: no cover - LALR reports the end as an UnexpectedToken
            expected = getattr(e, "expected", ())
            offset = len(text)
        ip = getattr(e, "interactive_parser", None)
        if ip is not None:
            try:
                expected = ip.accepts()  # exact, unlike the merged LALR look-ahead sets
            except Exception:  # pragma: no cover - defensive: keep the lexer's view
                pass
        state = getattr(getattr(e, "state", None), "position", None)
        name = _name_of(text)
        key = (state, frozenset(expected) - _NOT_EXPECTED, _char_class(text, offset), (name or "").lower() == "args")
        label = _label_for(key)
        line, col = segs.locate(offset) if offset < len(text) else segs.where(len(segs.parts) - 1,
                                                                             len(segs.parts[-1][2]))
        found = _found(text, offset)
        title = _CLASS_BY_LABEL[label].title
        message = f"{title}: found {found}" if found else f"{title}: the call ends too early"
        err = self.error(label, line, col, message=message, expected=_describe_expected(expected), name=name)
        err._key = key
        return err


def _stops_gathering(line: str) -> bool:
    """While an object is open, a fence line or a keyword line in capitals (TOOL:, ANSWER:,
    OBSERVATION) ends it; lower-case `answer:` may be an unquoted key of a relaxed object."""
    info = _classify(line)
    return info.kind == "fence" or (info.kind is not None and info.upper)


def _name_of(call_text: str) -> str | None:
    m = _HEAD_RE.match(call_text)
    if m is None or not m.group("name"):
        return None
    name = m.group("name").strip("`\"'")
    return name if _NAME_FULL.match(name) else None


def _char_class(text: str, offset: int) -> str:
    if offset >= len(text):
        return "$END"
    ch = text[offset]
    if ch.isalpha() or ch == "_" or ch == "$":
        return "a"
    if ch.isdigit() or ch in "-+.":
        return "0"
    if ch == '"' or ch == "'":
        # a whole string where it does not belong, or a string that does not end
        return ch + ("str" if (_DQ_RE if ch == '"' else _SQ_RE).match(text, offset) else "open")
    if ch in "`{}[]():,=*":
        return ch
    if ch.isspace():
        return " "
    return "?"


_FOUND_RE = re.compile(r"[A-Za-z0-9_.$-]+|\S")


def _found(text: str, offset: int) -> str:
    if offset >= len(text):
        return ""
    ch = text[offset]
    m = (_DQ_RE if ch == '"' else _SQ_RE if ch == "'" else _FOUND_RE).match(text, offset)
    piece = m.group() if m else ch
    return "`" + _clip(piece, 30) + "`"


_TERMINALS = {
    "TOOL": "`TOOL`", "KW_COLON": "`:`", "COLON": "`:`", "NAME": "a tool name", "QUOTED_NAME": "a tool name",
    "ARGS": "`ARGS:`", "LPAR": "`(`", "RPAR": "`)`", "LBRACE": "`{`", "RBRACE": "`}`", "LSQB": "`[`",
    "RSQB": "`]`", "COMMA": "`,`", "EQ": "`=`", "KEY": "a key=value pair", "IDENT": "a key",
    "STRING": "a string", "SQ_STRING": "a string", "NUMBER": "a number", "TRUE": "true", "FALSE": "false",
    "NULL": "null", "BARE": "an argument", "SH_BARE": "an argument", "UQ": "a value", "SH_UQ": "a value",
    "KV_MORE": "a key=value pair", "SH_MORE": "a key=value pair", "$END": "the end of the line",
}
_TERM_ORDER = list(dict.fromkeys(_TERMINALS.values()))


def _describe_expected(names: Iterable[str]) -> list[str]:
    out = {_TERMINALS.get(n, n) for n in names if n != "WS"}
    return sorted(out, key=lambda d: (_TERM_ORDER.index(d) if d in _TERM_ORDER else len(_TERM_ORDER), d))


def _excerpt(lines: list[str], line: int, column: int, width: int = 100) -> str:
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    start = 0
    if len(src) > width:
        start = max(0, min(column - 1 - width // 2, len(src) - width))
    shown = src[start:start + width]
    pad = "".join("\t" if c == "\t" else " " for c in shown[:max(column - 1 - start, 0)])
    lead = "\u2026" if start else ""
    tail = "\u2026" if start + width < len(src) else ""
    return f"{lead}{shown}{tail}\n{' ' if lead else ''}{pad}^"


# ---- the known-bad table, consulted like lark's match_examples ----

_INDEX: dict | None = None
_INDEX_LOCK = threading.Lock()


_NOT_EXPECTED = frozenset({"WS"})


def _key_views(key: tuple) -> tuple[tuple, ...]:
    """The ways a failure is matched against the examples, most specific first:
    (parser state, character class), (what was expected, character class), parser state,
    what was expected."""
    state, expected, cls, kw = key
    return (("s", state, cls, kw), ("e", expected, cls, kw), ("s", state, kw), ("e", expected, kw),
            ("s", state), ("e", expected))


def _label_for(key: tuple) -> str:
    if getattr(_TLS, "building", False):
        return "bad_call"
    index = _error_index()
    for view in _key_views(key):
        label = index.get(view)
        if label is not None:
            return label
    return "bad_call"


def _error_index() -> dict:
    """Parse every known-bad example once and remember where it failed -> its label."""
    global _INDEX
    if _INDEX is not None:
        return _INDEX
    with _INDEX_LOCK:
        if _INDEX is None:
            index: dict = {}
            _TLS.building = True
            try:
                for cls in ERROR_CLASSES:
                    for example in cls.examples:
                        try:
                            parse_reply(example)
                        except ParseError as err:
                            if err._key is not None:
                                for view in _key_views(err._key):
                                    index.setdefault(view, cls.label)
            finally:
                _TLS.building = False
            _INDEX = index
    return _INDEX


# ---- tools: binding bare arguments, examples for feedback ----

def _tool_specs(tools: Any) -> dict[str, dict]:
    """name -> JSON schema of its parameters, from Tool objects, a ToolSet/mapping, OpenAI-style
    dicts, or plain names."""
    if tools is None:
        return {}
    out: dict[str, dict] = {}
    if isinstance(tools, Mapping):
        for key, t in tools.items():
            name, params = _one_spec(t)
            out[name or str(key)] = params
        return out
    if isinstance(tools, str):
        tools = [tools]
    for t in tools:
        name, params = _one_spec(t)
        if name:
            out[name] = params
    return out


def _one_spec(t: Any) -> tuple[str | None, dict]:
    if isinstance(t, str):
        return t, {}
    if isinstance(t, Mapping):
        fn = t.get("function", t) if isinstance(t.get("function"), Mapping) else t
        params = fn.get("parameters")
        if params is None and fn.get("type") == "object":
            params = fn
        name = fn.get("name")
        return (str(name) if name else None), dict(params or {})
    name = getattr(t, "name", None)
    params = getattr(t, "parameters", None)
    return (str(name) if name else None), dict(params or {}) if isinstance(params, Mapping) else {}


def _bind(name: str, text: str, specs: dict) -> dict | str:
    """Bind a bare argument to the tool's single required parameter (or its only parameter)."""
    params = specs.get(name)
    if not params:
        return text
    props = params.get("properties") or {}
    required = params.get("required") or []
    if len(required) == 1:
        key = required[0]
    elif not required and len(props) == 1:
        key = next(iter(props))
    else:
        return text
    return {key: _coerce(text, props.get(key) or {})}


_PY_LITERALS = {"True": True, "False": False, "None": None}
_TYPE_CHECK = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _coerce(text: str, schema: Mapping) -> Any:
    """The bare text as the parameter's type when it reads as one (`3` for an integer)."""
    types = schema.get("type")
    if not types:
        return text
    if isinstance(types, str):
        types = [types]
    if "string" in types:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        if text not in _PY_LITERALS:
            return text
        value = _PY_LITERALS[text]
    for t in types:
        check = _TYPE_CHECK.get(t)
        if check is not None and check(value):
            return value
    return text


def _example_call(specs: dict[str, dict], name: str | None) -> str:
    if not specs:
        return render_call(ToolCall(name if name and _NAME_FULL.match(name) else "tool_name", {"key": "value"}))
    chosen = None
    if name in specs:
        chosen = name
    elif name:
        close = difflib.get_close_matches(name, list(specs), n=1, cutoff=0.5)
        chosen = close[0] if close else None
    if chosen is None:
        chosen = next((n for n, p in specs.items() if p.get("required")), next(iter(specs)))
    params = specs[chosen]
    props = params.get("properties") or {}
    required = params.get("required", list(props))
    args = {k: example_value(props.get(k) or {}) for k in required if k in props}
    if not _NAME_FULL.match(chosen):  # pragma: no cover - tool layers validate names
        return f"TOOL: {chosen} ARGS: {json.dumps(args, ensure_ascii=False)}"
    return render_call(ToolCall(chosen, args))


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------

def parse_reply(text: str, tools: Any = None, *, strict: bool = False) -> Reply:
    """Read a model reply: its tool calls, its final answer, or a :class:`ParseError`.

    ``tools``: None, or tools with ``.name`` and ``.parameters`` (a JSON schema) -- a list, a
    mapping such as a ToolSet, OpenAI-style dicts or plain names. With tools, a bare argument
    (``ARGS: 17 * 24``) binds to the tool's single required parameter. ``strict=True`` makes a
    reply with neither calls nor ANSWER an error (label ``no_call_or_answer``) instead of the
    final answer.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_reply() needs a str, not {type(text).__name__}")
    return _Reader(text, tools).read(strict)


def parse_call(line: str, tools: Any = None) -> ToolCall:
    """Parse one call (``TOOL: ...``, possibly spanning lines); anything else is a ParseError."""
    reply = parse_reply(line, tools)
    if len(reply.calls) != 1:
        raise ParseError("expected exactly one tool call", label="bad_call",
                         excerpt=_excerpt(line.split("\n"), 1, 1), expected=["TOOL: <name> ARGS: {...}"])
    return reply.calls[0]


def _plain_bare(s: str) -> bool:
    """Can the string be written after ARGS: as is and read back unchanged?"""
    return (bool(s) and s == s.strip() and "\n" not in s and "\r" not in s and s[0] not in "{[\"'"
            and _KEY_EQ.match(s) is None)


def render_call(call: ToolCall) -> str:
    """The canonical line for a call: ``TOOL: name ARGS: {"key": value}``.

    ``parse_reply(render_call(c)).calls == [c]`` for every valid call. A bare string argument is
    written as is when it reads back unchanged, else as a JSON string (which reads back as the
    same bare argument).
    """
    name = call.name
    if not isinstance(name, str) or not _NAME_FULL.match(name):
        raise ValueError(f"not a valid tool name: {name!r}")
    args = call.args
    if isinstance(args, str):
        return f"TOOL: {name} ARGS: {args if _plain_bare(args) else json.dumps(args, ensure_ascii=False)}"
    if not args:
        return f"TOOL: {name} ARGS: {{}}"
    return f"TOOL: {name} ARGS: {json.dumps(args, ensure_ascii=False)}"


def render_answer(text: str) -> str:
    """The canonical answer: ``ANSWER: text``."""
    return f"ANSWER: {text}"
