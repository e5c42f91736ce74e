"""textagent.grounding: which numbers and listed items of an answer nothing in the run supports."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from textagent.checks.items import Unlooked, unlooked_items
from textagent.checks.numbers import numbers_in, unsupported_numbers


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


# -- items listed beside a looked-up one ----------------------------------------------------

LIGHTS = "Turn off the lights in the living room, the hallway and the bathroom."


@pytest.mark.parametrize("task, answer, calls, outputs, items", [
    # after the first item of a list, the rest answered without a call; followed item by item
    (LIGHTS, "The hallway light is now off, the bathroom light is now off, and the living room light is now off.",
     [("toggle_light", {"room": "living room", "on": False})], ["living room light is now off"],
     [Unlooked("hallway", "toggle_light", {"room": "hallway", "on": False}, "living room"),
      Unlooked("bathroom", "toggle_light", {"room": "bathroom", "on": False}, "living room")]),
    # the value's last path part is what the task names; "in" leads into the item
    ("What time is it right now in Paris and in Tokyo?", "It is 14:00 in Paris and 14:00 in Tokyo.",
     [("get_time", {"timezone": "Europe/Paris"})], ['{"timezone": "Europe/Paris", "now": "14:00"}'],
     [Unlooked("Tokyo", "get_time", {"timezone": "Europe/Tokyo"}, "Paris")]),
    # a path part in the task: the call keeps the path, with "_" for spaces
    ("Time in New York and in Los Angeles?", "9:00 and 6:00.", [("get_time", {"timezone": "America/New_York"})],
     ["09:00"], []),
    ("Time in New York and in Los Angeles?", "New York 9:00, Los Angeles 6:00.",
     [("get_time", {"timezone": "America/New_York"})], ["09:00"],
     [Unlooked("Los Angeles", "get_time", {"timezone": "America/Los_Angeles"}, "New York")]),
    # the item before the value ("than"), and a run of capitalised words
    ("How many degrees warmer is Sydney than Berlin right now?", "Sydney is 4 °C warmer than Berlin.",
     [("get_weather", {"city": "Berlin"})], ['{"city": "Berlin", "temp_c": 4}'], [Unlooked("Sydney", "get_weather", {"city": "Sydney"}, "Berlin")]),
    ("Weather in Paris and New York?", "Paris is sunny and New York rainy.",
     [("get_weather", {"city": "Paris"})], ['{"city": "Paris"}'], [Unlooked("New York", "get_weather", {"city": "New York"}, "Paris")]),
    ("Which city is warmer right now, Lisbon or London?", "London, at 27 °C.",
     [("get_weather", {"city": "Lisbon"})], ['{"city": "Lisbon", "temp_c": 22}'], [Unlooked("London", "get_weather", {"city": "London"}, "Lisbon")]),
])
def test_listed_items_the_answer_names_without_a_call_are_found(task, answer, calls, outputs, items):
    assert unlooked_items(task, answer, calls, outputs) == items


@pytest.mark.parametrize("task, answer, calls, outputs", [
    # every item called, or covered by a result
    ("Weather in Paris and in Tokyo?", "Sunny in both.", [("get_weather", {"city": "paris"}),
                                                          ("get_weather", {"city": "Tokyo"})], ["sunny", "sunny"]),
    ("Weather in Paris and in Tokyo?", "Paris 18, Tokyo 25.", [("get_weather", {"city": "Paris"})],
     ['[{"city": "Paris", "temp_c": 18}, {"city": "Tokyo", "temp_c": 25}]']),
    # the answer does not speak of the other item
    ("Weather in Paris and in Tokyo?", "Paris is sunny.", [("get_weather", {"city": "Paris"})], ["sunny"]),
    # a comma alone makes no list; no list at all
    ("What is the temperature in Berlin, in Celsius?", "4 degrees Celsius in Berlin.",
     [("get_weather", {"city": "Berlin"})], ['{"temp_c": 4}']),
    ("What is the weather in Paris?", "Sunny in Paris, not in Tokyo.", [("get_weather", {"city": "Paris"})], ["sunny"]),
    # a capitalised value is not listed beside a lower-case word, nor the other way round
    ("Is it raining in Athens and should I take an umbrella?", "No rain in Athens; you should not.",
     [("get_weather", {"city": "Athens"})], ['{"rain": false}']),
    ("Turn off the kitchen light and tell me the time in Paris", "Kitchen off; I cannot tell Paris time.",
     [("toggle_light", {"room": "kitchen", "on": False})], ["kitchen light is now off"]),
    # no call, or arguments that are not strings
    ("Paris and Tokyo?", "Tokyo.", [], []),
    ("Multiply 3 and 4", "12 and 4", [("multiply", {"a": 3, "b": 4})], ["12"]),
])
def test_nothing_is_found_when_the_items_are_covered_or_not_listed(task, answer, calls, outputs):
    assert unlooked_items(task, answer, calls, outputs) == []


def test_items_come_once_in_the_task_order_with_the_call_of_their_neighbour():
    task = "Turn off the bathroom and the hallway light, and get the weather in Rome and Oslo."
    calls = [("get_weather", {"city": "Rome"}), ("toggle_light", {"room": "hallway", "on": False})]
    answer = "Bathroom, bathroom and hallway are off; Oslo is cold and Rome warm."
    assert unlooked_items(task, answer, calls, ["off", "warm"]) == [
        Unlooked("bathroom", "toggle_light", {"room": "bathroom", "on": False}, "hallway"),
        Unlooked("Oslo", "get_weather", {"city": "Oslo"}, "Rome")]
