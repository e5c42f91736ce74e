"""Line classification: keywords in any case but ASCII only, decoration, emphasis."""

from __future__ import annotations

import pytest
from protocolkit import grammar_only

from textagent.protocol import parse_reply


@pytest.mark.parametrize(
    "line",
    [
        "FINAL ANSWER: 42",
        "Final Answer: 42",
        "answer:42",
        "**Answer:** 42",
        "**ANSWER**: 42",
        "- ANSWER: 42",
        "**Final Answer: 42**",
        "`ANSWER: 42`",
    ],
)
def test_answer_forms(line):
    assert parse_reply(line).answer == "42"


@pytest.mark.parametrize(
    "line",
    [
        "Tools are great.",
        "TOOLS: none",
        "Toolkit: x",
        "tool-use is on",
        "Tooling",
        "args are fine",
        "Answer me",
        "Observations matter",
        "The TOOL: keyword",
        "ANSWERS: no",
    ],
)
def test_keyword_lookalikes_are_prose(line):
    reply = parse_reply(line)
    assert reply.calls == [] and reply.answer == line and reply.dropped == []


@pytest.mark.parametrize(
    "line",
    [
        "OBSERVATION: x",
        "Observation: x",
        "observation (calculate): 408",
        "OBSERVATION",
        "**Observation:** x",
        "- OBSERVATION: x",
        "OBSERVATION result 3",
        "Observation [1]",
        "> Observation: x",
    ],
)
def test_observation_forms(line):
    reply = parse_reply("ANSWER: a\n" + line + "\nTOOL: broken(")
    assert reply.answer == "a" and reply.truncated_at == 2


@pytest.mark.parametrize(
    "text,name",
    [
        ("tool:__  args:{}", "__"),  # `__` right after the colon is the name, not emphasis
        ("TOOL:__init ARGS: {}", "__init"),  # ... and so is the start of a name
        ("TOOL: __ ARGS: {}", "__"),
        ("__TOOL:__ get ARGS: {}", "get"),  # emphasis around the keyword
        ("**TOOL:**get ARGS: {}", "get"),
        ('**TOOL:** get **ARGS:** {"a": 1}', "get"),
    ],
)
def test_emphasis_after_the_tool_colon_is_read_the_same_way_by_both_paths(text, name):
    fast = parse_reply(text)
    assert grammar_only(text) == fast
    assert [c.name for c in fast.calls] == [name]


@pytest.mark.parametrize(
    "line",
    [
        "ANſWER: 42",
        "Final anſwer: 42",
        "OBſERVATION: 9",
        "ＴＯＯＬ: calculate",
        "ＡＮＳＷＥＲ: 42",
        "ＯＢＳＥＲＶＡＴＩＯＮ: 9",
        "\u0422OOL: f",
    ],
)
def test_keywords_are_ascii_only_lookalikes_are_prose(line):
    # #16 item 12: U+017F (ſ) case-folds to `s` under re.IGNORECASE; keywords match in ASCII only
    reply = parse_reply(line)
    assert reply.calls == [] and reply.answer == line and reply.dropped == []


@pytest.mark.parametrize("blank", ["\u00a0", "\u3000", "\ufeff", "\u200b", "\u2003", " \u200b\t", "\ufeff> "])
def test_invisible_and_unicode_blanks_before_a_keyword_are_decoration(blank):
    from textagent import parse_reply

    reply = parse_reply(blank + 'TOOL: get_weather ARGS: {"city": "Paris\u00a0Nord"}\n' + blank + "ANSWER: x")
    assert [(c.name, c.args) for c in reply.calls] == [("get_weather", {"city": "Paris\u00a0Nord"})]
    assert parse_reply(blank + "ANSWER: 42").answer == "42"
