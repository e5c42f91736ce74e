"""The LALR grammar ``grammars/reply.lark`` (loaded once) and the transformer that turns the parse
of one call into a frozen :class:`CallSyntax`.

This is the only module of textagent that imports lark: a failed parse leaves it as a
:class:`GrammarFailure`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .. import _resources
from .error_table import CLASS_BY_LABEL
from .lines import DQ_RE, SQ_RE
from .types import MAX_DEPTH, CallSyntax


def grammar_text() -> str:
    """The text of ``grammars/reply.lark`` (from the installed package or the source checkout)."""
    return _resources.grammar_text("reply.lark")


class SemanticError(Exception):
    """Raised inside the transformer for errors the grammar cannot express."""

    def __init__(self, label: str, pos: int, message: str, expected: Iterable[str] = ()):
        super().__init__(message)
        self.label = label
        self.pos = pos
        self.message = message
        self.expected = list(expected)


class GrammarFailure(Exception):
    """Where the grammar stopped: the offset in the call text, the terminals it would have taken
    there, and the parser state (the known-bad examples are matched on it)."""

    def __init__(self, offset: int, expected: Iterable[str], state: Any):
        super().__init__(offset)
        self.offset = offset
        self.expected = set(expected)
        self.state = state


# ---- decoding values ----

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_ESC_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.S)


def _unescape_lenient(body: str) -> str:
    """Decode JSON-style escapes; an unknown escape keeps its backslash (as Python does)."""
    if "\\" not in body:
        return body

    def one(m: re.Match[str]) -> str:
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


def _start(tok: Token) -> int:
    """Where a token begins in the call text."""
    assert tok.start_pos is not None  # the lexer sets it on every token it makes
    return tok.start_pos


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
        raise SemanticError(
            "bad_number", _start(tok), CLASS_BY_LABEL["bad_number"].title, ["a shorter number"]
        ) from None


def _bare_text(raw: str) -> str:
    """A bare argument's value: the text, unquoted when it is exactly one quoted string."""
    s = raw.strip()
    if s[:1] == '"' and DQ_RE.fullmatch(s):
        return _decode_dq(s)
    if s[:1] == "'" and SQ_RE.fullmatch(s):
        return _decode_sq(s)
    return s


def clip(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"


# ---- objects and key=value pairs ----

_TLS = threading.local()  # the call text being parsed (continuation pieces are cut from it)


def _pairs(children: list[Any], more_type: str) -> dict[str, Any]:
    """Fold key=value pairs; a continuation piece extends the previous unquoted value.

    (The UQ / SH_UQ terminals take the pieces that continue them in already; a piece met here
    follows a value that is not unquoted, an error, or an unquoted value the lexer ended at a
    line break. The extended text is cut from the call text once, when the value is complete.)
    """
    out: dict[str, Any] = {}
    last_key: str | None = None  # the key of last_tok's value
    last_tok: Token | None = None  # the unquoted value token the next piece may extend
    end: int | None = None  # where the pieces that extend it end

    def extend() -> None:
        text = getattr(_TLS, "text", None)
        if text is not None and last_key is not None and last_tok is not None and end is not None:
            out[last_key] = text[last_tok.start_pos : end].rstrip()

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
                raise SemanticError(
                    "bad_key_value",
                    _start(ch),
                    f"`{clip(ch.value.strip())}` is not a key=value pair (only an unquoted value "
                    "continues after a comma)",
                    ["key=value"],
                )
            end = ch.end_pos
    extend()
    return out


def _unique(into: dict[str, Any], members: list[tuple[str, Any, int]]) -> dict[str, Any]:
    """Add (key, value, position) members to ``into``; a key given twice is an error: which of
    its values was meant cannot be known (small models write the arguments of several calls
    into one object)."""
    for key, value, pos in members:
        if key in into:
            raise SemanticError(
                "duplicate_key",
                pos,
                f"`{clip(str(key))}` is given twice",
                ["each argument once", "one TOOL line per call"],
            )
        into[key] = value
    return into


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object_pairs_hook: refuses a key given twice (the grammar then says where)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def several_objects(text: str) -> list[dict[str, Any]] | None:
    """`{...}, {...}`: two or more JSON objects after one `ARGS:`, each the arguments of a call of
    the same tool (small models list the calls of a parallel question so); None otherwise."""
    if text.count("{") + text.count("[") > MAX_DEPTH:
        return None
    try:
        value = json.loads("[" + text + "]", strict=False, object_pairs_hook=unique_pairs)
    except (ValueError, RecursionError):
        return None
    if len(value) >= 2 and all(type(v) is dict for v in value):
        return value
    return None


class _CallTransformer(Transformer[Token, CallSyntax]):
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


# ---- the parser ----


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
    parser = Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        transformer=_CallTransformer(),
        maybe_placeholders=False,
        propagate_positions=False,
    )
    lexer = getattr(parser.parser, "lexer", None)
    if lexer is not None and hasattr(lexer, "root_lexer"):
        lexer.root_lexer = _NoRootFallback()
    return parser


_PARSER = _parser()


def parse_call_text(text: str) -> CallSyntax:
    """Parse the text of one call. Raises :class:`GrammarFailure` or :class:`SemanticError`."""
    _TLS.text = text
    try:
        return _PARSER.parse(text)  # type: ignore[return-value]  # lark types parse() as a Tree; our transformer makes it a CallSyntax
    except UnexpectedInput as e:
        raise _failure(e, text) from None
    finally:
        _TLS.text = None


def _failure(e: UnexpectedInput, text: str) -> GrammarFailure:
    expected: Iterable[str]
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
    return GrammarFailure(offset, expected, getattr(getattr(e, "state", None), "position", None))


_TERMINALS = {
    "TOOL": "`TOOL`",
    "KW_COLON": "`:`",
    "COLON": "`:`",
    "NAME": "a tool name",
    "QUOTED_NAME": "a tool name",
    "ARGS": "`ARGS:`",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "COMMA": "`,`",
    "EQ": "`=`",
    "KEY": "a key=value pair",
    "IDENT": "a key",
    "STRING": "a string",
    "SQ_STRING": "a string",
    "NUMBER": "a number",
    "TRUE": "true",
    "FALSE": "false",
    "NULL": "null",
    "BARE": "an argument",
    "SH_BARE": "an argument",
    "UQ": "a value",
    "SH_UQ": "a value",
    "KV_MORE": "a key=value pair",
    "SH_MORE": "a key=value pair",
    "$END": "the end of the line",
}
_TERM_ORDER = list(dict.fromkeys(_TERMINALS.values()))


def describe_expected(names: Iterable[str]) -> list[str]:
    """The grammar's terminal names as words, in a stable order."""
    out = {_TERMINALS.get(n, n) for n in names if n != "WS"}
    return sorted(out, key=lambda d: (_TERM_ORDER.index(d) if d in _TERM_ORDER else len(_TERM_ORDER), d))
