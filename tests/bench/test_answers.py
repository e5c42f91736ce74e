"""bench/answers.py: answers copying a worked example, claiming a call that never ran, repeating
the loop's feedback; episodes that skipped the call they needed."""

from __future__ import annotations

import pytest
from suite_runs import read_back

from textagent.prompts import EXAMPLE_STYLES, placeholder_examples


def test_answers_copying_a_placeholder_example_are_counted():
    """Issue 41: the form of the placeholder examples' answers, copied into real answers."""
    from textagent.bench.answers import copied_example

    for copied in (
        "math_factorial returned: 120",
        "CalculateTax returned: (what CalculateTax returned).",
        "The field is (what magnetic_field.calculate returned).",
        "restaurant.search and flight.search returned a result each.",
        "f returned a result for each.",
        "The result is 17.",
        "The answers are 42 and 17.",
        "get_weather reported success with the value 42.",
        "f reported 42 for x 1, and 17 for x 2.",
        "The movies playing are: (list of movie titles).",
        "The field is (calculate_electric_field returned).",
        "The area is: (calculate the area using Heron's formula)",
        "The name of the python file in the current directory is: (name of the python file).",
        "The roots are (the roots of the quadratic equation).",
        "The birthdate is (the birthdate returned by scientist_info.get_birthdate).",
        "No tool is needed for that.",  # the direct example's tail as the whole answer
    ):
        assert copied_example(copied), copied
    for fine in ("The factorial of 5 is 120.", "It returned to Paris.", "The search returned 3 results.", None, ""):
        assert not copied_example(fine), fine
    for fine in (
        "The result is 420.",
        "Between 42 and 170.",
        "The result is 42 metres.",
        "It is 18 °C in Paris (the warmest day of the week so far).",
        "The file is deploy.py (the only Python file there).",
        "The molecule (the one with id DNA123) is ATGC.",
        "The settings are (number: integer, formatted: boolean).",
        "Paris is in France; no tool is needed for that.",
        "The sensor reported 42.5 degrees.",
        "The server reported success.",
    ):
        assert not copied_example(fine), fine


def test_answers_repeating_the_feedback_are_counted():
    """Answers seen in bench runs: the model wrote the feedback it had been sent as its answer."""
    from textagent.bench.answers import repeated_feedback

    for parroted in (
        "The call failed. Call the tool again (with corrected arguments if they were wrong); answer only from "
        "a call that worked.",
        "board_game_search returned an error. Call the tool again (with corrected arguments if they were wrong)",
        "format error: Your reply was cut off at the length limit in the middle of line 14, so none of it was run.",
        "ERROR: unknown tool `calculate_prime_factors`.\nThe call did not run. Call the tool\n again with corrected "
        "arguments.",
    ):
        assert repeated_feedback(parroted), parroted
    for fine in ("The call to the weather service worked: 18 °C.", "Call me again tomorrow.", None, ""):
        assert not repeated_feedback(fine), fine


def test_the_feedback_sentences_come_from_every_feedback_template():
    """The sentences are read from the templates, so a reworded feedback is still counted."""
    from textagent import prompts
    from textagent.bench.answers import _FEEDBACK_TEMPLATES, feedback_sentences

    sentences = feedback_sentences()
    for family, name in _FEEDBACK_TEMPLATES:
        text = " ".join(prompts.for_family(family).template(name).template.split()).lower()
        assert any(sentence in text for sentence in sentences), (family, name)


def test_a_status_answer_is_copied_only_when_the_tool_it_names_did_not_run():
    """The status style's answer says what ran: the truth after that call, a copied claim without it."""
    from textagent.bench.answers import called_tools, copied_example

    answer = 'get_weather ran with city "Paris" and reported success.'
    record = read_back(answer=answer, calls=[{"name": "get_weather", "args": {"city": "Paris"}}])
    assert not copied_example(answer, called_tools(record))
    assert copied_example(answer, called_tools(read_back(calls=[]))) and copied_example(answer, {"clock"})
    assert copied_example("f ran for x 1, and for x 2; both reported success.", set())
    assert copied_example(answer)  # nothing known of the calls: counted
    # the claim in other words of what the tool reported counts too
    claim = 'sports.most_points ran with league "NBA"; it reported the record for the most points.'
    assert copied_example(claim, set()) and not copied_example(claim, {"sports.most_points"})
    for fine in ("It ran with no trouble.", "The backup reported success.", "The job ran for 2 hours."):
        assert not copied_example(fine, set()), fine
    # a function-named claim with no word of a report (BFCL test, the 1.5B); every name it claims
    # must have run
    for claim, ran in (
        ('maps.route_times ran with route "Paris to Rome"; it returned the estimated time.', {"maps.shortest_path"}),
        ('get_snow_report ran with location "Boston", and get_weather with location "Oslo".', set()),
        ('get_weather ran with city "Oslo", and get_snow_report ran with location "Oslo".', {"get_weather"}),
    ):
        assert copied_example(claim, ran) and not copied_example(claim, ran | {"maps.route_times", "get_snow_report"})
    assert not copied_example("The script deploy ran for a minute.", set())


@pytest.mark.parametrize("style", EXAMPLE_STYLES)
def test_every_answer_of_the_made_up_examples_counts_as_copied(style):
    """The check follows the templates: each answer a placeholder example shows, in each style,
    is what the report counts when a model writes it as its own."""
    from textagent.bench.answers import copied_example
    from textagent.tools import tool

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return city

    @tool
    def clock(zone: str) -> str:
        """The time in a zone."""
        return zone

    examples = placeholder_examples([weather, clock], style)
    answers = [w.answer for w in examples if w.calls]
    assert len(answers) == 3
    for answer in answers:
        assert copied_example(answer), answer


def test_skipped_calls_count_items_that_needed_one():
    from textagent.bench.answers import skipped_call

    assert skipped_call(read_back(kind="simple_python", bfcl={"first": {"error_type": "no_call"}}))
    assert not skipped_call(read_back(kind="irrelevance", bfcl={"first": {"error_type": "no_call"}}))
    assert not skipped_call(read_back(kind="simple_python", bfcl={"first": {"error_type": "wrong_value"}}))
    assert skipped_call(read_back(needs_tools=True, attempted=[])) and not skipped_call(
        read_back(needs_tools=True, attempted=["f"])
    )
    assert not skipped_call(read_back(needs_tools=True, attempted=[], stop_reason="backend_error"))


def test_a_claimed_call_is_one_the_answer_says_ran_and_the_episode_did_not():
    from textagent.bench.answers import claimed_call

    status = 'get_weather ran with city "Paris" and reported sun.'
    assert claimed_call(status, set()) and claimed_call(status, {"get_time"})
    assert not claimed_call(status, {"get_weather"})
    assert claimed_call('maps.route_times ran with route "A"; it returned 3 hours', {"get_weather"})
    # a placeholder copy is no claim; "ran for" without a function-like name is no claim either
    assert not claimed_call("The result is (what get_weather returned).", set())
    assert not claimed_call("The job ran for 2 hours.", set()) and not claimed_call(None, set())
