"""textagent._schema: example values read from a schema (the worked examples and feedback use them)."""
import pytest

from textagent._schema import described_examples, example_value, other_value


@pytest.mark.parametrize("description, values", [
    ("The city and state, e.g. San Francisco, CA", ["San Francisco, CA"]),
    ("Unit, e.g. 'kg' or 'lb'.", ["kg", "lb"]),
    ("Number of years, for example 5.", ["5"]),
    ('A place such as "Boston, MA"', ["Boston, MA"]),
    ("Fruit (e.g. apples) to buy", ["apples"]),
    ("No example here.", []),
    (None, []),
])
def test_the_values_a_description_names(description, values):
    assert described_examples(description) == values


def test_a_described_value_is_used_only_when_it_fits_the_schema():
    assert example_value({"type": "string", "description": "e.g. Paris"}) == "Paris"
    assert example_value({"type": "integer", "description": "e.g. 12"}) == 12
    assert example_value({"type": "integer", "description": "e.g. twelve"}) == 3
    assert example_value({"type": "integer", "description": "e.g. 12", "maximum": 5}) == 3
    assert example_value({"type": "string", "description": "e.g. abc", "pattern": "^[0-9]+$"}) == "text"


def test_numbers_stay_within_their_bounds():
    assert example_value({"type": "integer", "minimum": 10}) == 10
    assert example_value({"type": "number", "maximum": 1}) == 1
    assert other_value(10, {"type": "integer", "minimum": 10, "maximum": 10}) == 10
    assert other_value(10, {"type": "integer", "maximum": 10}) == 9


def test_the_second_value_is_another_one_the_description_names():
    schema = {"type": "string", "description": "Unit, e.g. 'kg' or 'lb'."}
    assert (example_value(schema), other_value(example_value(schema), schema)) == ("kg", "lb")


def test_schema_examples_defaults_and_consts_come_first():
    assert example_value({"type": "string", "examples": ["x"], "description": "e.g. y"}) == "x"
    assert example_value({"type": "string", "default": "d", "description": "e.g. y"}) == "d"
    assert example_value({"const": 7}) == 7
