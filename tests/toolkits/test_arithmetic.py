"""textagent.toolkits.arithmetic: the safe evaluator under the demo's ``calculate``: values, bounds, errors."""

from __future__ import annotations

import math
import time

import pytest

from textagent.toolkits import arithmetic
from textagent.toolkits.arithmetic import evaluate


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("17*24", 408),
        ("17 * 24", 408),
        ("408 + 100", 508),
        ("17 * 23 + sqrt(144)", 403),
        ("10 / 4", 2.5),
        ("10 / 2", 5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("2 ^ 10", 1024),  # ^ means power in a calculator
        ("2 ** 3 ** 2", 512),  # right-associative
        ("-(3 + 4) * +2", -14),
        ("((1 + 2) * (3 + 4))", 21),
        ("abs(-3.5)", 3.5),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("floor(2.7) + ceil(2.1)", 5),
        ("log(100, 10)", 2),
        ("log10(1000)", 3),
        ("log2(8)", 3),
        ("exp(0)", 1),
        ("sin(0) + cos(0) + tan(0)", 1),
        ("pi", math.pi),
        ("e", math.e),
        ("3 × 4 ÷ 2 − 1", 5),  # unicode operators
        ("17*24=", 408),
        ("1_000 * 2", 2000),
        ("1e3", 1000),
    ],
)
def test_evaluate(expression, expected):
    result = evaluate(expression)
    assert result == pytest.approx(expected)
    if isinstance(expected, int):
        assert type(result) is int


def test_returns_int_when_integral():
    assert type(evaluate("10 / 2")) is int
    assert type(evaluate("0.5 * 4")) is int
    assert type(evaluate("0.1 + 0.2")) is float
    assert type(evaluate("2.0 ** 60")) is float  # beyond exact float integers: stays a float
    assert evaluate("-0.0") == 0


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "10**10**10",
        "9^9^9",
        "2 ** 10000",
        "(10**300) ** 2",
        "10 ** 10 ** 10 ** 10",
        "0.5 ** -100000",
        "1.5 ** 100000",
    ],
)
def test_huge_powers_are_refused_at_once(expression):
    started = time.perf_counter()
    with pytest.raises(OverflowError, match="too large"):
        evaluate(expression)
    assert time.perf_counter() - started < 5  # computing any of these would take minutes to forever


def test_power_message_says_why():
    with pytest.raises(OverflowError) as info:
        evaluate("9**9**9")
    assert str(info.value) == "9 ** 387420489 is too large (about 369,693,100 digits; the limit is 300)"


def test_powers_of_small_bases_are_fine():
    assert evaluate("1 ** (10 ** 200)") == 1
    assert evaluate("(-1) ** (10 ** 200 + 1)") == -1
    assert evaluate("0 ** 100") == 0
    assert evaluate("0.5 ** 10000") == 0


@pytest.mark.parametrize(
    "expression",
    [
        "1" * 301,
        "9" * 400 + " - 1",
        "10**299 * 10**299",
        "1e999",
        "1e308 * 10",
        "floor(1e305)",
        "exp(1000)",
        "2 ** 1000",
    ],
)
def test_result_size_limit(expression):
    with pytest.raises(OverflowError, match="too large"):
        evaluate(expression)


def test_largest_allowed_numbers():
    assert evaluate("10 ** 299") == 10**299
    assert evaluate("9" * 300) == int("9" * 300)


def test_expression_length_limit():
    with pytest.raises(ValueError, match="expression too long"):
        evaluate("1+" * 600 + "1")
    with pytest.raises(ValueError, match="too long"):
        evaluate("1" * 10_000_000)


def test_ten_thousand_nested_parentheses():
    started = time.perf_counter()
    with pytest.raises(ValueError, match="too long|nested too deeply"):
        evaluate("(" * 10_000 + "1" + ")" * 10_000)
    assert time.perf_counter() - started < 5


def test_nesting_limit_independent_of_length(monkeypatch):
    monkeypatch.setattr(arithmetic, "MAX_EXPRESSION_CHARS", 10**6)
    for text in ("(" * 10_000 + "1" + ")" * 10_000, "sqrt(" * 10_000 + "4" + ")" * 10_000):
        with pytest.raises(ValueError, match="nested too deeply"):
            evaluate(text)
    with pytest.raises(ValueError, match="too complex"):
        evaluate("-" * 100_000 + "1")
    with pytest.raises(ValueError, match="too complex"):
        evaluate("1" + "+1" * 100_000)


def test_nesting_within_limits():
    assert evaluate("(" * arithmetic.MAX_NESTING + "1" + ")" * arithmetic.MAX_NESTING) == 1
    with pytest.raises(ValueError, match="nested too deeply"):
        evaluate("(" * (arithmetic.MAX_NESTING + 1) + "1" + ")" * (arithmetic.MAX_NESTING + 1))
    assert evaluate("-" * 150 + "1") == 1
    with pytest.raises(ValueError, match="too complex"):
        evaluate("1" + "+1" * 300)


def test_time_bound(monkeypatch):
    monkeypatch.setattr(arithmetic, "MAX_SECONDS", -1.0)  # already past the deadline at the first node
    with pytest.raises(TimeoutError, match="longer than"):
        evaluate("1 + 1")


@pytest.mark.parametrize(
    "expression, error, message",
    [
        ("1/0", ZeroDivisionError, "division by zero"),
        ("1 // 0", ZeroDivisionError, "division by zero"),
        ("1 % 0.0", ZeroDivisionError, "division by zero"),
        ("0 ** -1", ZeroDivisionError, "negative power"),
        ("sqrt(-1)", ValueError, r"sqrt\(-1\) is undefined: the square root of a negative number is not a real number"),
        ("log(0)", ValueError, r"log\(0\) is undefined"),
        ("log(8, 1)", ZeroDivisionError, "log"),
        ("(-8) ** (1/3)", ValueError, "not a real number"),
        ("2 +", ValueError, "invalid expression"),
        ("", ValueError, "empty expression"),
        ("   ", ValueError, "empty expression"),
        ("x + 1", ValueError, "unknown name `x`: calculate takes numbers, not names"),
        ("10 * GLOBEX", ValueError, "unknown name `GLOBEX`: .* look that value up with a tool first"),
        # words that do not even parse are named too, each once, rather than "invalid syntax"
        (
            "Paris population / Lisbon population",
            ValueError,
            "unknown name `Paris`, `population`, `Lisbon`: calculate takes numbers",
        ),
        ("price of GLOBEX * 10", ValueError, "unknown name `price`, `of`, `GLOBEX`"),
        ("sqrt(16) apples", ValueError, "unknown name `apples`"),
        ("sqrt", ValueError, "is a function"),
        ("foo(2)", ValueError, "unknown function `foo`"),
        ("__import__('os').system('echo hi')", ValueError, "unknown function"),
        ("(1).__class__", ValueError, "Attribute is not supported"),
        ("[1, 2]", ValueError, "not supported"),
        ("'a' * 3", ValueError, "is not a number"),
        ("True + 1", ValueError, "is not a number"),
        ("1j * 2", ValueError, "is not a number"),
        ("1, 000", ValueError, "commas are not allowed"),
        ("3 & 1", ValueError, "operator `&` is not supported"),
        ("1 < 2", ValueError, "Compare is not supported"),
        ("sqrt(1, 2)", ValueError, r"sqrt\(\) takes 1 argument, got 2"),
        ("round(1, 2, 3)", ValueError, "takes 1 or 2 arguments"),
        ("sqrt(x=4)", ValueError, "positional"),
        ("round(5, -10**9)", ValueError, "whole number between"),
        ("lambda: 1", ValueError, "Lambda is not supported"),
        ("1 if 1 else 2", ValueError, "not supported"),
        ("1\x002", ValueError, "invalid expression"),
    ],
)
def test_errors(expression, error, message):
    with pytest.raises(error, match=message):
        evaluate(expression)


def test_never_evals(monkeypatch):
    import builtins

    def forbidden(*a, **k):
        raise AssertionError("eval/exec must never be used")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert evaluate("17 * 24 + sqrt(144)") == 420
