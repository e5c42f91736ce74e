"""The GBNF generator: valid llama.cpp syntax, and every reply it allows reads as the same calls.

Both directions are property tests over random JSON schemas:
* strings drawn from the grammar parse with ``parse_reply`` and their arguments validate against
  the schema (the grammar is never wider than protocol + schema, for the supported keywords);
* canonical replies built from random valid arguments (``render_call``) are in the grammar.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gbnfkit import GBNFError, Grammar

from textagent.gbnf import MAX_BOUND, literal, reply_grammar, rule_name, schema_grammar, static_rules
from textagent.protocol import ParseError, ToolCall, parse_reply, render_call
from textagent.toolkits import demo
from textagent.tools import Tool, ToolSet

EXAMPLES = int(os.environ.get("TEXTAGENT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


# -- syntax ------------------------------------------------------------------------------------


def test_the_static_rules_are_valid_gbnf():
    grammar = Grammar.parse("root ::= thought* (answer | value | integer)\n" + static_rules())
    assert grammar.matches('{"a": [1, -2.5e10, true, null, "x\\n\\u00e9"]}')
    assert not grammar.matches('{"a":1}')  # canonical separators only


def test_the_demo_grammar_is_valid_and_reads_like_the_protocol():
    grammar = Grammar.parse(reply_grammar(demo.demo_tools()))
    good = [
        'TOOL: calculate ARGS: {"expression": "17 * 24"}',
        'Thought: first the product.\nTOOL: calculate ARGS: {"expression": "17 * 24"}',
        "TOOL: get_time ARGS: {}",
        'TOOL: get_time ARGS: {"timezone": "Asia/Tokyo"}',
        'TOOL: multiply ARGS: {"a": 25, "b": -1.5e2}\nTOOL: toggle_light ARGS: {"room": "kitchen", "on": false}',
        "ANSWER: 508",
        "Thought: done.\nANSWER: It is 8 °C and raining: take a coat.",
        "TOOL: get_time ARGS: {}\n",  # the newline a model ends a line with
        "TOOL: get_time ARGS: {}\nANSWER",  # ... or the line it meant to write next
        "TOOL: get_time ARGS: {}\nOBSERVATION",
        "ANSWER: x\nmore",  # answers of any length and shape
        "ANSWER: Two steps:\n\n- Tools: calculate\n1. toolbox\n> observations\n",
        "ANSWER: Here:\n```python\ndef f(tool):\n    return tool\n```",
        "ANSWER: a\n_toolkit_ and **Observational** notes\n\t`tools`",
    ]
    bad = [
        'TOOL: calculate ARGS: {"expression": 17}',  # wrong type
        'TOOL: multiply ARGS: {"a": 1}',  # missing required key
        'TOOL: multiply ARGS: {"b": 1, "a": 2}',  # keys in schema order only
        'TOOL: multiply ARGS: {"a": 1, "b": 2, "c": 3}',  # unknown key
        'TOOL: calculator ARGS: {"expression": "1"}',  # unknown tool
        'TOOL: calculate ARGS: {"expression":"1"}',  # not canonical
        'TOOL: calculate(expression="1")',  # other argument forms
        'TOOL: calculate ARGS: {"expression": "1"}\nOBSERVATION: 1',
        'TOOL: calculate ARGS: {"expression": "1"}\nANSWER: 1',
        "TOOL: get_time ARGS: {}\n\n",  # one newline ends the calls, not two
        "ANSWER: ",
        "ANSWER:  x",
        "just prose",
        "",
        # an answer's later line the parser would read as a call or an OBSERVATION
        "ANSWER: x\nTOOL: get_time ARGS: {}",
        "ANSWER: x\ntool",
        "ANSWER: x\n  - **Tool:** get_time",
        "ANSWER: x\n> `tool` get_time",
        "ANSWER: x\nObservation: 1",
        "ANSWER: x\n1. __OBSERVATION__ y",
        "ANSWER: x\n\u3000tool: y",
        "ANSWER: x\n\tobservation",
        "ANSWER: x\n\tTOOL: get_time",
        "Thought: a\nThought: b\nThought: c\nThought: d\nANSWER: x",  # at most 3 thoughts
        'TOOL: get_weather ARGS: {"city": "\\ud83d\\ude00"}',  # surrogate escapes
        'TOOL: get_weather ARGS: {"city": "a\nb"}',  # raw control character
    ]
    assert [t for t in good if not grammar.matches(t)] == []
    assert [t for t in bad if grammar.matches(t)] == []


def test_the_answer_cannot_start_with_any_unicode_space():
    node = Grammar.parse(static_rules().replace("thought ::=", "root ::= answer\nthought ::=")).rules["answer-first"]
    spaces = {c for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    inside = lambda c: any(lo <= c <= hi for lo, hi in node[2]) != node[1]  # noqa: E731
    assert not any(inside(c) for c in spaces)
    assert all(inside(c) for c in range(0x110000) if c not in spaces and not 0xD800 <= c <= 0xDFFF)


@given(st.text())
def test_literals_round_trip(text):
    assert Grammar.parse(f"root ::= {literal(text)}\n").matches(text)


def test_literal_escapes_what_llama_cpp_needs():
    assert literal('a"b\\c\n\t\r') == '"a\\"b\\\\c\\n\\t\\r"'
    assert literal("é€😀\x00\x7f") == '"\\xE9\\u20AC\\U0001F600\\x00\\x7F"'


def test_rule_names_are_llama_cpp_words():
    assert rule_name("get_weather") == "get-weather"
    assert rule_name("web.Search") == "web-search"
    assert rule_name("__") == "x"


def test_gbnfkit_refuses_what_llama_cpp_refuses():
    for text in [
        "root ::= foo",
        'x ::= "a"',
        'root ::= "a" [\\q]',
        'root ::= "a"\nroot ::= "b"',
        'root ::= "a" {2,1}',
        'root ::= ("a"',
        'root = "a"',
    ]:
        with pytest.raises(GBNFError):
            Grammar.parse(text)


def test_large_bounds_are_not_expanded():
    grammar = schema_grammar({"type": "string", "maxLength": 100_000})
    assert "100000" not in grammar and Grammar.parse(grammar).matches('"' + "x" * 500 + '"')
    grammar = schema_grammar({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": MAX_BOUND})
    assert Grammar.parse(grammar).matches("[" + ", ".join(["1"] * MAX_BOUND) + "]")
    assert not Grammar.parse(grammar).matches("[" + ", ".join(["1"] * (MAX_BOUND + 1)) + "]")


# -- schema features -------------------------------------------------------------------------------

FEATURES = [
    ({"type": "string", "enum": ["a", "b c", 'q"']}, ['"a"', '"b c"', '"q\\""'], ['"d"', '"A"']),
    ({"type": "string", "enum": ["a", 1, None]}, ['"a"'], ["1", "null"]),
    ({"enum": [1, "x", None, [1, 2], {"k": True}]}, ["1", '"x"', "null", "[1, 2]", '{"k": true}'], ["2", "true"]),
    ({"const": {"a": [1]}}, ['{"a": [1]}'], ['{"a": [2]}', "{}"]),
    ({"type": ["integer", "null"]}, ["-3", "null", "0"], ["1.5", '"1"', "01"]),
    (
        {"type": "number"},
        ["1", "-0.5", "2e10", "1.5E-07", json.dumps(0.00012345678901234567)],
        ["1.", ".5", "1e", "NaN", "Infinity", "1e100"],
    ),
    ({"type": "boolean"}, ["true", "false"], ["True", "1"]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"\\n\\t"'], ['"a"', '"abcd"']),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
        ["[1]", "[1, 2]"],
        ["[]", "[1, 2, 3]", "[1,2]"],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
        ["[]", '["a"]', '["a", true]'],
        ['["a", true, 1]', "[true]"],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}], "minItems": 1, "items": {"type": "null"}},
        ['["a"]', '["a", null, null]'],
        ["[]", '["a", 1]'],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
            "required": ["b"],
        },
        ['{"b": ""}', '{"a": 1, "b": ""}', '{"b": "", "c": null}', '{"a": 1, "b": "x", "c": null}'],
        ["{}", '{"a": 1}', '{"b": "", "a": 1}', '{"c": null, "b": ""}'],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        ["{}", '{"a": 1}', '{"b": 2}', '{"a": 1, "b": 2}'],
        ['{"b": 2, "a": 1}', '{"a": 1, }'],
    ),
    ({"type": "object", "additionalProperties": {"type": "integer"}}, ["{}", '{"x": 1, "y": 2}'], ['{"x": "1"}']),
    ({"type": "object", "additionalProperties": False}, ["{}"], ['{"x": 1}']),
    (
        {
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            ]
        },
        ['"s"', '{"n": 1}'],
        ["1", "{}"],
    ),
    (
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
            ]
        },
        ['{"a": 1, "b": true}'],
        ['{"a": 1}', '{"b": true}'],
    ),
    (
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "v": {"type": "integer"},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                    "required": ["v"],
                }
            },
            "$ref": "#/$defs/node",
        },
        ['{"v": 1}', '{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}'],
        ['{"v": 1, "kids": [{}]}'],
    ),
    ({}, ['{"anything": [1, "x", null]}', "3", '"s"'], ["nope", "{'a': 1}"]),
]


@pytest.mark.parametrize("schema,good,bad", FEATURES, ids=[json.dumps(f[0])[:40] for f in FEATURES])
def test_schema_features(schema, good, bad):
    grammar = Grammar.parse(schema_grammar(schema))
    validator = Draft202012Validator(schema)
    for text in good:
        assert grammar.matches(text), text
        assert validator.is_valid(json.loads(text)), text
    for text in bad:
        assert not grammar.matches(text), text


# -- random schemas, both directions ---------------------------------------------------------------

_KEYS = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.text(max_size=5)
    | st.floats(-1e6, 1e6, allow_nan=False).filter(lambda f: f == 0 or abs(f) > 1e-6)
)


def _bounded(kind_lo, kind_hi, top=4):
    return st.tuples(st.integers(0, top), st.integers(0, top)).map(lambda p: {kind_lo: min(p), kind_hi: max(p)})


def _leaf_schemas():
    string = st.builds(
        lambda b, use: {"type": "string", **(b if use else {})}, _bounded("minLength", "maxLength"), st.booleans()
    )
    return st.one_of(
        string,
        st.sampled_from(
            [
                {"type": "integer"},
                {"type": "number"},
                {"type": "boolean"},
                {"type": "null"},
                {},
                {"type": ["string", "null"]},
                {"type": ["integer", "boolean"]},
            ]
        ),
        st.lists(_SCALARS, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(lambda v: {"enum": v}),
        _SCALARS.map(lambda v: {"const": v}),
    )


def _object_schema(children, keys=_KEYS):
    return st.lists(st.tuples(keys, children, st.booleans()), max_size=4, unique_by=lambda t: t[0]).map(
        lambda props: {
            "type": "object",
            "properties": {k: s for k, s, _ in props},
            "required": [k for k, _, req in props if req],
            "additionalProperties": False,
        }
    )


def _schemas():
    def extend(children):
        return st.one_of(
            st.builds(
                lambda item, b: {"type": "array", "items": item, **b}, children, _bounded("minItems", "maxItems", 3)
            ),
            st.builds(
                lambda items, rest, lo: {
                    "type": "array",
                    "prefixItems": items,
                    "items": rest,
                    "minItems": min(lo, len(items)) if rest is False else lo,
                },
                st.lists(children, min_size=1, max_size=3),
                st.just(False) | children,
                st.integers(0, 2),
            ),
            _object_schema(children),
            children.map(lambda v: {"type": "object", "additionalProperties": v}),
            st.lists(children, min_size=1, max_size=3).map(lambda subs: {"anyOf": subs}),
        )

    return st.recursive(_leaf_schemas(), extend, max_leaves=8)


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,10}", fullmatch=True)


@st.composite
def tool_sets(draw):
    names = draw(st.lists(_NAMES, min_size=1, max_size=3, unique=True))
    tools = []
    for name in names:
        params = draw(_object_schema(_schemas()))
        tools.append(Tool(name, "", params, lambda **kw: kw))
    return ToolSet(tools)


def _values(schema):  # noqa: C901
    """A strategy for canonical-grammar values of ``schema`` (the supported subset)."""
    if schema is True or schema == {}:
        return st.recursive(
            _SCALARS, lambda c: st.lists(c, max_size=2) | st.dictionaries(_KEYS, c, max_size=2), max_leaves=4
        )
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_values(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_values({**schema, "type": k}) for k in kind])
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 8))
    if kind == "integer":
        return st.integers(-(10**15) + 1, 10**15 - 1)
    if kind == "number":
        return st.integers(-(10**9), 10**9) | st.floats(-1e15, 1e15, allow_nan=False).filter(
            lambda f: f == 0 or abs(f) > 1e-30
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            prefix = schema["prefixItems"]
            rest = schema.get("items", True)
            head = st.tuples(*[_values(s) for s in prefix]).map(list)
            tail = st.just([]) if rest is False else st.lists(_values(rest), max_size=2)
            lo = schema.get("minItems", 0)
            return st.builds(
                lambda h, t, n: (h + t)[: max(n, lo)] if not t else h + t, head, tail, st.integers(0, len(prefix))
            )
        return st.lists(
            _values(schema.get("items", True)), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 3)
        )
    if kind == "object":
        props = schema.get("properties")
        if props:
            required = set(schema.get("required", []))
            return st.fixed_dictionaries(
                {k: _values(s) for k, s in props.items() if k in required},
                optional={k: _values(s) for k, s in props.items() if k not in required},
            ).map(lambda d: {k: d[k] for k in props if k in d})
        extra = schema.get("additionalProperties", True)
        if extra is False:
            return st.just({})
        return st.dictionaries(_KEYS, _values(extra), max_size=3)
    raise AssertionError(schema)


def _valid(tool, args):
    return Draft202012Validator(tool.parameters).is_valid(args)


@FUZZ
@given(tool_sets(), st.data())
def test_every_reply_the_grammar_allows_parses_to_valid_calls(tools, data):
    grammar = Grammar.parse(reply_grammar(tools))
    text = grammar.sample(data.draw)
    assert grammar.matches(text)
    try:
        reply = parse_reply(text, tools)
    except ParseError as err:
        # a grammar cannot forbid a key given twice in an object of open keys; the parser
        # refuses it (feedback), and that is the only refusal allowed here
        assert err.label == "duplicate_key" and _repeats_a_key(text), text
        return
    calls_text = [line for line in text.split("\n") if line.startswith("TOOL: ")]
    if calls_text:
        assert len(reply.calls) == len(calls_text)
        for call, line in zip(reply.calls, calls_text):
            name, _, args = line[len("TOOL: ") :].partition(" ARGS: ")
            assert call == ToolCall(name, json.loads(args))
            assert _valid(tools[name], call.args), (name, call.args)
    else:
        assert reply.answer == _as_read(text.split("ANSWER: ", 1)[1]) and reply.answer
    # what may end the calls: the keyword of the line the model meant to write next, dropped
    assert all((d.kind, d.text) == ("observation", "OBSERVATION") for d in reply.dropped), reply.dropped


def _as_read(answer: str) -> str:
    """An answer as the parser gives it: lines ending CRLF read as LF, the ANSWER line's own text
    stripped, the whole stripped."""
    answer = "\n".join(line[:-1] if line.endswith("\r") else line for line in answer.split("\n"))
    first, sep, rest = answer.partition("\n")
    return (first.strip() + sep + rest).strip()


def _repeats_a_key(text: str) -> bool:
    def hook(pairs):
        if len({k for k, _ in pairs}) != len(pairs):
            raise KeyError("repeated")
        return dict(pairs)

    for line in text.split("\n"):
        if line.startswith("TOOL: ") and " ARGS: " in line:
            try:
                json.loads(line.partition(" ARGS: ")[2], object_pairs_hook=hook)
            except KeyError:
                return True
    return False


# a strategy drawn from a large generated schema describes itself at length when Hypothesis asks
# (52 and 104 kB seen): a warning about the description, not about what is tested
@pytest.mark.filterwarnings("ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning")
@FUZZ
@given(tool_sets(), st.data())
def test_every_canonical_reply_with_valid_arguments_is_in_the_grammar(tools, data):
    grammar = Grammar.parse(reply_grammar(tools))
    names = data.draw(st.lists(st.sampled_from(list(tools)), min_size=1, max_size=3))
    calls = [ToolCall(name, data.draw(_values(tools[name].parameters))) for name in names]
    for call in calls:
        assume(_valid(tools[call.name], call.args))
        assume(all(math.isfinite(v) for v in _numbers(call.args)))
    thoughts = data.draw(st.lists(st.text(st.characters(exclude_characters="\n"), max_size=10), max_size=3))
    text = "".join(f"Thought: {t}\n" for t in thoughts) + "\n".join(render_call(c) for c in calls)
    assert grammar.matches(text), text
    assert parse_reply(text, tools).calls == calls


def _numbers(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)


@given(
    st.text(st.characters(exclude_characters="\n"), min_size=1, max_size=20).filter(
        lambda t: t.strip() and not t[0].isspace()
    )
)
def test_answers_round_trip(answer):
    grammar = Grammar.parse(reply_grammar(demo.demo_tools()))
    assert grammar.matches(f"ANSWER: {answer}")
    assert parse_reply(f"ANSWER: {answer}").answer == answer.strip()


def test_limits_on_thoughts_and_calls():
    grammar = Grammar.parse(reply_grammar(demo.demo_tools(), max_thoughts=0, max_calls=1))
    assert grammar.matches("TOOL: get_time ARGS: {}")
    assert not grammar.matches("Thought: x\nTOOL: get_time ARGS: {}")
    assert not grammar.matches("TOOL: get_time ARGS: {}\nTOOL: get_time ARGS: {}")
    assert Grammar.parse(reply_grammar([])).matches("ANSWER: no tools")


_ANSWER_BITS = [
    "tool",
    "TOOL",
    "Tools",
    "observation",
    "OBSERVATION:",
    "ANSWER:",
    ":",
    " ",
    "\t",
    "-",
    "*",
    "**",
    "__",
    "`",
    "```",
    ">",
    "1.",
    "2)",
    "x",
    "s",
    "\n",
    "\r",
    "\r\n",
    "_",
    "\u3000",
    "\u00a0",
    "ARGS: {}",
]


@FUZZ
@given(st.lists(st.sampled_from(_ANSWER_BITS), max_size=14))
def test_every_multi_line_answer_the_grammar_allows_is_read_as_that_answer(bits):
    grammar = Grammar.parse(reply_grammar(demo.demo_tools()))
    text = "ANSWER: first\n" + "".join(bits)
    if grammar.matches(text):
        reply = parse_reply(text, demo.demo_tools())
        assert (reply.calls, reply.dropped) == ([], [])
        assert reply.answer == _as_read(text[len("ANSWER: ") :])


ABSTAIN = ("Thought: the closest listed tool is ", "; it does not fit because ")


def test_the_abstention_grammar_takes_calls_or_an_answer_after_a_named_listed_tool():
    grammar = Grammar.parse(reply_grammar(demo.demo_tools(), abstain=ABSTAIN))
    assert grammar.matches('TOOL: calculate ARGS: {"expression": "17 * 24"}')
    meant = "Thought: the closest listed tool is get_weather; it does not fit because it has no forecasts.\n"
    assert grammar.matches(meant + "ANSWER: I cannot tell tomorrow's weather.")
    assert grammar.matches("Thought: first, the tools.\n" + meant + "ANSWER: no forecast")
    # an answer alone, an unlisted tool named, or no reason given: out of the language
    assert not grammar.matches("ANSWER: I cannot tell tomorrow's weather.")
    assert not grammar.matches(meant.replace("get_weather", "get_forecast") + "ANSWER: no")
    assert not grammar.matches(meant.replace("it has no forecasts.", "") + "ANSWER: no")
    # without tools there is nothing to name: an answer is the reply
    assert Grammar.parse(reply_grammar([], abstain=ABSTAIN)).matches("ANSWER: no tools")


@FUZZ
@given(st.data())
def test_every_abstention_the_grammar_allows_is_read_as_a_thought_and_an_answer(data):
    tools = demo.demo_tools()
    grammar = Grammar.parse(reply_grammar(tools, abstain=ABSTAIN))
    text = grammar.sample(data.draw)
    reply = parse_reply(text, tools) if "ANSWER: " in text else None
    assume(reply is not None)
    assert not reply.calls and reply.answer
    assert ABSTAIN[0].removeprefix("Thought: ") in reply.thought and ABSTAIN[1].strip() in reply.thought
