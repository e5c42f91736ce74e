"""The response_format grammar: llama.cpp would take it (tests/gbnfkit.py parses as it does),
and every reply it allows is an answer the proxy accepts for the schema."""

from __future__ import annotations

import json

from gbnfkit import Grammar
from hypothesis import given, settings
from hypothesis import strategies as st

from textagent.protocol import parse_reply
from textagent.proxy.convert import parse_request
from textagent.proxy.structured import parse_format

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "temp": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["city", "temp"],
    "additionalProperties": False,
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def request(fmt, **body):
    return parse_request({"messages": [{"role": "user", "content": "x"}], "response_format": fmt, **body})


SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMA, "strict": True}}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_reply_the_grammar_allows_is_an_accepted_answer(data):
    chat = request(SCHEMA_FORMAT)
    grammar = Grammar.parse(chat.grammar(constrained=False))
    reply = parse_reply(grammar.sample(data.draw))
    assert reply.is_final and chat.format.check(reply.answer)[0] is None


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_with_tools_in_constrained_mode_a_reply_is_calls_or_a_json_answer(data):
    chat = request({"type": "json_object"}, tools=[TOOL])
    grammar = Grammar.parse(chat.grammar(constrained=True))
    reply = parse_reply(grammar.sample(data.draw))
    if reply.is_final:
        assert isinstance(json.loads(chat.format.check(reply.answer)[1]), dict)
    else:
        assert [c.name for c in reply.calls] == ["get_weather"] * len(reply.calls)


def test_the_grammar_refuses_an_answer_outside_the_schema():
    grammar = Grammar.parse(request(SCHEMA_FORMAT).grammar(constrained=False))
    assert grammar.matches('ANSWER: {"city": "Paris", "temp": 3}')
    assert not grammar.matches('ANSWER: {"city": "Paris"}') and not grammar.matches("ANSWER: sunny")


def test_a_fenced_answer_is_read_and_checked():
    fmt = parse_format(SCHEMA_FORMAT)
    assert fmt.check('```json\n{"city": "Oslo", "temp": 1}\n```') == (None, '{"city": "Oslo", "temp": 1}')
    problem, _ = fmt.check('{"city": "Oslo", "temp": 1.5}')
    assert problem is not None and "temp" in problem
