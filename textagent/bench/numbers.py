"""The numbers written in a text, as the bench's numeric checks read them (which values an
answer states).

The rules:

* a number is digits with an optional decimal part ("3.9"; "12." ends a sentence, so it is 12);
* "3,800,000"-style comma groups are one number; "1,5" and "1,234,5" are separate numbers;
* a letter or underscore before the digits does not hide them ("T14", "C1001", "1e3" is 1 and 3),
  but a digit or "." does (".5" and the "3" of "1.2.3" are not numbers of their own);
* a "-" or "−" directly before the digits is the number's sign only where no letter, digit or "."
  comes before it: "-2" and "−2" are negative, the "1001" of "C-1001" and the "06" of "2025-06"
  are not. The sign is reported beside the digits, for callers that compare values without it
  ("-2 °C" and "2 degrees below zero" state the same value).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Number", "find_numbers"]

_DIGITS = r"(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?"
_NUMBER = re.compile(r"(?:(?<![\w.])(?P<sign>[-−]))?(?<![\d.])(?P<digits>" + _DIGITS + ")")


@dataclass(frozen=True)
class Number:
    """One number of a text."""

    digits: str  # as written, without sign and group separators: "3800000", "14.0"
    negative: bool  # written with a minus sign

    @property
    def value(self) -> float:
        return -float(self.digits) if self.negative else float(self.digits)


def find_numbers(text: str | None) -> list[Number]:
    """The numbers written in ``text``, in order (none for ``None``)."""
    return [Number(m["digits"].replace(",", ""), m["sign"] is not None) for m in _NUMBER.finditer(text or "")]
