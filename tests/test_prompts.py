"""The model-facing text: tool listings, worked examples, observations, every template."""

from __future__ import annotations

import json
import pathlib
from typing import Literal

import pytest

from textagent import prompts
from textagent.protocol import ParseError, parse_reply
from textagent.toolkits import demo
from textagent.tools import Example, ToolSet, tool


@tool
def book(restaurant: str, people: int, time: Literal["18:00", "19:00"], outdoor: bool = False) -> str:
    """Book a table.

    Args:
        restaurant: Name of the restaurant.
        people: Number of guests.
    """
    return "ok"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def test_a_tool_is_listed_with_one_line_per_parameter_and_nothing_that_looks_like_a_call():
    text = prompts.describe_tool(book)
    assert text.splitlines() == [
        "- book: Book a table.",
        "    restaurant (string): Name of the restaurant.",
        "    people (integer): Number of guests.",
        '    time ("18:00" or "19:00")',
        "    outdoor (boolean, optional, default false)",
    ]
    # a model copying the listing must not produce a JSON object or a call with type names in it
    assert "{" not in text and "book(" not in text


def test_the_system_prompt_lists_every_tool_and_states_the_protocol():
    text = prompts.system_prompt(demo.demo_tools())
    for name in demo.demo_tools():
        assert f"- {name}: " in text
    assert "TOOL: <tool name> ARGS: <JSON object of arguments>" in text and "ANSWER:" in text


def _class_tool(name, own, preamble=True):
    from textagent.tools import Tool

    head = (
        "This tool belongs to the TwitterAPI, which provides core functionality for posting tweets. Tool description: "
    )
    text = (head if preamble else "") + own + " Note that the provided function is in Python 3 syntax."
    return Tool.from_function(lambda x: x, name=name, description=text)


def test_a_grouped_listing_says_the_words_a_run_of_descriptions_shares_once():
    tools = [
        _class_tool("post", "Post a tweet."),
        _class_tool("follow", "Follow a user."),
        _class_tool("like", "Like it."),
    ]
    tools.append(_class_tool("lone", "Something else entirely.", preamble=False))
    plain = prompts.tool_listing(tools)
    grouped = prompts.tool_listing(tools, grouped=True).splitlines()
    assert grouped[0] == (
        "The next 3 tools' descriptions all begin \"This tool belongs to the TwitterAPI, which provides core "
        'functionality for posting tweets. Tool description:" and end "Note that the provided function is in '
        'Python 3 syntax."; each is written below without it:'
    )
    entries = [line for line in grouped if line.startswith("- ")]
    assert entries[:3] == ["- post: Post a tweet.", "- follow: Follow a user.", "- like: Like it."]
    # a tool outside the run keeps its whole description; nothing is lost, only said once
    assert entries[3] == "- lone: Something else entirely. Note that the provided function is in Python 3 syntax."
    assert len("\n".join(grouped)) < len(plain)
    # fewer than three tools sharing words, or no shared words: the listing as it is
    assert prompts.tool_listing(tools[:2], grouped=True) == prompts.tool_listing(tools[:2])
    assert prompts.tool_listing(demo.demo_tools(), grouped=True) == prompts.tool_listing(demo.demo_tools())


def test_worked_examples_become_turns_in_order():
    direct = Example("Say hi", (), "hi")
    failing = Example(
        "Price?",
        (
            ("book", {"restaurant": "A", "people": 2, "time": "18:00"}, "ERROR: busy"),
            ("book", {"restaurant": "A", "people": 2, "time": "18:00"}, "ok"),
        ),
        "Booked.",
    )
    turns = prompts.example_turns(prompts.worked_examples(ToolSet([book]), [direct, failing]))
    assert [t["role"] for t in turns] == ["user", "assistant"] + ["user"] + ["assistant", "user"] * 2 + ["assistant"]
    assert turns[1]["content"] == "ANSWER: hi"
    assert turns[3]["content"] == 'TOOL: book ARGS: {"restaurant": "A", "people": 2, "time": "18:00"}'
    assert "The call failed" in turns[4]["content"]  # an ERROR result reads as a failed call
    assert turns[6]["content"] == "OBSERVATION (book): ok"
    # every TOOL line of an example parses to the call it shows
    for t in turns:
        if t["role"] == "assistant" and t["content"].startswith("TOOL:"):
            assert parse_reply(t["content"], ToolSet([book])).calls[0].name == "book"


def test_without_examples_a_placeholder_exchange_uses_a_tool_that_takes_arguments():
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    single, direct, pair = prompts.worked_examples(ToolSet([ping, book]))
    assert direct.calls == [] and direct.answer
    task, calls = single.task, single.calls
    assert calls[0][0] == "book" and set(calls[0][1]) == {"restaurant", "people", "time"}
    for name, value in calls[0][1].items():  # the task names every value the call uses
        assert f"{name} {json.dumps(value)}" in task
    # two calls of the tool in one reply, with other values, all named in the task
    assert pair.replies == (2,) and [c[0] for c in pair.calls] == ["book", "book"]
    assert pair.calls[0][1] != pair.calls[1][1]
    for _, args, _ in pair.calls:
        for name, value in args.items():
            assert f"{name} {json.dumps(value)}" in pair.task
    assert prompts.worked_examples(ToolSet([])) == []


def test_without_examples_two_tools_that_take_arguments_are_shown_called_in_one_reply():
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    *_, pair, two = prompts.worked_examples(ToolSet([ping, book, weather]))
    assert "twice" not in pair.task  # asked like a question about several things
    assert two.replies == (2,) and [c[0] for c in two.calls] == ["book", "weather"]
    for name, args, _ in two.calls:  # the task names each tool and every value
        assert name in two.task and all(f"{k} {json.dumps(v)}" in two.task for k, v in args.items())
    turns = prompts.example_turns([two])
    assert turns[1]["content"].count("TOOL:") == 2 and turns[2]["content"].count("OBSERVATION") == 2
    # a tool that takes no arguments is not the second tool
    assert len(prompts.worked_examples(ToolSet([ping, book]))) == 3


def test_the_examples_can_show_the_tools_closest_to_the_question():
    """Issue 41: with the first tool of the set shown, the model answered from memory questions
    whose own tool the examples did not show. ``tool="closest"`` puts those closest to ``question`` first."""

    @tool
    def ping() -> str:
        """Ping the server."""
        return "pong"

    tools = ToolSet([book, weather, ping])
    first = prompts.worked_examples(tools)
    closest = prompts.worked_examples(tools, question="What is the weather like in Oslo tomorrow?", tool="closest")
    assert first[0].calls[0][0] == "book" and closest[0].calls[0][0] == "weather"
    # closest is the default; with tool="first" the question chooses nothing
    assert prompts.worked_examples(tools, question="What is the weather like in Oslo tomorrow?") == closest
    assert prompts.worked_examples(tools, question="What is the weather like in Oslo tomorrow?", tool="first") == first
    assert [c[0] for c in closest[-1].calls] == ["weather", "book"]  # the next closest takes arguments
    # a question no tool is close to keeps the set's order; so does a tie
    assert prompts.worked_examples(tools, question="Hello there", tool="closest") == first
    # the closest tool that takes no arguments is passed over, as the first one is
    assert prompts.worked_examples(tools, question="ping", tool="closest")[0].calls[0][0] == "book"
    with pytest.raises(ValueError, match="unknown example tool choice 'best'; choose one of first, closest"):
        prompts.example_tool("best")


def _in_style(style: str) -> list[prompts.Worked]:
    """The examples for book and weather in ``style``: the same tasks and calls as the placeholder
    style's; only the results and the answers differ."""
    shown = prompts.placeholder_examples([book, weather], style=style)
    placeholder = prompts.placeholder_examples([book, weather])
    assert [(w.task, [c[:2] for c in w.calls]) for w in shown] == [
        (w.task, [c[:2] for c in w.calls]) for w in placeholder
    ]
    return shown


def test_the_concrete_style_shows_made_up_results_stated_in_words_and_no_bracketed_placeholder():
    """Issue 41: "(what f returned)" and "f returned: ..." were copied into real answers."""

    single, _, pair, two = shown = _in_style("concrete")
    assert single.calls[0][2] == "42" and single.answer == "The result is 42."
    assert [c[2] for c in pair.calls] == ["42", "17"] and pair.answer == "The results are 42 and 17."
    assert [c[2] for c in two.calls] == ["42", "17"] and "42" in two.answer and "17" in two.answer
    text = json.dumps(prompts.example_turns(shown))
    assert "returned" not in text and "(what" not in text
    with pytest.raises(
        ValueError, match="unknown example style 'vivid'; choose one of placeholder, concrete, status, value"
    ):
        prompts.placeholder_examples([book], style="vivid")
    assert prompts.example_style("concrete") == "concrete"


def test_the_status_style_shows_results_with_no_value_and_answers_that_say_what_ran():
    """Issue 41: the concrete style's made-up values were copied as answers and as arguments."""

    single, _, pair, two = shown = _in_style("status")
    ((name, args, result),) = single.calls
    assert result == '{"status": "success"}'
    assert single.answer.startswith(f"{name} ran with ") and single.answer.endswith(" and reported success.")
    assert all(f"{k} {json.dumps(v)}" in single.answer for k, v in args.items())
    assert {c[2] for c in pair.calls + two.calls} == {'{"status": "success"}'}
    assert pair.answer.endswith("both reported success.") and two.answer.endswith("both reported success.")
    assert "weather with city" in two.answer
    text = json.dumps(prompts.example_turns(shown))
    assert "returned" not in text and "(what" not in text and "42" not in text


def test_the_value_style_shows_a_status_with_a_value_and_answers_that_name_the_tool_and_value():
    """Issue 41: the status style's results carried nothing, and the model skipped more calls."""

    single, _, pair, two = shown = _in_style("value")
    ((name, _, result),) = single.calls
    assert json.loads(result) == {"status": "success", "value": 42}
    assert single.answer == f"{name} reported success with the value 42."
    assert [json.loads(c[2])["value"] for c in pair.calls + two.calls] == [42, 17, 42, 17]
    assert " 42 for " in pair.answer and " 17 for " in pair.answer
    assert two.answer.startswith(f"{name} reported 42, and ") and two.answer.endswith(" reported 17.")
    text = json.dumps(prompts.example_turns(shown))
    assert "returned" not in text and "(what" not in text


def test_every_demo_and_bench_example_call_binds_to_its_tool():
    """An example the model copies must itself be a valid call (values may differ from the demo data)."""
    from textagent.bench.examples import EXAMPLES
    from textagent.bench.tools import TOOL_BUILDERS, Env

    env = Env()
    for example in (*demo.DEMO_EXAMPLES, *EXAMPLES):
        for name, args, result in example.calls:
            assert TOOL_BUILDERS[name](env).bind(dict(args)) == args, (example.task, name)
            assert isinstance(result, str)
        assert example.answer and "\n" not in example.answer


PROMPT_DIR = pathlib.Path(prompts.__file__).resolve().parent


@pytest.mark.parametrize("path", sorted(str(p.relative_to(PROMPT_DIR)) for p in PROMPT_DIR.rglob("*.txt")))
def test_every_template_is_used(path):
    stem = pathlib.PurePath(path).stem
    sources = "\n".join(p.read_text() for p in PROMPT_DIR.parent.rglob("*.py"))
    assert f'"{stem}"' in sources or f'"{stem}.txt"' in sources, f"{path} is never loaded"


def test_prompt_files_sit_in_a_family_folder():
    assert not list(PROMPT_DIR.glob("*.txt")), "prompts live in text/, native/, proxy/ or common/"
    assert {p.name for p in PROMPT_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        *prompts.FAMILIES,
        "common",
    }


def test_a_family_folder_wins_over_common():
    assert "final answer in words" in prompts.for_family("native").render("empty_reply")
    assert "ANSWER" in prompts.for_family("text").render("empty_reply")
    assert prompts.for_family("native").template("task") is prompts.for_family("text").template("task")
    with pytest.raises(FileNotFoundError, match="no prompt 'nope'"):
        prompts.for_family("text").template("nope")
    with pytest.raises(ValueError, match="unknown prompt family"):
        prompts.Prompts("chat")


def test_calls_that_do_not_wait_for_each_other_are_shown_in_one_reply():
    from textagent.tools import Example

    example = Example(
        "Average of Rome and Oslo?",
        (
            ("get_weather", {"city": "Rome"}, "24"),
            ("get_weather", {"city": "Oslo"}, "9"),
            ("calculate", {"expression": "(24 + 9) / 2"}, "16.5"),
        ),
        "16.5",
        replies=(2, 1),
    )
    turns = prompts.example_turns(prompts.worked_examples(demo.demo_tools(), [example]))
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert turns[1]["content"] == ('TOOL: get_weather ARGS: {"city": "Rome"}\nTOOL: get_weather ARGS: {"city": "Oslo"}')
    assert turns[2]["content"].splitlines() == ["OBSERVATION (get_weather): 24", "OBSERVATION (get_weather): 9"]
    assert turns[3]["content"].startswith("TOOL: calculate")


def test_replies_must_add_up_to_the_calls():
    import pytest

    from textagent.tools import Example

    with pytest.raises(ValueError, match="must be positive and add up to its 2 calls"):
        Example("x", (("a", {}, "1"), ("b", {}, "2")), "y", replies=(1,))


def _error(text, tools=None):
    with pytest.raises(ParseError) as info:
        parse_reply(text, tools)
    return info.value


def test_parse_feedback_says_where_and_gives_a_call_to_copy():
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
    calc = {
        "type": "function",
        "function": {
            "name": "calculate",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
    err = _error('I will check.\n- TOOL: get_wether ARGS: {"city": Paris}', [weather, calc])
    fb = prompts.parse_feedback(err)
    assert "line 2, column 35" in fb.lower()
    assert 'TOOL: get_weather ARGS: {"city": "text"}' in fb  # the closest real tool, its required parameter
    assert "ANSWER:" not in fb  # no way out offered: small models took it instead of fixing the call
    assert err.excerpt.split("\n")[0] in fb
    assert "Put text values in double quotes" in fb and err.hint in fb
    # no tools known: an example with the name the model tried; tools given win over the error's
    plain = _error('TOOL: get_wether ARGS: {"city": Paris}')
    assert 'TOOL: get_wether ARGS: {"key": "value"}' in prompts.parse_feedback(plain)
    assert 'TOOL: calculate ARGS: {"expression": "text"}' in prompts.parse_feedback(plain, [calc])


def test_parse_feedback_comes_from_the_template_file():
    template = (PROMPT_DIR / "text" / "format_error.txt").read_text(encoding="utf-8")
    fixed = [ln for ln in template.splitlines() if ln.strip() and "$" not in ln]
    fb = prompts.parse_feedback(_error("TOOL:"))
    assert fixed and all(line in fb for line in fixed)


def test_parse_feedback_on_an_error_without_excerpt_says_the_reply_was_empty():
    fb = prompts.parse_feedback(ParseError("nothing to read", label="bad_call"))
    assert "    (empty reply)" in fb and "nothing to read" in fb


CALC_LINE = 'TOOL: calculate ARGS: {"expression": "17 * 24"}'


@pytest.mark.parametrize(
    "reply,line,repeats",
    [
        (CALC_LINE + "\n" + CALC_LINE + "\n" + CALC_LINE[:30], 3, 2),  # a loop of one call
        (CALC_LINE + "\n" + CALC_LINE[:30], 2, 0),  # one line is no loop
        ('TOOL: calculate ARGS: {"expression": "1 +', 1, 0),
    ],
)
def test_a_reply_cut_where_it_stops_parsing_is_told_it_was_cut(reply, line, repeats):
    with pytest.raises(ParseError) as caught:
        parse_reply(reply, demo.demo_tools())
    text = prompts.cut_feedback(reply, caught.value)
    assert text.startswith("Your reply was cut off at the length limit") and f"line {line}," in text
    assert "not closed" not in text  # the cut is not the model's mistake
    assert (f"`{CALC_LINE}` {repeats} times" in text) == bool(repeats)


def test_a_cut_reply_with_an_earlier_mistake_gets_the_parse_feedback():
    reply = 'TOOL: calculate ARGS: {"expression": 17 * 24}\n' + CALC_LINE[:30]
    with pytest.raises(ParseError) as caught:
        parse_reply(reply, demo.demo_tools())
    assert caught.value.line == 1 and prompts.cut_feedback(reply, caught.value) is None
