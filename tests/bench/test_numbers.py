"""textagent.bench.numbers: the one reading of the numbers written in a text."""

from __future__ import annotations

import pytest

from textagent.bench.numbers import Number, find_numbers


def _read(text):
    return [("-" if n.negative else "") + n.digits for n in find_numbers(text)]


@pytest.mark.parametrize(
    "text, numbers",
    [
        ("Lisbon is at 22 °C and London at 27 °C.", ["22", "27"]),
        ("Paris has 3,800,000 inhabitants", ["3800000"]),
        ("Paris has 3,800,000, London 8,900,000.", ["3800000", "8900000"]),  # a list comma after a group
        ("1,234.5, then 1,5 and 1,234,5", ["1234.5", "1", "5", "1", "234", "5"]),
        ("1,2345 and 1234,567", ["1", "2345", "1234", "567"]),
        ("-2 °C, −3 °C, customer C-1001, 2025-06-14", ["-2", "-3", "1001", "2025", "06", "14"]),
        ("T14:00, 1e3, x_7", ["14", "00", "1", "3", "7"]),  # letters before digits do not hide them
        (".5 and v1.2.3 and 12.", ["1.2", "12"]),  # a "." before digits does
        ("87.8°F, $875.00, 25*10=250", ["87.8", "875.00", "25", "10", "250"]),
        ("no numbers", []),
        ("", []),
    ],
)
def test_find_numbers(text, numbers):
    assert _read(text) == numbers


def test_none_has_no_numbers():
    assert find_numbers(None) == []


def test_value_carries_the_sign():
    assert [n.value for n in find_numbers("-2, 3.5 and −1,000")] == [-2.0, 3.5, -1000.0]
    assert Number("14.0", False).value == 14.0
