"""Hypothesis strategies for the text protocol, to fuzz your own tools, prompts and agents.

Needs ``hypothesis`` (``pip install textagent[test]``)::

    from hypothesis import given
    from textagent import parse_reply
    from textagent.testing import noisy_replies, tool_calls

    @given(st.lists(tool_calls(), min_size=1, max_size=3).flatmap(
        lambda calls: noisy_replies(calls).map(lambda text: (calls, text))))
    def test_my_agent_reads_calls(case):
        calls, text = case
        assert parse_reply(text).calls == calls

What is here:

* :func:`tool_names` -- valid tool names (``[A-Za-z_][A-Za-z0-9_.-]*``), realistic ones first;
* :func:`json_scalars`, :func:`json_values`, :func:`json_args` -- JSON data and argument objects
  (finite floats, any unicode text);
* :func:`bare_args` -- bare arguments (``ARGS: 17 * 24``);
* :func:`tool_calls` -- :class:`~textagent.protocol.ToolCall` values;
* :func:`prose_lines` -- lines the protocol reads as prose (never a call, answer, fence, ...);
* :func:`noisy_calls` -- one call written in any accepted way: keyword case, emphasis, list and
  quote markers, quoted names, ARGS on the next line, pretty-printed JSON, key=value pairs,
  the ``name(...)`` shorthand, code fences;
* :func:`noisy_replies` -- whole replies holding given calls (in order) among prose, ``THOUGHT:``
  lines and blank lines, with ``\\n`` or ``\\r\\n`` line ends;
* :func:`near_miss_replies` -- replies with one realistic mistake, optionally with the error
  label :func:`~textagent.protocol.parse_reply` must raise;
* :func:`answer_texts` -- answers that survive ``parse_reply(render_answer(text))``;
* :func:`garbage_replies` -- keyword-heavy junk for "never crashes" properties.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

try:
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError("textagent.testing needs hypothesis: pip install 'textagent[test]'") from exc

from .protocol import NAME_PATTERN, ToolCall, line_kind, misplaced_call, render_answer, render_call

__all__ = [
    "NEAR_MISS_LABELS",
    "answer_texts",
    "bare_args",
    "garbage_replies",
    "json_args",
    "json_scalars",
    "json_schemas",
    "json_values",
    "near_miss_replies",
    "noisy_calls",
    "noisy_replies",
    "prose_lines",
    "tool_calls",
    "tool_names",
]

_REALISTIC_NAMES = (
    "search",
    "get_weather",
    "calculate",
    "read_file",
    "web.search",
    "list-files",
    "_private",
    "TOOL",
    "args",
    "answer",
    "Search2",
)
_IDENT = re.compile(NAME_PATTERN + r"\Z")


def tool_names() -> SearchStrategy[str]:
    """Valid tool names: some realistic ones (including keyword look-alikes), then any."""
    return st.one_of(
        st.sampled_from(_REALISTIC_NAMES),
        st.from_regex(re.compile(NAME_PATTERN, re.A), fullmatch=True).filter(lambda s: len(s) <= 40),
    )


def json_scalars() -> SearchStrategy:
    """None, booleans, integers, finite floats and any text."""
    return st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30)
    )


def json_values(max_leaves: int = 8) -> SearchStrategy:
    """Nested JSON values (lists and objects of scalars)."""
    return st.recursive(
        json_scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def json_args(keys: SearchStrategy[str] | None = None) -> SearchStrategy[dict]:
    """Argument objects: dicts of JSON values (keys: any text unless ``keys`` is given)."""
    return st.dictionaries(keys if keys is not None else st.text(max_size=12), json_values(), max_size=5)


def bare_args() -> SearchStrategy[str]:
    """Bare arguments: typical expressions and queries, then any non-empty text."""
    typical = st.sampled_from(
        [
            "17 * 24",
            "(3 + 4) ** 2",
            "weather in Paris",
            "42",
            "true",
            "it's fine",
            'say "hi"',
            "a == b",
            "[1, 2]",
            "{not json",
            "x=1",
        ]
    )
    return st.one_of(typical, st.text(min_size=1, max_size=40))


def tool_calls(
    names: SearchStrategy[str] | None = None, args: SearchStrategy | None = None, *, bare: bool = True
) -> SearchStrategy[ToolCall]:
    """ToolCall values. ``args`` defaults to :func:`json_args` (and :func:`bare_args` when
    ``bare`` is true, for a fifth of the calls)."""
    if args is None:
        args = st.one_of(json_args(), json_args(), json_args(), json_args(), bare_args()) if bare else json_args()
    return st.builds(ToolCall, names if names is not None else tool_names(), args)


_PROSE_ALPHABET = st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r")


def _is_prose(line: str) -> bool:
    return line_kind(line) is None and misplaced_call(line) is None and line.lstrip(" \t>")[:1] not in ("{", "[")


def prose_lines() -> SearchStrategy[str]:
    """Lines the protocol reads as prose: realistic sentences and ``THOUGHT:`` lines, or any
    text that is not a call, ARGS, ANSWER, OBSERVATION or fence line (and does not start with
    ``{``/``[``, which would continue an ``ARGS:`` left open on the line before)."""
    sentences = st.sampled_from(
        [
            "Let me think about this.",
            "THOUGHT: I should look this up first.",
            "Thought: the user wants the weather.",
            "I will call a tool.",
            "Tools are useful.",
            "The answer is not known yet.",
            "  indented prose",
            "- a bullet point",
            "> a quoted line",
            "**bold** text",
            "Observations are hard.",
            "Answer me this",
            "tool-use is enabled",
            "TOOLS: none needed",
        ]
    )
    return st.one_of(sentences, st.text(_PROSE_ALPHABET, max_size=60)).filter(_is_prose)


# ---- noisy renderings of one call ----------------------------------------------------------

_DECORATIONS = ("", "  ", "\t", "- ", "* ", "+ ", "1. ", "12) ", "> ", "> - ")


def _keyword(draw, word: str) -> str:
    case = draw(st.sampled_from((str.upper, str.lower, str.title)))(word)
    style = draw(st.sampled_from(("{w}:", "{w} :", "**{w}:**", "**{w}**:", "__{w}__:", "{w}:  ")))
    return style.format(w=case)


def _kv_text(args: dict) -> str | None:
    """key=value form, when every key is an identifier."""
    if not args or not all(_IDENT.match(k) for k in args):
        return None
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())


@st.composite
def noisy_calls(draw, call: ToolCall) -> list[str]:
    """The lines of one call written in any accepted way (a list of lines without line ends).

    Parsing them gives back ``call``."""
    name = call.name
    args = call.args
    deco = draw(st.sampled_from(_DECORATIONS))
    shown_name = draw(st.sampled_from((name, f"`{name}`", f'"{name}"', f"'{name}'")))
    tool_kw = _keyword(draw, "tool")
    args_kw = _keyword(draw, "args")
    canonical = render_call(call)
    canonical_args = canonical.split(" ARGS: ", 1)[1]
    kv = _kv_text(args) if isinstance(args, dict) else None
    form = draw(st.sampled_from(_forms(args, kv)))
    head = f"{tool_kw} {shown_name}"
    if form == "line":
        lines = [f"{head} {args_kw} {canonical_args}"]
    elif form == "next_line":
        lines = [head, f"{args_kw} {canonical_args}"]
    elif form == "no_args":
        lines = [head]
    elif form == "empty_args":
        lines = [f"{head} {args_kw}"]
    elif form == "empty_parens":
        lines = [f"{tool_kw} {name}()"]
    elif form == "pretty":
        body = json.dumps(args, ensure_ascii=False, indent=draw(st.sampled_from((2, 4)))).split("\n")
        lines = [f"{head} {args_kw} {body[0]}", *body[1:]]
    elif form == "fenced_object":
        body = json.dumps(args, ensure_ascii=False, indent=2).split("\n")
        lines = [f"{head} {args_kw}", draw(st.sampled_from(("```json", "```", "~~~"))), *body, "```"]
    elif form == "kv":
        lines = [f"{head} {args_kw} {kv}"]
    elif form == "shorthand":
        lines = [f"{tool_kw} {name}({kv})"]
    else:  # shorthand_bare
        lines = [f"{tool_kw} {name}({json.dumps(args, ensure_ascii=False)})"]
    return _decorated(draw, deco, lines)


def _forms(args: Any, kv: str | None) -> list[str]:
    """The ways a call with these arguments may be written (``kv``: their key=value form, if any)."""
    forms = ["line", "next_line"]
    if not isinstance(args, dict):
        return [*forms, "shorthand_bare"]
    if not args:
        return [*forms, "no_args", "empty_args", "empty_parens"]
    forms += ["pretty", "fenced_object"]
    return [*forms, "kv", "shorthand"] if kv is not None else forms


def _decorated(draw: Any, deco: str, lines: list[str]) -> list[str]:
    """A call's lines behind a list or quote marker, maybe inside inline code or emphasis, maybe
    in a code fence."""
    if deco.startswith(">"):
        lines = [deco + lines[0]] + ["> " + ln for ln in lines[1:]]
    else:
        lines = [deco + lines[0], *lines[1:]]
    if len(lines) == 1 and draw(st.integers(0, 5)) == 0:
        # a wrapper closed at the end of the line: inline code or emphasis
        line = lines[0]
        stripped = line.lstrip(" \t")
        lead = line[: len(line) - len(stripped)]
        if stripped[:1].isalpha():
            lines = [lead + draw(st.sampled_from(("`{}`", "**{}**"))).format(stripped)]
    if draw(st.integers(0, 4)) == 0:
        fence = draw(st.sampled_from(("```", "```json", "```text", "~~~")))
        lines = [fence, *lines, fence[:3]]
    return lines


@st.composite
def noisy_replies(draw, calls: Sequence[ToolCall] | SearchStrategy) -> str:
    """A reply that holds ``calls`` (a list, or a strategy of lists), in order, written with
    :func:`noisy_calls`, among prose lines, THOUGHT lines and blank lines."""
    drawn: Sequence[ToolCall] = draw(calls) if isinstance(calls, SearchStrategy) else calls
    blocks: list[list[str]] = []
    for call in drawn:
        blocks.append(draw(st.lists(prose_lines() | st.just(""), max_size=3)))
        blocks.append(draw(noisy_calls(call)))
    blocks.append(draw(st.lists(prose_lines() | st.just(""), max_size=3)))
    eol = draw(st.sampled_from(("\n", "\n", "\r\n")))
    return eol.join(line for block in blocks for line in block)


# ---- near misses ---------------------------------------------------------------------------

#: The labels :func:`near_miss_replies` produces.
NEAR_MISS_LABELS = (
    "missing_name",
    "empty_tool_line",
    "unbalanced_braces",
    "unterminated_string",
    "args_not_object",
    "bad_key_value",
    "missing_colon",
    "missing_args_keyword",
    "unquoted_string",
    "missing_comma",
    "trailing_text",
    "args_without_tool",
    "unclosed_paren",
    "wrong_keyword",
)

# keywords a call is written after by mistake (error class wrong_keyword)
_WRONG_KEYWORDS = ("CALL:", "Function:", "**Action:**", "TOOLS:", "tool_call:")
_WORD = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda w: w not in ("true", "false", "null", "none", "nan", "infinity")
)
_PLAIN_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'), max_size=15)


def near_miss_replies(labelled: bool = False, labels: Sequence[str] | None = None) -> SearchStrategy:
    """Replies with one realistic mistake; parsing them raises ParseError. With
    ``labelled=True`` the strategy gives ``(text, label)``, the label parse_reply must report.
    ``labels`` restricts the mistakes to some of :data:`NEAR_MISS_LABELS`."""
    choices = tuple(labels) if labels is not None else NEAR_MISS_LABELS
    unknown = set(choices) - set(NEAR_MISS_LABELS)
    if unknown or not choices:
        raise ValueError(f"no near misses for {sorted(unknown) or choices}; choose from {NEAR_MISS_LABELS}")
    return _near_misses(labelled, choices)


@st.composite
def _near_misses(draw, labelled: bool, choices: tuple[str, ...]):
    name = draw(st.sampled_from(_REALISTIC_NAMES[:6]) | st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True))
    key = draw(_WORD)
    key2 = draw(_WORD.filter(lambda k: k != key))
    word = draw(_WORD)
    text = draw(_PLAIN_TEXT)
    obj = json.dumps({key: draw(json_scalars())}, ensure_ascii=False)
    label = draw(st.sampled_from(choices))
    tool = draw(st.sampled_from(("TOOL:", "Tool:", "tool:", "**TOOL:**")))
    args_kw = draw(st.sampled_from(("ARGS:", "args:", "Args:")))
    cases = {
        "missing_name": f"{tool} {args_kw} {obj}",
        "empty_tool_line": tool,
        "unbalanced_braces": f"{tool} {name} {args_kw} {obj[:-1]}",
        "unterminated_string": f'{tool} {name} {args_kw} {{"{key}": "{text}}}',
        "args_not_object": f"{tool} {name} {args_kw} {json.dumps([draw(json_scalars())], ensure_ascii=False)}",
        "bad_key_value": f'{tool} {name} {args_kw} {key}="{text}" {key2}=1',
        "missing_colon": f"TOOL {name} {args_kw} {obj}",
        "missing_args_keyword": f"{tool} {name} {obj}",
        "unquoted_string": f'{tool} {name} {args_kw} {{"{key}": {word}}}',
        "missing_comma": f'{tool} {name} {args_kw} {{"{key}": 1 "{key2}": 2}}',
        "trailing_text": f"{tool} {name} {args_kw} {obj} {word}",
        "args_without_tool": f"{args_kw} {obj}",
        "unclosed_paren": f"{tool} {name}({key}={json.dumps(text, ensure_ascii=False)}",
        "wrong_keyword": f"{draw(st.sampled_from(_WRONG_KEYWORDS))} {name} {args_kw} {obj}",
    }
    reply = cases[label]
    if draw(st.booleans()):
        reply = draw(prose_lines()) + "\n" + reply
    return (reply, label) if labelled else reply


# ---- answers and garbage ------------------------------------------------------------------


def answer_texts() -> SearchStrategy[str]:
    """Answer texts (possibly several lines) that ``parse_reply(render_answer(t)).answer``
    gives back: no line of them is a call or an OBSERVATION, the first does not read as one
    (``cd ARGS: {}``), and no surrounding whitespace."""
    return (
        st.lists(prose_lines(), min_size=1, max_size=4)
        .map(lambda ls: "\n".join(ln.rstrip() for ln in ls).strip())
        .filter(lambda t: bool(t) and all(line_kind(ln) in (None, "answer", "args", "fence") for ln in t.split("\n")))
        .filter(lambda t: misplaced_call(render_answer(t)) is None)
    )


_FRAGMENTS = (
    "TOOL:",
    "tool",
    "ARGS:",
    "args",
    "ANSWER:",
    "Final Answer:",
    "OBSERVATION",
    "```",
    "~~~",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "`",
    ":",
    ",",
    "=",
    "==",
    "\\",
    "\n",
    "\r\n",
    " ",
    "\t",
    "**",
    "__",
    "- ",
    "1. ",
    "> ",
    "true",
    "None",
    "NaN",
    "-",
    "1e999",
    "9" * 30,
    "\u00e9",
    "\u2028",
    "\x00",
    "\ud7ff",
    "\U0001f600",
    "x",
    "search",
    "q",
)


def garbage_replies(max_size: int = 40) -> SearchStrategy[str]:
    """Keyword-heavy junk: fragments of the protocol in random order, with random text."""
    piece = st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=4))
    return st.lists(piece, max_size=max_size).map("".join)


_SCHEMA_KEYS = st.sampled_from(["a", "b", "city", "days", "on", "x_1", "name", "unit"])


def _leaf_schemas() -> SearchStrategy[dict]:
    small = st.integers(min_value=0, max_value=5)
    return st.one_of(
        st.just({"type": "string"}),
        st.builds(lambda lo, extra: {"type": "string", "minLength": lo, "maxLength": lo + extra}, small, small),
        st.just({"type": "integer"}),
        st.builds(lambda lo, extra: {"type": "integer", "minimum": lo, "maximum": lo + extra}, small, small),
        st.just({"type": "number"}),
        st.just({"type": "boolean"}),
        st.just({"type": "null"}),
        st.lists(
            st.one_of(st.text(max_size=6), st.integers(-3, 3), st.booleans()),
            min_size=1,
            max_size=4,
            unique_by=lambda v: (type(v), v),
        ).map(lambda values: {"enum": values}),
        st.just({"type": ["string", "null"]}),
        st.just({}),
    )


def json_schemas(max_leaves: int = 6) -> SearchStrategy[dict]:
    """JSON schemas of tool arguments (an object at the top): nested objects and arrays, enums,
    bounds, required subsets -- to fuzz grammar generation or argument validation."""

    def objects(children: SearchStrategy[dict]) -> SearchStrategy[dict]:
        return st.dictionaries(_SCHEMA_KEYS, children, max_size=4).flatmap(
            lambda props: st.lists(
                st.sampled_from(sorted(props)) if props else st.nothing(), unique=True, max_size=len(props)
            ).map(lambda req: {"type": "object", "properties": props, "required": req})
        )

    nested = st.recursive(
        _leaf_schemas(),
        lambda children: st.one_of(
            objects(children),
            st.builds(lambda items, hi: {"type": "array", "items": items, "maxItems": hi}, children, st.integers(0, 4)),
        ),
        max_leaves=max_leaves,
    )
    return objects(nested)
