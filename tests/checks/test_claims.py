"""The claims check: an answer saying a tool ran that did not, or in the examples' wording."""

import pytest

from textagent import Agent, ScriptedBackend
from textagent.checks.claims import Claims, unrun_claims, wording
from textagent.toolkits import demo
from textagent.tools import tool


@pytest.fixture(autouse=True)
def _lights():
    demo.reset_lights()
    yield
    demo.reset_lights()


def run(replies, mode="text"):
    return Agent(ScriptedBackend(replies), demo.demo_tools(), checks=[Claims()], mode=mode).run("Weather in Paris?")


TOOLS = ["get_weather", "get_time", "triangle_properties.get", "calc"]


@pytest.mark.parametrize(
    ("answer", "claimed"),
    [
        ("get_weather returned: (what get_weather returned).", ["get_weather"]),
        ("triangle_properties.get ran with sides [3, 4, 5] and reported success.", ["triangle_properties.get"]),
        ("get_time and get_weather returned a result each.", ["get_time", "get_weather"]),
        ("The forecast: GET_WEATHER reported rain.", ["get_weather"]),
        # naming a tool is not saying it ran
        ("I would use get_weather for that; it needs a city.", []),
        ("get_weather is not needed. It returned nothing because nothing ran.", []),
        # a name inside a longer one is not the tool
        ("calculate returned 4.", []),
        ("my_get_weather returned 4.", []),
        ("", []),
    ],
)
def test_unrun_claims_are_a_listed_tool_said_to_have_run(answer, claimed):
    assert unrun_claims(answer, TOOLS, ran=[]) == claimed


def test_a_tool_that_ran_may_be_said_to_have_run():
    assert unrun_claims("get_time and get_weather returned a result each.", TOOLS, ran=["get_time"]) == ["get_weather"]


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        ("get_weather returned: (what get_weather returned).", ["(what get_weather returned)"]),
        ("The titles are: (list of movie titles)", ["(list of movie titles)"]),
        ("calculate and multiply returned a result each.", ["returned a result each"]),
        ("calculate_bmi returned a result for each.", ["returned a result for each"]),
        ("It is 8 C (46 F) in Paris.", []),
        ("The answer is (roughly) 8.", []),
        ("Each call returned a result: 8 C and 12 C.", []),
    ],
)
def test_the_examples_wording_is_their_blanks_and_a_result_each(answer, found):
    assert wording(answer) == found


def test_an_answer_claiming_a_call_that_never_ran_is_sent_back_once():
    result = run(["ANSWER: get_weather returned: 8 C.", "ANSWER: get_weather returned: 8 C again."])
    first = result.steps[0]
    assert first.sent_back.check == "claims" and first.sent_back.found == ("get_weather",)
    assert "`get_weather` has not run for this question" in first.sent_back.text
    assert "call it now" in first.sent_back.text
    # once per question: the second claim is taken as the answer
    assert result.stop_reason == "answer" and result.answer == "get_weather returned: 8 C again."


def test_the_model_then_calls_and_its_answer_stands():
    result = run(
        [
            "ANSWER: get_weather returned: 20 C.",
            'TOOL: get_weather ARGS: {"city": "Paris"}',
            "ANSWER: get_weather returned 8 C and rain: take a coat.",
        ]
    )
    assert [s.sent_back is not None for s in result.steps] == [True, False, False]
    assert result.answer == "get_weather returned 8 C and rain: take a coat."


def test_a_refused_call_did_not_run_but_one_that_raised_did():
    refused = run(['TOOL: get_weather ARGS: {"town": "Paris"}', "ANSWER: get_weather returned 8 C.", "ANSWER: ok"])
    assert refused.steps[1].sent_back is not None and refused.answer == "ok"

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        raise RuntimeError("down")

    agent = Agent(
        ScriptedBackend(['TOOL: lookup ARGS: {"city": "Paris"}', "ANSWER: lookup returned an error."]),
        [lookup],
        checks=[Claims()],
    )
    assert agent.run("Paris?").answer == "lookup returned an error."


def test_the_examples_wording_is_sent_back_after_the_call_ran():
    result = run(
        ['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: It is (what get_weather returned).", "ANSWER: 8 C."]
    )
    assert result.steps[1].sent_back.found == ("(what get_weather returned)",)
    assert result.steps[1].sent_back.text.startswith('Your ANSWER has "(what get_weather returned)": that is the')
    assert result.answer == "8 C."
    result = run(['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: get_weather returned a result for each."])
    assert result.steps[1].sent_back.found == ("returned a result for each",)


def test_answers_that_claim_nothing_are_taken():
    result = run(['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: get_weather says 8 C: take a coat."])
    assert result.steps[-1].sent_back is None and result.answer == "get_weather says 8 C: take a coat."


def test_native_mode_words_it_without_the_text_protocol():
    text = Claims().on_answer(_view("native"), "get_time and get_weather returned a result each.").text
    assert text.startswith(
        "Your answer says `get_time` and `get_weather` ran, but `get_time` and `get_weather` have not"
    )
    assert "OBSERVATION" not in text and "call them now" in text


def _view(family):
    from textagent.checks import RunView
    from textagent.prompts import for_family
    from textagent.tools import ToolSet

    return RunView("q", (), ToolSet(demo.demo_tools()), (), for_family(family))
