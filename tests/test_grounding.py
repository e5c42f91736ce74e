"""textagent.grounding: which numbers of an answer nothing in the run supports."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from textagent.grounding import numbers_in, unsupported_numbers


@pytest.mark.parametrize("text, numbers", [
    ("Lisbon is at 22 °C and London at 27 °C.", ["22", "27"]),
    ("Paris has 3,800,000 inhabitants", ["3800000"]),          # group separators are one number
    ("customer C-1001, -2 °C", ["1001", "2"]),                   # signs are not part of it
    ("2025-06-14T14:00:00+02:00", ["2025", "06", "14", "14", "00", "00", "02", "00"]),
    ("ratio 3.9, then 1,5 and 12.", ["3.9", "1", "5", "12"]),   # "1,5": two numbers; "12." ends a sentence
    ("no numbers here", []),
])
def test_numbers_in(text, numbers):
    assert numbers_in(text) == numbers


def test_an_answer_from_the_question_and_the_results_is_supported():
    sources = ["What is the average temperature of Rome and Oslo?", '{"temp_c": 24}', '{"temp_c": 9}', "16.5"]
    assert unsupported_numbers("Rome is at 24 °C and Oslo at 9 °C; their average is 16.5 °C.", sources) == []


def test_made_up_and_copied_numbers_are_named_once_in_order():
    sources = ["Which city is warmer right now, Lisbon or London?", '{"city": "Lisbon", "temp_c": 22}']
    answer = "Lisbon is at 22 °C and London at 27 °C; 27 is less than 31."
    assert unsupported_numbers(answer, sources) == ["27", "31"]


def test_a_rounded_result_supports_the_rounded_number_but_not_another():
    assert unsupported_numbers("about 3.9 times, or 3.95", ["3.9473684"]) == []
    assert unsupported_numbers("14.0 and 80", ["14", "80.0"]) == []
    assert unsupported_numbers("about 4 times", ["3.9473684"]) == []        # rounded to a whole number
    assert unsupported_numbers("about 3.8 times", ["3.9473684"]) == ["3.8"]


def test_times_and_dates_are_supported_by_a_timestamp():
    assert unsupported_numbers("It is 14:00 on 14 June 2025 in Paris.", ["2025-06-14T14:00:00+02:00"]) == []
    assert unsupported_numbers("It is 15:00 in Paris.", ["2025-06-14T14:00:00+02:00"]) == ["15"]


def test_no_sources_support_nothing():
    assert unsupported_numbers("42", []) == ["42"]
    assert unsupported_numbers("no numbers", []) == []


@given(st.lists(st.decimals(min_value=-10**9, max_value=10**9, places=3, allow_nan=False), max_size=6))
def test_every_number_of_the_sources_is_supported(values):
    text = " and ".join(str(v) for v in values)
    assert unsupported_numbers(text, [text]) == []
