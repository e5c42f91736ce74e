"""NumbersCheck: an answer that states numbers no tool result holds is sent back once.

Small models answer with values they never looked up: a temperature copied from a worked
example, a count from the example's answer. A number that appears neither in the task nor in any
tool result is a visible trace of that.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal

from ..numbers import find_numbers
from ..prompts import Worked, listed
from ..steps import SentBack
from .base import RunView

__all__ = ["NumbersCheck", "numbers_in", "unsupported_numbers"]


class NumbersCheck:
    """Send back, once per run, a final answer stating numbers found neither in the task nor in
    any tool result, when the run called a tool (an answer from the model's own knowledge is not
    second-guessed). The text names the numbers, and those the worked examples hold as copied
    from there. Numbers are digits (``3,800,000`` is one number); a result rounded to the
    answer's places supports it."""

    name = "numbers"

    def on_answer(self, run: RunView, answer: str) -> SentBack | None:
        outputs = [o.output for s in run.steps for o in s.outcomes]
        if not outputs or run.sent_back_by(self.name):
            return None
        missing = unsupported_numbers(answer, [run.task, *outputs])
        if not missing:
            return None
        copied = _from_examples(missing, run.examples)
        if copied:
            text = run.prompts.render("unsupported_copied", numbers=listed(missing), copied=listed(copied),
                                      come="comes" if len(copied) == 1 else "come")
        else:
            text = run.prompts.render("unsupported_answer", numbers=listed(missing))
        return SentBack(self.name, text, tuple(missing))


def _from_examples(numbers: list[str], examples: Iterable[Worked]) -> list[str]:
    """Those of ``numbers`` the worked examples shown hold (arguments, results, answers)."""
    shown = [json.dumps(args, default=str) + " " + result for worked in examples for _, args, result in worked.calls]
    shown += [worked.answer for worked in examples]
    return [n for n in numbers if not unsupported_numbers(n, shown)]


def numbers_in(text: str) -> list[str]:
    """The numbers written in ``text``, as written (group separators removed), without signs:
    they are compared away, since "-2 °C" and "2 degrees below zero" state the same value."""
    return [number.digits for number in find_numbers(text)]


def unsupported_numbers(answer: str, sources: Iterable[str]) -> list[str]:
    """The numbers of ``answer`` (in order, each once) that no source text contains, where a
    source number rounded to the answer's decimal places counts (a result of 3.9473 supports
    "3.9" and "3.95"; 14 supports "14.0")."""
    # find_numbers only gives plain decimals, so Decimal() always parses them and the exponent
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
