"""The tools an answer says ran (textagent.protocol.claims): the status form, whatever it says
was reported, each name once in the order named; words that merely say something ran are no claim."""

from __future__ import annotations

import pytest

from textagent.protocol import claimed_tools


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ('get_weather ran with city "Paris" and reported sunny.', ["get_weather"]),
        (
            'get_current_weather ran with location "Shanghai, China" and unit "metric"; it reported 21.',
            ["get_current_weather"],
        ),
        ("maps.route_times ran with route A; it returned the estimated time.", ["maps.route_times"]),
        ('get_snow_report ran with location "Boston"', ["get_snow_report"]),
        ("Search ran with query cats and reported 3 pages.", ["Search"]),  # the status form names any tool
        (
            "convert_units ran with value 3, then get_rate ran for EUR and both reported success; "
            "convert_units ran with value 4 too.",
            ["convert_units", "get_rate"],
        ),
    ],
)
def test_an_answer_in_the_status_form_names_the_tools_it_says_ran(answer, names):
    assert claimed_tools(answer) == names


@pytest.mark.parametrize(
    "answer",
    [
        "The job ran for 2 hours.",
        "It is sunny in Paris.",
        "I ran the numbers: 17 * 24 = 408.",
        "",
    ],
)
def test_words_that_say_something_ran_are_no_claim(answer):
    assert claimed_tools(answer) == []
