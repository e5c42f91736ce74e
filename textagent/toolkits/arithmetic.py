"""A safe arithmetic evaluator: the demo's ``calculate`` tool runs on it.

Python's own parser reads the expression; only numbers, the operators, a few functions and
constants are evaluated, with every size bounded (characters, nesting, operations, digits, time),
so no expression can run code, exhaust memory or take long.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_AST_DEPTH",
    "MAX_DIGITS",
    "MAX_EXPRESSION_CHARS",
    "MAX_NESTING",
    "MAX_SECONDS",
    "check_number",
    "evaluate",
    "tidy",
]

# --------------------------------------------------------------------------------------------
# calculate
# --------------------------------------------------------------------------------------------

MAX_EXPRESSION_CHARS = 1000  # longer expressions are refused before parsing
MAX_NESTING = 50  # parentheses / function calls inside each other
MAX_AST_DEPTH = 200  # operators chained (e.g. 1+1+...+1) -- bounds the evaluator's recursion
MAX_DIGITS = 300  # integers (literals, intermediate values, results); floats must be finite
MAX_SECONDS = 1.0  # wall-time bound of one evaluation (checked at every node)
_INT_LIMIT = 10**MAX_DIGITS

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any] | None] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: None,  # Pow: bounded, see _power
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, tuple[Any, int, int]] = {  # name -> (function, min args, max args)
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "log": (math.log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "exp": (math.exp, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_ALLOWED = f"numbers, + - * / // % ** (or ^), parentheses, {', '.join(_FUNCTIONS)} and {', '.join(_CONSTANTS)}"
_TRANSLATE = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "–": "-", "^": "**"})


def check_number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"the result {value!r} is not a real number")
    if isinstance(value, int):
        if abs(value) >= _INT_LIMIT:
            raise OverflowError(f"number too large (more than {MAX_DIGITS} digits)")
    elif not math.isfinite(value):
        raise OverflowError("number too large (overflow)" if not math.isnan(value) else "result is not a number")
    return value


def _power(base: int | float, exp: int | float) -> int | float:
    """base ** exp, refused at once when the result would exceed the size limit."""
    if base == 0 and exp < 0:
        raise ZeroDivisionError("0 cannot be raised to a negative power")
    if abs(base) > 1 and exp > 0:
        digits = exp * math.log10(abs(base))  # math.log10 takes big ints; no float conversion needed
        if digits > MAX_DIGITS:
            raise OverflowError(
                f"{_short(base)} ** {_short(exp)} is too large (about {_approx(digits)} digits; "
                f"the limit is {MAX_DIGITS})"
            )
    if abs(base) < 1 and base != 0 and exp < 0:
        digits = -exp * -math.log10(abs(base))
        if digits > MAX_DIGITS:
            raise OverflowError(f"{_short(base)} ** {_short(exp)} is too large")
    if isinstance(exp, float) and base < 0 and not exp.is_integer():
        raise ValueError(f"{_short(base)} ** {_short(exp)} is not a real number")
    try:
        result = base**exp
    except OverflowError:
        raise OverflowError(f"{_short(base)} ** {_short(exp)} is too large") from None
    return result


def _short(value: Any, *, paren: bool = True) -> str:
    text = repr(value)
    text = text if len(text) <= 30 else text[:12] + "…" + text[-6:]
    return f"({text})" if paren and text.startswith("-") else text


def _approx(digits: float) -> str:
    return f"{digits:,.0f}" if digits < 1e15 else f"{digits:.2g}"


def _nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]":
            depth -= 1
    return deepest


def _ast_depth(root: ast.AST) -> int:
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_AST_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


class _Evaluator:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def eval(self, node: ast.AST) -> int | float:
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"calculation took longer than {MAX_SECONDS:g} s")
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ValueError(f"{node.value!r} is not a number; only {_ALLOWED} are allowed")
            return check_number(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self.binary(node)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return check_number(_UNARY[type(node.op)](self.eval(node.operand)))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            if node.id in _FUNCTIONS:
                raise ValueError(f"`{node.id}` is a function: write {node.id}(x)")
            raise ValueError(_not_numbers([node.id]))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Tuple):
            raise ValueError("commas are not allowed: write one expression, and 1000 rather than 1,000")
        if isinstance(node, ast.BinOp):
            symbol = {
                ast.BitXor: "^",
                ast.BitAnd: "&",
                ast.BitOr: "|",
                ast.LShift: "<<",
                ast.RShift: ">>",
                ast.MatMult: "@",
            }.get(type(node.op), type(node.op).__name__)
            raise ValueError(f"operator `{symbol}` is not supported; only {_ALLOWED} are allowed")
        raise ValueError(f"{type(node).__name__} is not supported; only {_ALLOWED} are allowed")

    def binary(self, node: ast.BinOp) -> int | float:
        left, right = self.eval(node.left), self.eval(node.right)
        apply = _BINARY[type(node.op)]
        if apply is None:  # Pow
            return check_number(_power(left, right))
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ZeroDivisionError("division by zero")
        try:
            return check_number(apply(left, right))
        except OverflowError:
            raise OverflowError("number too large (overflow)") from None

    def call(self, node: ast.Call) -> int | float:
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)[:30]
            raise ValueError(f"unknown function `{name}`; available: {', '.join(_FUNCTIONS)}")
        name = node.func.id
        fn, lo, hi = _FUNCTIONS[name]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ValueError(f"{name}() takes plain positional arguments, e.g. {name}(2)")
        if not lo <= len(node.args) <= hi:
            count = str(lo) if lo == hi else f"{lo} or {hi}"
            raise ValueError(f"{name}() takes {count} argument{'s' if hi > 1 else ''}, got {len(node.args)}")
        args = [self.eval(a) for a in node.args]
        if name == "round" and len(args) == 2 and (not isinstance(args[1], int) or abs(args[1]) > MAX_DIGITS):
            raise ValueError(f"round(x, n): n must be a whole number between -{MAX_DIGITS} and {MAX_DIGITS}")
        try:
            return check_number(fn(*args))
        except ValueError as err:
            if "domain" in str(err):
                shown = ", ".join(_short(a, paren=False) for a in args)
                why = (
                    "the square root of a negative number is not a real number"
                    if name == "sqrt"
                    else "math domain error"
                )
                raise ValueError(f"{name}({shown}) is undefined: {why}") from None
            raise
        except OverflowError:
            raise OverflowError(f"{name}() result is too large (overflow)") from None
        except ZeroDivisionError:
            raise ZeroDivisionError(f"{name}() divided by zero (a log base of 1?)") from None


_WORD_RE = re.compile(r"[^\W\d]\w*")


def _unknown_words(text: str) -> list[str]:
    """Words in an expression that are neither functions nor constants, in order, once each."""
    return list(dict.fromkeys(w for w in _WORD_RE.findall(text) if w not in _FUNCTIONS and w not in _CONSTANTS))


def _not_numbers(words: list[str]) -> str:
    # Small models put the name of a value they have not looked up into the expression
    # ("10 * GLOBEX"); say what to do instead of only what is allowed.
    shown = ", ".join(f"`{w[:30]}`" for w in words[:4]) + (", …" if len(words) > 4 else "")
    return (
        f"unknown name {shown}: calculate takes numbers, not names. If a name stands for a value, "
        f"look that value up with a tool first, then write its number here. Allowed: {_ALLOWED}"
    )


def _clip(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "…"


def tidy(value: int | float) -> int | float:
    """Integral floats become ints (408.0 -> 408) where that is exact; -0.0 -> 0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression (``17 * 24 + sqrt(144)`` -> 420): a ValueError or
    TypeError that says what to write instead when it is not one, too long, too deep or too slow."""
    if not isinstance(expression, str):
        raise TypeError(f'expression must be text like "17 * 24", not {type(expression).__name__}')
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(
            f"expression too long ({len(expression):,} characters; the limit is "
            f"{MAX_EXPRESSION_CHARS}); split the calculation into steps"
        )
    text = expression.translate(_TRANSLATE).strip().rstrip("=").strip()
    if not text:
        raise ValueError('empty expression; write e.g. "17 * 24"')
    if _nesting(text) > MAX_NESTING:
        raise ValueError(f"expression nested too deeply (more than {MAX_NESTING} levels of parentheses)")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        words = _unknown_words(text)
        if words:  # "price * 10 shares": the words are the problem, not the grammar
            raise ValueError(_not_numbers(words)) from None
        raise ValueError(f"invalid expression {_clip(expression)}: {err.msg}; only {_ALLOWED} are allowed") from None
    except (RecursionError, MemoryError):
        raise ValueError("expression too complex to parse; split the calculation into steps") from None
    except ValueError as err:  # e.g. NUL characters
        raise ValueError(f"invalid expression {_clip(expression)}: {err}") from None
    if _ast_depth(tree) > MAX_AST_DEPTH:
        raise ValueError(
            f"expression too complex (more than {MAX_AST_DEPTH} nested operations); split the calculation into steps"
        )
    try:
        result = _Evaluator(time.monotonic() + MAX_SECONDS).eval(tree)
    except RecursionError:
        raise ValueError("expression too complex; split the calculation into steps") from None
    return tidy(result)
