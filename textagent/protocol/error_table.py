"""The error classes: a label per kind of format error, with known-bad replies, and ParseError.

The table is data: each class's known-bad examples teach the parser which label a failure gets
(see :mod:`.labels`); the hint the model reads for a label is in
``textagent/prompts/text/format_hints.json``. A ParseError holds data only (where, what was
expected, the excerpt, the label); ``textagent.prompts.parse_feedback`` words it for the model.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import _resources
from ..errors import TextagentError
from .types import MAX_DEPTH


@dataclass(frozen=True)
class ErrorClass:
    """One class of format error: a label, what is wrong, how to fix it, and known-bad replies."""

    label: str
    title: str
    hint: str
    examples: tuple[str, ...]


#: label -> the hint the model reads (model-facing text lives with the prompts).
HINTS: dict[str, str] = json.loads(_resources.data_text("prompts", "text", "format_hints.json"))


def _entry(label: str, title: str, examples: tuple[str, ...]) -> ErrorClass:
    return ErrorClass(label, title, HINTS[label], examples)


#: The table of known-bad replies, in priority order (an earlier class wins when two examples
#: fail in the same parser state). Every example must raise ParseError with its label.
ERROR_CLASSES: tuple[ErrorClass, ...] = (
    _entry(
        "missing_colon",
        "a `:` is missing",
        (
            "TOOL search ARGS: {}",
            "TOOL search",
            "TOOL: search ARGS {}",
            'TOOL: search ARGS {"q": 1}',
            'TOOL: search ARGS: {"q" "cats"}',
            'TOOL: search ARGS: {"q" 1}',
            "TOOL: search ARGS: {q}",
            "TOOL: search ARGS: {'q', 1}",
            'TOOL: search ARGS: {"q"}',
            "TOOL: search ARGS: {q 1}",
            "TOOL: search ARGS",
            "TOOL: search ARGS x",
            "TOOL: search ARGS: {'q' 'x'}",
            "TOOL: search ARGS: {q x}",
            "TOOL: search ARGS: {q [1]}",
            'TOOL: search ARGS: {q "x"}',
            "TOOL: search ARGS: {q {}}",
            "TOOL: search ARGS: {q, x: 1}",
            "TOOL: search ARGS: {q}}",
            "TOOL: search ARGS: {'q'}",
        ),
    ),
    _entry(
        "empty_tool_line",
        "the TOOL line has no tool name",
        ("TOOL:", "TOOL:   ", "**TOOL:**", "- Tool :", "TOOL", "Thought: let me look.\nTOOL:\nsearch"),
    ),
    _entry(
        "missing_name",
        "the tool name is missing",
        ('TOOL: ARGS: {"q": "cats"}', 'TOOL: {"q": "cats"}', "TOOL: (q=cats)", "TOOL: [1]", "tool: : x", "TOOL: = x"),
    ),
    _entry(
        "bad_name",
        "the tool name is not valid",
        (
            "TOOL: 3search ARGS: {}",
            'TOOL: "search ARGS: {}',
            "TOOL: <search> ARGS: {}",
            "TOOL: -x ARGS: {}",
            "TOOL: `search ARGS: {}",
            "TOOL: 'search ARGS: {}",
            "TOOL: \u00e9t\u00e9 ARGS: {}",
            "TOOL: /search ARGS: {}",
            "TOOL: *search* ARGS: {}",
            "TOOL: )",
        ),
    ),
    _entry(
        "missing_args_keyword",
        "there is text after the tool name but no `ARGS:`",
        (
            "TOOL: search cats",
            'TOOL: search {"q": "cats"}',
            "TOOL: search [1]",
            'TOOL: search "cats"',
            "TOOL: search, ARGS: {}",
            "TOOL: search: cats",
            "TOOL: `search` 1",
            "TOOL: search 'x'",
            "TOOL: search = 1",
            "TOOL: search )",
            "TOOL: search }",
        ),
    ),
    _entry(
        "unbalanced_braces",
        "the braces of the arguments do not balance",
        (
            'TOOL: search ARGS: {"q": "cats"',
            'TOOL: search ARGS: {"q": {"lang": "en"}',
            'TOOL: search ARGS: {"q": "cats"}}',
            'TOOL: search ARGS: {"q": ["a", "b"]}]',
            'TOOL: search({"q": "cats"})}',
            'TOOL: search({"q": "cats"}]',
            'TOOL: search ARGS: {"q": "x"} {',
            'TOOL: search ARGS: {"q": "x"} [',
            "TOOL: search({})})",
            'TOOL: search ARGS: {"q": ["a"}',
            "TOOL: search ARGS: {]",
            'TOOL: search ARGS: {"q": 1]',
            'TOOL: search ARGS: {"q": 1)}',
            'TOOL: search ARGS: {"q": [1)]}',
            'TOOL: search ARGS: {"q": [1]]}',
        ),
    ),
    _entry(
        "unterminated_string",
        "a string is not closed",
        (
            'TOOL: search ARGS: {"q": "cats}',
            "TOOL: search ARGS: {'q': 'cats}",
            'TOOL: search ARGS: {"q: "cats"}',
            "TOOL: search ARGS: {'q: 1}",
            'TOOL: search ARGS: q="cats',
            "TOOL: search ARGS: q='cats",
            'TOOL: search(q="cats)',
            "TOOL: search(q='cats)",
            'TOOL: search ARGS: {"q": ["cats]}',
            'TOOL: search ARGS: {"q": "a", "b: 1}',
            'TOOL: search ARGS: {"q": 1, "r": "x\ny"}',
            'TOOL: search ARGS: q=1, r="x',
            'TOOL: search(q=1, r="x)',
            "TOOL: search ARGS: {'q': ['x]}",
            'TOOL: search ARGS: {"q": 1 "r}',
            'TOOL: search ARGS: {"q" "r}',
            "TOOL: search ARGS: {'q' 'r}",
            "TOOL: search ARGS: ['x]",
        ),
    ),
    _entry(
        "duplicate_key",
        "an argument is given twice",
        (
            'TOOL: play ARGS: {"artist": "A", "minutes": 20, "artist": "B", "minutes": 15}',
            'TOOL: search ARGS: {"q": "cats", "q": "dogs"}',
            "TOOL: search ARGS: q=cats, q=dogs",
            'TOOL: search(q="cats", q="dogs")',
            'TOOL: search ARGS: {"filter": {"lang": "en", "lang": "fr"}}',
            'TOOL: search ARGS:\n{"q": "cats",\n "q": "dogs"}',
        ),
    ),
    _entry(
        "args_not_object",
        "the arguments are not an object",
        (
            "TOOL: search ARGS: [1, 2]",
            "TOOL: search ARGS: []",
            'TOOL: search ARGS: ["cats"]',
            'TOOL: search ARGS:\n["cats",\n "dogs"]',
        ),
    ),
    _entry(
        "bad_key_value",
        "the key=value arguments are malformed",
        (
            "TOOL: search ARGS: q=, n=3",
            'TOOL: search ARGS: q="cats" n=3',
            "TOOL: search ARGS: q=cats, =3",
            'TOOL: search ARGS: q="cats", dogs',
            "TOOL: search ARGS: q=cats n=3",
            "TOOL: search ARGS: q=",
            "TOOL: search ARGS: q=1 n=2",
            "TOOL: search ARGS: q=cats,, n=3",
            'TOOL: search ARGS: q="a"b',
            "TOOL: search ARGS: q=[1] n=2",
            "TOOL: search ARGS: q=true n=2",
            "TOOL: search ARGS: q={} x",
            "TOOL: search(q=, n=3)",
            'TOOL: search(q="cats" n=3)',
            "TOOL: search(q=cats n=3)",
            'TOOL: search(q="cats", dogs)',
            "TOOL: search(q=)",
            "TOOL: search(q=1 n=2)",
            "TOOL: search(q=cats,, n=3)",
            "TOOL: search ARGS: q=1, n=2 x=3",
            "TOOL: search(q=[1] x)",
            "TOOL: search ARGS: q=cats, n=}",
            "TOOL: search ARGS: q=a, n=x y=1",
            "TOOL: search(q=a, n=x y=1)",
            "TOOL: search(q=1, n=)",
            "TOOL: search ARGS: q=1, n=2, =3",
            "TOOL: search(q=1, =2)",
        ),
    ),
    _entry(
        "unclosed_paren",
        "the `(` of the call is not closed",
        (
            "TOOL: search(q=cats",
            "TOOL: search(",
            'TOOL: search("cats"',
            "TOOL: search(q=1, n=2",
            "TOOL: search(q=1,",
            'TOOL: search({"q": 1}',
            "TOOL: search(q=1) x",
            "TOOL: search(q='x' ",
            "TOOL: search(q=cats) and more",
            'TOOL: search("a") then',
        ),
    ),
    _entry(
        "missing_comma",
        "a `,` is missing between two items",
        (
            'TOOL: search ARGS: {"q": "cats" "n": 3}',
            'TOOL: search ARGS: {"q": [1 2]}',
            "TOOL: search ARGS: {'q': 'a' 'n': 1}",
            'TOOL: search ARGS: {"q": 1 n: 2}',
            'TOOL: search ARGS: {"q": [1 "a"]}',
            'TOOL: search ARGS: {"q": {} "n": 1}',
            'TOOL: search ARGS: {"q": [[] []]}',
            "TOOL: search ARGS: {'q': ['a' 'b']}",
            'TOOL: search ARGS: {"q": 1 {}}',
            'TOOL: search ARGS: {"q": [1 {}]}',
            'TOOL: search ARGS: {"q": true false}',
            'TOOL: search ARGS: {"q": [1 true]}',
            'TOOL: search ARGS: {"q": 1 [2]}',
            "TOOL: search ARGS: {'q': 'a' [1]}",
            "TOOL: search ARGS: {'q': [1 'a']}",
            "TOOL: search ARGS: {'q': [1 [2]]}",
            'TOOL: search ARGS: {"q": "a" {}}',
        ),
    ),
    _entry(
        "missing_value",
        "a value is missing",
        (
            'TOOL: search ARGS: {"q": }',
            'TOOL: search ARGS: {"q":, "n": 1}',
            'TOOL: search ARGS: {"q": [1, , 2]}',
            'TOOL: search ARGS: {"q": }}',
            'TOOL: search ARGS: {"q": [}]}',
            "TOOL: search ARGS: {q: }",
            'TOOL: search ARGS: {"q": [,]}',
            'TOOL: search ARGS: {"q": ]}',
            "TOOL: search ARGS: {,}",
            'TOOL: search ARGS: {"q": 1,,}',
            'TOOL: search ARGS: {"q": :}',
            'TOOL: search ARGS: {"q": [:]}',
        ),
    ),
    _entry(
        "unquoted_string",
        "a text value is not quoted",
        (
            'TOOL: search ARGS: {"q": cats}',
            'TOOL: search ARGS: {"q": [cats]}',
            "TOOL: search ARGS: {q: cats}",
            'TOOL: search ARGS: {"q": c@ts}',
            'TOOL: search ARGS: {"q": +1}',
            'TOOL: search ARGS: {"q": .5}',
            'TOOL: search ARGS: {"q": 01}',
            'TOOL: search ARGS: {"q": -}',
            'TOOL: search ARGS: {"q": [-]}',
            'TOOL: search ARGS: {"q": [.5]}',
            'TOOL: search ARGS: {"q": `x`}',
            'TOOL: search ARGS: {"q": [`x`]}',
            'TOOL: search ARGS: {"q": (1)}',
            'TOOL: search ARGS: {"q": [(1)]}',
            'TOOL: search ARGS: {"q": =}',
            'TOOL: search ARGS: {"q": [=]}',
            'TOOL: search ARGS: {"q": 1.}',
            'TOOL: search ARGS: {"q": [1x]}',
            'TOOL: search ARGS: {"q": 12abc}',
            'TOOL: search ARGS: {"q": truex}',
            'TOOL: search ARGS: {"q": )}',
            'TOOL: search ARGS: {"q": [)]}',
            'TOOL: search ARGS: {"q": ?}',
            'TOOL: search ARGS: {"q": [?]}',
        ),
    ),
    _entry(
        "bad_key",
        "an object key is not valid",
        (
            'TOOL: search ARGS: {1: "cats"}',
            'TOOL: search ARGS: {[1]: "cats"}',
            "TOOL: search ARGS: {{}: 1}",
            "TOOL: search ARGS: {-1: 2}",
            "TOOL: search ARGS: {@q: 1}",
            'TOOL: search ARGS: {"q": 1, 2: 3}',
            "TOOL: search ARGS: {: 1}",
            'TOOL: search ARGS: {"q": 1, [x]: 1}',
            'TOOL: search ARGS: {"q": 1, {}: 1}',
            'TOOL: search ARGS: {"q": 1, : 1}',
            'TOOL: search ARGS: {"q": 1, ]}',
            'TOOL: search ARGS: {"q": 1, )}',
            "TOOL: search ARGS: {(q): 1}",
            "TOOL: search ARGS: {=: 1}",
            "TOOL: search ARGS: {`q`: 1}",
            "TOOL: search ARGS: {)}",
            'TOOL: search ARGS: {"q": 1, `x`: 1}',
            'TOOL: search ARGS: {"q": 1, (x): 1}',
            'TOOL: search ARGS: {"q": 1, =: 1}',
            'TOOL: search ARGS: {"q": 1, @: 1}',
        ),
    ),
    _entry(
        "trailing_text",
        "there is text after the arguments",
        (
            'TOOL: search ARGS: {"q": "cats"} please',
            'TOOL: search ARGS: {"q": "cats"} "x"',
            "TOOL: search ARGS: {} 1",
            "TOOL: search() x",
            'TOOL: search ARGS: {"q": 1}:',
            "TOOL: search ARGS: {} 'x'",
            "TOOL: search ARGS: {} (x)",
            "TOOL: search ARGS: {} = 1",
            "TOOL: search() 'x'",
            'TOOL: search() "x"',
            "TOOL: search() 1",
            "TOOL: search() {}",
            "TOOL: search() :",
            "TOOL: search() ,",
            "TOOL: search() (",
            "TOOL: search() )",
            "TOOL: search() =",
            "TOOL: search() `x`",
            "TOOL: search ARGS: {} `x`",
            "TOOL: search ARGS: {} ?",
            "TOOL: search() ?",
            "TOOL: search ARGS: {} )",
        ),
    ),
    _entry(
        "bad_number",
        "a number is out of range",
        ('TOOL: search ARGS: {"n": ' + "9" * 5000 + "}",),
    ),
    _entry(
        "too_deep",
        f"the arguments nest deeper than {MAX_DEPTH} levels",
        (
            "TOOL: search ARGS: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
            'TOOL: search ARGS: {"q": ' + '{"q": ' * MAX_DEPTH + "1" + "}" * (MAX_DEPTH + 1),
        ),
    ),
    _entry(
        "args_without_tool",
        "an `ARGS:` line has no TOOL line before it",
        ('ARGS: {"q": "cats"}', 'I will search now.\nARGS: {"q": "cats"}', '- **ARGS:** {"q": 1}'),
    ),
    _entry(
        "wrong_keyword",
        "a call starts with another keyword than `TOOL:`",
        (
            'CALL: search ARGS: {"q": "cats"}',
            "I will search now.\nFunction: search ARGS: {}",
            '- **Action:** `search` ARGS: {"q": 1}',
            "TOOLS: search args: {}",
            'ANSWER: search ARGS: {"q": "cats"}',
        ),
    ),
    _entry(
        "no_call_or_answer",
        "the reply has neither a tool call nor an answer",
        (),
    ),
    _entry(
        "bad_call",
        "the tool call could not be read",
        (),
    ),
)

#: label -> known-bad example replies (the same table as ERROR_CLASSES).
KNOWN_BAD: dict[str, tuple[str, ...]] = {c.label: c.examples for c in ERROR_CLASSES}
CLASS_BY_LABEL: dict[str, ErrorClass] = {c.label: c for c in ERROR_CLASSES}

#: What a grammar failure is matched on against the known-bad examples (protocol.labels): the
#: parser state (opaque to us: lark's), the terminals expected there, the character class where
#: it failed, and whether the tool name read is `args`.
ErrorKey = tuple[Hashable, frozenset[str], str, bool]


class ParseError(TextagentError, ValueError):
    """A reply that breaks the protocol.

    ``line``/``column`` are 1-based positions in the original reply text (the column may be one
    past the end of the line, meaning "at the end of the line"). ``expected`` lists what would
    have been accepted there, ``excerpt`` is the line with a caret under the column, ``label``
    is the error class (a key of :data:`KNOWN_BAD`), ``name`` the tool name when it was read.
    ``tools`` are the tools the reply was read against, when given (``parse_reply(text, tools)``).
    ``str(err)`` is a one-line message; ``textagent.prompts.parse_feedback(err)`` is the text
    for the model.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int = 1,
        column: int = 1,
        expected: Iterable[str] = (),
        excerpt: str = "",
        label: str = "bad_call",
        name: str | None = None,
        tools: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.expected = list(expected)
        self.excerpt = excerpt
        self.label = label
        self.name = name
        self.tools = tools
        self._key: ErrorKey | None = None

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"

    def __reduce__(self):
        return (
            _rebuild_error,
            (self.message, self.line, self.column, self.expected, self.excerpt, self.label, self.name),
        )

    @property
    def hint(self) -> str:
        cls = CLASS_BY_LABEL.get(self.label)
        return cls.hint if cls else ""

    def to_dict(self) -> dict[str, Any]:
        """The error's data as JSON (``textagent parse`` prints it under ``"error"``, with the
        feedback the model would read)."""
        return {
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "expected": list(self.expected),
            "label": self.label,
            "excerpt": self.excerpt,
        }


def excerpt(lines: list[str], line: int, column: int, width: int = 100) -> str:
    """The line with a caret under the column, cut to a window around it when long."""
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    start = 0
    if len(src) > width:
        start = max(0, min(column - 1 - width // 2, len(src) - width))
    shown = src[start : start + width]
    pad = "".join("\t" if c == "\t" else " " for c in shown[: max(column - 1 - start, 0)])
    lead = "\u2026" if start else ""
    tail = "\u2026" if start + width < len(src) else ""
    return f"{lead}{shown}{tail}\n{' ' if lead else ''}{pad}^"


def _rebuild_error(message, line, column, expected, excerpt, label, name):
    return ParseError(message, line=line, column=column, expected=expected, excerpt=excerpt, label=label, name=name)
