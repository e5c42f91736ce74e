"""Bounds on the work of BFCL's simulators, so that no call of a model runs for ever.

BFCL's MathAPI does what its arguments say: ``logarithm(precision=10**7)`` runs mpmath at ten
million digits (hours), ``square_root`` likewise with ``decimal``, ``power(base=3,
exponent=10**9)`` and ``round_number(number=5, decimal_places=-10**9)`` build integers of a
billion digits. :func:`bound_math_api` wraps those four methods of the class: within the bounds
they are BFCL's own code unchanged (its data asks for 2-10 digits of precision), past them they
answer an error at once, the way the method answers a bad argument. The wrapped class serves
every call, the episode's and the checker's replay (the model's calls and the ground truth's).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DIGITS", "MAX_PRECISION", "bound_math_api"]

#: The most digits of precision ``logarithm`` and ``square_root`` compute (1,000 take milliseconds;
#: BFCL's ground truth asks for at most 10).
MAX_PRECISION = 1000
#: The most digits of an integer result: Python's default limit on writing an int as text, so a
#: larger result could not reach the model anyway (BFCL's executor answers that error for it).
MAX_DIGITS = 4300
_MAX_BITS = 14_284  # 2**14284 < 10**4300 < 2**14285


def _over(value: Any, bound: int) -> bool:
    """``value`` read as a number (mpmath also takes a numeric string) is past ``bound``."""
    if isinstance(value, int):
        return value > bound
    try:
        return float(value) > bound
    except (TypeError, ValueError, OverflowError):
        return False  # not a number: the method answers its own error


def _precision(args: dict[str, Any]) -> dict[str, Any] | None:
    if _over(args.get("precision"), MAX_PRECISION):
        return {"error": f"Precision must be at most {MAX_PRECISION} digits."}
    return None


def _power(args: dict[str, Any]) -> dict[str, Any] | None:
    base, exponent = args.get("base"), args.get("exponent")
    if not (isinstance(base, int) and isinstance(exponent, int) and exponent > 0):
        return None  # a float power overflows at once; a negative exponent makes a float
    # |base| ** exponent >= 2 ** ((bits of |base| - 1) * exponent), so past the bound it is over
    # 10**MAX_DIGITS; within it the power has at most twice the bound's bits: cheap
    if (abs(base).bit_length() - 1) * exponent > _MAX_BITS:
        return {"error": f"The result would have more than {MAX_DIGITS} digits."}
    return None


def _round(args: dict[str, Any]) -> dict[str, Any] | None:
    number, places = args.get("number"), args.get("decimal_places")
    if isinstance(number, int) and isinstance(places, int) and -places > number.bit_length() // 3 + 1:
        # Python computes 10**-places first; past the number's own size the answer is 0
        # (10**d > 8**d >= 2 * |number|), so it is given without that power
        return {"result": 0}
    return None


_CHECKS: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "logarithm": _precision,
    "square_root": _precision,
    "power": _power,
    "round_number": _round,
}


def _bounded(method: Callable[..., Any], check: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Any:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return method(self, *args, **kwargs)  # the method raises its own error for these arguments
        bound.apply_defaults()
        refused = check(dict(bound.arguments))
        return refused if refused is not None else method(self, *args, **kwargs)

    call.textagent_bounded = True  # type: ignore[attr-defined]
    return call


def bound_math_api(cls: type) -> None:
    """Wrap the methods of BFCL's MathAPI class whose work grows with their arguments (once)."""
    for name, check in _CHECKS.items():
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "textagent_bounded", False):
            setattr(cls, name, _bounded(method, check))
