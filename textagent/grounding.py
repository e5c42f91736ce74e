"""Numbers in a final answer that nothing in the run supports.

Small models answer with values they never looked up: a temperature copied from a worked
example, the second city of "Lisbon or London?" made up after the first lookup, a count from
the example's answer. A number that appears neither in the task nor in any tool result is the
visible trace of that. The Agent sends such an answer back once (``check_numbers``), so the
model can make the calls it skipped; a second answer is taken as it is.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

__all__ = ["numbers_in", "unsupported_numbers"]

# A number: digits with an optional decimal part; "3,800,000"-style comma groups are
# one number. A sign or letter before it is not part of it ("C-1001" holds 1001, "-2" is 2):
# signs are compared away, since "-2 °C" and "2 degrees below zero" state the same value.
_NUMBER = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|(?<![\d.])\d+(?:\.\d+)?")


def numbers_in(text: str) -> list[str]:
    """The numbers written in ``text``, as written (group separators removed)."""
    return [m.group().replace(",", "") for m in _NUMBER.finditer(text)]


def unsupported_numbers(answer: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``answer`` (in order, each once) that no source text contains, where a
    source number rounded to the answer's decimal places counts (a result of 3.9473 supports
    "3.9" and "3.95"; 14 supports "14.0")."""
    # _NUMBER only matches plain decimals, so Decimal() always parses them and the exponent
    # is an int.
    known = {Decimal(number) for text in sources for number in numbers_in(text)}
    missing: list[str] = []
    for number in numbers_in(answer):
        if number in missing:
            continue
        value = Decimal(number)
        quantum = Decimal(1).scaleb(value.as_tuple().exponent)
        if value in known or any(k.quantize(quantum) == value for k in known if _roundable(k, quantum)):
            continue
        missing.append(number)
    return missing


def _roundable(value: Decimal, quantum: Decimal) -> bool:
    # quantize() refuses results with more digits than the context allows; such values
    # cannot equal a number written in an answer anyway.
    return value.adjusted() - quantum.adjusted() < 28
