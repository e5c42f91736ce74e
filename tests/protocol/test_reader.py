"""The pre-pass over a whole reply: every accepted call form, answers, prose, fences, observations,
and properties over generated replies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from protocolkit import PROPERTY, calls, check_total, error, grammar_only

from textagent.protocol import Dropped, ParseError, Reply, ToolCall, parse_call, parse_reply, render_call
from textagent.testing import garbage_replies, json_args, noisy_calls, noisy_replies, tool_calls, tool_names

# ---------------------------------------------------------------------------------------------
# Accepted forms
# ---------------------------------------------------------------------------------------------

ACCEPTED = [
    # 1. JSON object
    ('TOOL: get_weather ARGS: {"city": "Paris", "days": 3}', [ToolCall("get_weather", {"city": "Paris", "days": 3})]),
    (
        'TOOL: f ARGS: {"a": [1, 2.5, -3e2, null, true, false], "b": {"c": "d"}}',
        [ToolCall("f", {"a": [1, 2.5, -300.0, None, True, False], "b": {"c": "d"}})],
    ),
    (
        'TOOL: f ARGS: {\n  "city": "Paris",\n  "days": [1,\n    2]\n}',
        [ToolCall("f", {"city": "Paris", "days": [1, 2]})],
    ),
    ('TOOL: f ARGS: {"s": "tab\there \\u00e9 \\ud83d\\ude00 \\"q\\""}', [ToolCall("f", {"s": 'tab\there é 😀 "q"'})]),
    ('TOOL: f ARGS: {"path": "C:\\Users\\me"}', [ToolCall("f", {"path": "C:\\Users\\me"})]),  # lenient escapes
    # several argument objects after one ARGS: one call of the tool each
    ('TOOL: f ARGS: {"a": 1}, {"a": 2}', [ToolCall("f", {"a": 1}), ToolCall("f", {"a": 2})]),
    (
        'TOOL: f ARGS: {"a": 1},{"a": 2}, {"b": [3]}\nANSWER: x',
        [ToolCall("f", {"a": 1}), ToolCall("f", {"a": 2}), ToolCall("f", {"b": [3]})],
    ),
    # 2. relaxed object
    ("TOOL: f ARGS: {'city': 'Paris', 'days': 3,}", [ToolCall("f", {"city": "Paris", "days": 3})]),
    (
        "TOOL: f ARGS: {city: 'Paris', ok: True, no: False, nothing: None, list: [1, 2,],}",
        [ToolCall("f", {"city": "Paris", "ok": True, "no": False, "nothing": None, "list": [1, 2]})],
    ),
    ("TOOL: f ARGS: {'it\\'s': 'a \"b\"'}", [ToolCall("f", {"it's": 'a "b"'})]),
    ("TOOL: f ARGS: {\n  answer: 42,\n  tool: 'x'\n}", [ToolCall("f", {"answer": 42, "tool": "x"})]),
    # 3. key=value pairs
    ('TOOL: get_weather ARGS: city="Paris", days=3', [ToolCall("get_weather", {"city": "Paris", "days": 3})]),
    ("TOOL: get_weather ARGS: city=Paris", [ToolCall("get_weather", {"city": "Paris"})]),
    (
        "TOOL: f ARGS: a=1.5, b=true, c=null, d=None, e=True, f=-2",
        [ToolCall("f", {"a": 1.5, "b": True, "c": None, "d": None, "e": True, "f": -2})],
    ),
    ("TOOL: f ARGS: city=Paris, France, days=3", [ToolCall("f", {"city": "Paris, France", "days": 3})]),
    (
        "TOOL: f ARGS: days=3 or 4, q='x', r=[1, 2], s={\"t\": 1},",
        [ToolCall("f", {"days": "3 or 4", "q": "x", "r": [1, 2], "s": {"t": 1}})],
    ),
    ("TOOL: f ARGS: url=http://x.org/?a=1&b=2", [ToolCall("f", {"url": "http://x.org/?a=1&b=2"})]),
    # 4. function-call shorthand
    ('TOOL: calculate(expression="17 * 24")', [ToolCall("calculate", {"expression": "17 * 24"})]),
    ('TOOL: calculate("17*24")', [ToolCall("calculate", "17*24")]),
    ("TOOL: calculate(17*24)", [ToolCall("calculate", "17*24")]),
    ("TOOL: calculate('17*24')", [ToolCall("calculate", "17*24")]),
    ("TOOL: f(a=1, b=sqrt(2), c=Paris, France)", [ToolCall("f", {"a": 1, "b": "sqrt(2)", "c": "Paris, France"})]),
    ('TOOL: f({"a": 1})', [ToolCall("f", {"a": 1})]),
    ("TOOL: f([1, 2])", [ToolCall("f", "[1, 2]")]),
    ("TOOL: list_files()", [ToolCall("list_files", {})]),
    ('TOOL: f({\n  "a": 1\n})', [ToolCall("f", {"a": 1})]),
    # 5. bare argument
    ("TOOL: calculate ARGS: 17 * 24", [ToolCall("calculate", "17 * 24")]),
    ('TOOL: search ARGS: "weather in Paris"', [ToolCall("search", "weather in Paris")]),
    ("TOOL: search ARGS: what's up?", [ToolCall("search", "what's up?")]),
    ("TOOL: f ARGS: a == b", [ToolCall("f", "a == b")]),
    # zero arguments
    ("TOOL: list_files", [ToolCall("list_files", {})]),
    ("TOOL: list_files ARGS:", [ToolCall("list_files", {})]),
    ("TOOL: list_files ARGS: {}", [ToolCall("list_files", {})]),
    # keywords: case, spaces, emphasis, decoration
    ('tool: f args: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('Tool : f  Args :  {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('**TOOL:** f **ARGS:** {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('**TOOL**: f **ARGS**: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('__TOOL__: f __ARGS__: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('**TOOL: f ARGS: {"a": 1}**', [ToolCall("f", {"a": 1})]),
    ('`TOOL: f ARGS: {"a": 1}`', [ToolCall("f", {"a": 1})]),
    ('    TOOL: f ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('- TOOL: f ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('* TOOL: f ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('1. TOOL: f ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('> TOOL: f ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('> TOOL: f ARGS: {\n>   "a": 1\n> }', [ToolCall("f", {"a": 1})]),
    ('TOOL: `f` ARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ('TOOL: "web.search" ARGS: {"a": 1}', [ToolCall("web.search", {"a": 1})]),
    ("TOOL: 'list-files'", [ToolCall("list-files", {})]),
    ("TOOL: args ARGS: {}", [ToolCall("args", {})]),
    # ARGS on the next line, objects in fences
    ('TOOL: f\nARGS: {"a": 1}', [ToolCall("f", {"a": 1})]),
    ("TOOL: f\n\nargs: a=1", [ToolCall("f", {"a": 1})]),
    ('TOOL: f ARGS:\n{"a": 1}', [ToolCall("f", {"a": 1})]),
    ('TOOL: f ARGS:\n```json\n{\n  "a": 1\n}\n```', [ToolCall("f", {"a": 1})]),
    # several calls, in order
    (
        'TOOL: a ARGS: {}\nTOOL: b ARGS: {"x": 1}\n- TOOL: c(1)',
        [ToolCall("a"), ToolCall("b", {"x": 1}), ToolCall("c", "1")],
    ),
]


@pytest.mark.parametrize("text,expected", ACCEPTED, ids=[t[:40] for t, _ in ACCEPTED])
def test_accepted_forms(text, expected):
    assert calls(text) == expected


def test_crlf_line_ends():
    text = 'Thought: hi\r\nTOOL: f ARGS: {\r\n  "a": 1\r\n}\r\n'
    reply = parse_reply(text)
    assert reply.calls == [ToolCall("f", {"a": 1})]
    assert reply.thought == "Thought: hi"


# ---------------------------------------------------------------------------------------------
# Reply structure: answer, prose, fences
# ---------------------------------------------------------------------------------------------


def test_answer_runs_to_the_end():
    reply = parse_reply("Thought: easy.\nANSWER: It is 408.\nThat is all.\n")
    assert reply == Reply([], "It is 408.\nThat is all.", "Thought: easy.", [])
    assert reply.is_final and reply.truncated_at is None


def test_prose_only_is_the_final_answer():
    reply = parse_reply("Paris is the capital of France.\nTHOUGHT: done")
    assert reply.answer == reply.thought == "Paris is the capital of France.\nTHOUGHT: done"
    assert reply.calls == [] and reply.is_final
    assert parse_reply("").answer == ""


def test_strict_rejects_prose_only():
    err = error("\n  Paris is the capital.", strict=True)
    assert err.label == "no_call_or_answer"
    assert (err.line, err.column) == (2, 1)
    assert parse_reply("ANSWER: Paris", strict=True).answer == "Paris"
    assert parse_reply("TOOL: f", strict=True).calls == [ToolCall("f")]
    assert error("", strict=True).label == "no_call_or_answer"


@pytest.mark.parametrize(
    "text,line,column,name",
    [
        ('CALL: cd ARGS: {"folder": "ResearchDocs"}', 1, 1, "cd"),
        ("I will look.\n- **Action:** `search` ARGS: {}", 2, 5, "search"),
        ("```\nfunction: get_weather args: city=Paris\n```", 2, 1, "get_weather"),
        ('TOOL: f ARGS: {"a": 1}\nTOOLS: g ARGS: {}', 2, 1, "g"),
        ('ANSWER: cat ARGS: {"file_name": "notes"}', 1, 1, "cat"),
        ("Thought: done.\n**Answer:** `cd` **ARGS**: {}", 2, 1, "cd"),
    ],
)
def test_a_call_after_another_keyword_is_a_format_error_not_the_answer(text, line, column, name):
    for strict in (False, True):
        err = error(text, strict=strict)
        assert (err.label, err.line, err.column, err.name) == ("wrong_keyword", line, column, name), str(err)
        assert "TOOL:" in err.hint


@pytest.mark.parametrize(
    "text",
    [
        "Note: see the result below.",
        "Example: cd ARGS is what the folder tool takes",  # no colon after ARGS
        "ANSWER:\ncd ARGS: {}",  # after the ANSWER line, an answer's words are its own
        "ANSWER: 42\nCALL: cd ARGS: {}",
        "ANSWER: ok, args: none needed",
        'THOUGHT: the call is next\nTOOL: cd ARGS: {"folder": "x"}',
    ],
)
def test_keyword_like_prose_stays_prose(text):
    reply = parse_reply(text)
    assert reply.calls or reply.answer


def test_thought_lines_are_prose():
    reply = parse_reply("THOUGHT: I need the weather.\nThought: TOOL: is a keyword\nTOOL: f\nAnd more.")
    assert reply.calls == [ToolCall("f")]
    assert reply.thought == "THOUGHT: I need the weather.\nThought: TOOL: is a keyword\nAnd more."


def test_code_fences_are_wrappers():
    text = 'I will call it.\n```json\nTOOL: f ARGS: {"a": 1}\n```\n~~~\nTOOL: g\n~~~\n```python\nprint(1)\n```'
    reply = parse_reply(text)
    assert reply.calls == [ToolCall("f", {"a": 1}), ToolCall("g")]
    assert reply.thought == "I will call it.\n```python\nprint(1)\n```"  # fences around calls are gone
    assert parse_reply("```\nANSWER: 42\n```").answer == "42"
    assert parse_reply("```\nANSWER: 42\n```\n```\ncode\n```").answer == "42\n```\ncode\n```"


@pytest.mark.parametrize(
    "text, args",
    [
        ('TOOL: calculate ARGS: {"expression": "sqrt(2025)"}.', {"expression": "sqrt(2025)"}),
        ('TOOL: calculate ARGS: {"expression": "1"} ;', {"expression": "1"}),
        ('TOOL: calculate ARGS: {\n  "expression": "1"\n}.', {"expression": "1"}),
        ('TOOL: calculate(expression="2 + 2").', {"expression": "2 + 2"}),
    ],
)
def test_a_full_stop_after_the_arguments_ends_the_sentence(text, args):
    # a model writing the call as a sentence ends it with a full stop: not a comment
    assert parse_reply(text).calls == [ToolCall("calculate", args)]


@pytest.mark.parametrize(
    "text", ['TOOL: f ARGS: {"a": 1}..', 'TOOL: f ARGS: {"a": 1}. Then', 'TOOL: f ARGS: {"a": 1}:']
)
def test_more_than_a_full_stop_after_the_arguments_is_still_trailing_text(text):
    with pytest.raises(ParseError) as info:
        parse_reply(text)
    assert info.value.label == "trailing_text"


def test_self_written_observation_truncates():
    text = 'TOOL: f ARGS: {"a": 1}\nOBSERVATION: 17\nTOOL: g ARGS: {}\nANSWER: 17'
    reply = parse_reply(text)
    assert reply.calls == [ToolCall("f", {"a": 1})]
    assert reply.dropped == [Dropped("observation", 2, "OBSERVATION: 17\nTOOL: g ARGS: {}\nANSWER: 17")]
    assert reply.truncated_at == 2
    assert reply.answer is None


def test_answer_after_calls_is_dropped_and_recorded():
    reply = parse_reply("TOOL: f ARGS: {}\nANSWER: 42\nsure")
    assert reply.calls == [ToolCall("f")]
    assert reply.answer is None and not reply.is_final
    assert reply.dropped == [Dropped("answer_after_calls", 2, "42\nsure")]
    # an answer written before a call ends at the call; the call still wins
    reply = parse_reply("ANSWER: maybe 42\nTOOL: f\nmore prose")
    assert reply.calls == [ToolCall("f")]
    assert reply.dropped == [Dropped("answer_after_calls", 1, "maybe 42")]
    assert reply.thought == "more prose"


def test_parse_call():
    assert parse_call("TOOL: f(a=1)") == ToolCall("f", {"a": 1})
    with pytest.raises(ParseError):
        parse_call("no call here")
    with pytest.raises(TypeError):
        parse_reply(b"TOOL: f")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "TOOL: f ARGS: {} please",
        "TOOL search",
        "Tool: a hammer.",
        'TOOL: f ARGS: {"a": 1',
        "  * **TOOL:** ",
        "TOOL CALL: search",
        "tool: f(",
        'TOOL: f ARGS: {"a": }',
    ],
)
def test_call_lookalikes_never_become_prose(text):
    with pytest.raises(ParseError):
        parse_reply("Some thought.\n" + text + "\nANSWER: fine")


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@PROPERTY
@given(st.lists(tool_calls(), min_size=1, max_size=4).flatmap(lambda cs: st.tuples(st.just(cs), noisy_replies(cs))))
def test_round_trip_in_noisy_replies(case):
    expected, text = case
    reply = parse_reply(text)
    assert reply.calls == expected
    assert reply.answer is None


@PROPERTY
@given(tool_calls().flatmap(lambda c: st.tuples(st.just(c), noisy_calls(c))))
def test_shortcut_and_grammar_agree(case):
    call, lines = case
    text = "\n".join(lines)
    fast = parse_reply(text)
    assert grammar_only(text) == fast
    assert fast.calls == [call]


@PROPERTY
@given(tool_names(), json_args())
def test_shortcut_and_grammar_agree_on_json_lines(name, args):
    for text in (f"TOOL: {name} ARGS: {json.dumps(args)}", f"tool:{name}  args:{json.dumps(args, indent=1)}"):
        fast = parse_reply(text)
        assert grammar_only(text) == fast
        assert fast.calls == [ToolCall(name, args)]


@PROPERTY
@given(st.text())
def test_total_on_unicode(text):
    check_total(text)


@PROPERTY
@given(st.binary())
def test_total_on_decoded_bytes(data):
    check_total(data.decode("utf-8", errors="replace"))
    check_total(data.decode("latin-1"))


@PROPERTY
@given(garbage_replies())
def test_total_on_keyword_garbage(text):
    check_total(text)
    check_total(text, grammar_only)


@PROPERTY
@given(tool_calls(), st.data())
def test_total_on_mangled_calls(call, data):
    text = render_call(call)
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from(["", "{", "}", "[", "]", '"', "'", ",", ":", "=", "(", ")", "\n", "`", "**"]))
    check_total(text[:cut] + junk + text[cut + data.draw(st.integers(0, 3)) :])


@pytest.mark.parametrize("head,tail", [("TOOL: x ARGS: a=x", ""), ("TOOL: x(a=x", ")")])
def test_a_long_unquoted_value_continued_after_commas_parses_in_linear_time(head, tail):
    # #16 item 10: `a=x, y, y, ...` was quadratic (1 MB: 6-10 s, 2 MB: 25 s); the timing bound is loose
    # on purpose, the benchmark (benchmarks/parse_speed.py) has the figures
    import time

    for n in (3, 666_666):
        text = head + ", y" * n + tail
        started = time.perf_counter()
        call = parse_reply(text).calls[0]
        elapsed = time.perf_counter() - started
        assert call.args == {"a": "x" + ", y" * n}
    assert elapsed < 10, f"2 MB took {elapsed:.1f} s"
    assert calls(head + ", y, b=2" + tail) == [ToolCall("x", {"a": "x, y", "b": 2})]
    assert calls(head + ",  y ,z , b = 'q'" + tail) == [ToolCall("x", {"a": "x,  y ,z", "b": "q"})]


@pytest.mark.parametrize(
    "text",
    [
        'TOOL: calculate ARGſ: {"expression": "1"}',
        "TOOL: calculate\nARGſ: 1",
        'TOOL: calculate(expression="1")\nARGſ: x',
    ],
)
def test_args_lookalike_is_not_the_args_keyword(text):
    for parse in (parse_reply, grammar_only):  # the json.loads shortcut and the grammar
        reply = None
        try:
            reply = parse(text)
        except ParseError as err:
            assert err.label in ("missing_args_keyword", "trailing_text"), err
        if reply is not None:  # the look-alike line is prose after a complete call
            assert all(c.args in ({}, {"expression": "1"}) for c in reply.calls) and "ARGſ" in reply.thought


@PROPERTY
@given(
    tool_names(),
    st.sampled_from(["", "- ", "> ", "1. ", "**", "`", "  "]),
    st.sampled_from(["", " ", "\t  "]),
    st.sampled_from(
        [
            "",
            "\nTOOL: other",
            '\nARGS: {"a": 1}',
            "\n\nARGS: [1]",
            '\n{"a": 1}',
            "\nsome prose",
            "\nANSWER: done",
            "\n```",
        ]
    ),
)
def test_argument_less_calls_read_the_same_by_the_shortcut_and_the_grammar(name, decor, space, after):
    head = f"{decor}TOOL:{'**' if decor == '**' else ''} {name}{'`' if decor == '`' else ''}{space}"
    text = head + after

    def outcome(read):
        try:
            return read(text)
        except ParseError as err:
            return (err.label, err.line, err.column)

    assert outcome(grammar_only) == outcome(parse_reply)


def test_a_megabyte_of_argument_less_calls_takes_the_shortcut():
    from textagent.protocol import reader

    calls = []
    original = reader.Reader.parse_call
    reader.Reader.parse_call = lambda self, segs: calls.append(1) or original(self, segs)
    try:
        reply = parse_reply("TOOL: get_time\n" * 1000 + "TOOL: f\nARGS: a=1")
    finally:
        reader.Reader.parse_call = original
    assert len(reply.calls) == 1001 and reply.calls[-1].args == {"a": 1}
    assert len(calls) == 1  # only the call with key=value arguments on the next line met the grammar
