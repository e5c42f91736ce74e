"""The demo toolkit of the seed scenarios: a safe calculator, the clock, demo weather, lights.

    from textagent.toolkits.demo import demo_tools, calculate
    tools = demo_tools()            # a fresh ToolSet with all five tools
    calculate("17 * 24")            # 408 -- the tools stay plain callables too

``get_weather`` and ``toggle_light`` are **demo data / demo state**: fixed weather for a
handful of cities (``WEATHER``) and in-memory lights (``lights``, ``reset_lights()``).
Nothing here touches the network, the file system or real devices.

The docstrings are the tool descriptions the model reads: keep them short, with an example.
"""

from __future__ import annotations

import ast
import datetime as _dt
import difflib
import functools
import math
import operator
import re
import threading
import time
import zoneinfo
from collections.abc import Callable
from typing import Annotated, Any

from ..tools import Example, ToolSet, tool

__all__ = [
    "DEMO_EXAMPLES",
    "MAX_DIGITS",
    "MAX_EXPRESSION_CHARS",
    "MAX_NESTING",
    "ROOMS",
    "WEATHER",
    "calculate",
    "demo_tools",
    "get_time",
    "get_weather",
    "lights",
    "multiply",
    "reset_lights",
    "switch_light",
    "toggle_light",
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


def _check_number(value: Any) -> int | float:
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

    def eval(self, node: ast.AST) -> int | float:  # noqa: C901
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"calculation took longer than {MAX_SECONDS:g} s")
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ValueError(f"{node.value!r} is not a number; only {_ALLOWED} are allowed")
            return _check_number(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.eval(node.left), self.eval(node.right)
            apply = _BINARY[type(node.op)]
            if apply is None:  # Pow
                return _check_number(_power(left, right))
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
                raise ZeroDivisionError("division by zero")
            try:
                return _check_number(apply(left, right))
            except OverflowError:
                raise OverflowError("number too large (overflow)") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _check_number(_UNARY[type(node.op)](self.eval(node.operand)))
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
            return _check_number(fn(*args))
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


@tool
def calculate(expression: Annotated[str, {"examples": ["17 * 24 + sqrt(144)"]}]) -> int | float:
    """Evaluate an arithmetic expression exactly, e.g. "17 * 24 + sqrt(144)" -> 420. Use it for any math.

    Args:
        expression: Numbers, + - * / // % ** and parentheses; functions sqrt, abs, round, floor,
            ceil, log, log10, log2, exp, sin, cos, tan; constants pi, e.
    """
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
    return _tidy(result)


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


def _tidy(value: int | float) -> int | float:
    """Integral floats become ints (408.0 -> 408) where that is exact; -0.0 -> 0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


# --------------------------------------------------------------------------------------------
# get_time
# --------------------------------------------------------------------------------------------


def _now(tz: _dt.tzinfo) -> _dt.datetime:  # tests monkeypatch this
    return _dt.datetime.now(tz)


_OFFSET_RE = re.compile(r"^(?:UTC|GMT)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?$", re.I)
_UTC_NAMES = {"utc", "gmt", "z", "zulu", "universal", "etc/utc", "etc/gmt"}


@functools.lru_cache(maxsize=1)
def _zone_index() -> tuple[dict[str, str], dict[str, str]]:
    """(lowercase full key -> key, lowercase city part -> key) over the installed tz database."""
    try:
        keys = sorted(zoneinfo.available_timezones())
    except Exception:  # no tz database: only UTC and offsets work
        keys = []
    full = {k.lower(): k for k in keys}
    cities: dict[str, str] = {}
    for k in keys:
        if "/" in k and not k.startswith(("Etc/", "SystemV/")):
            cities.setdefault(k.rsplit("/", 1)[1].lower(), k)
    return full, cities


def resolve_zone(name: str) -> tuple[str, _dt.tzinfo]:
    """(the name shown, the zone) for what get_time was given: UTC, an IANA name or a city."""
    text = name.strip()
    if text.lower() in _UTC_NAMES:
        return "UTC", _dt.timezone.utc
    m = _OFFSET_RE.match(text)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours <= 14 and minutes < 60:
            delta = _dt.timedelta(hours=hours, minutes=minutes) * (-1 if m.group(1) == "-" else 1)
            return f"UTC{m.group(1)}{hours:02d}:{minutes:02d}", _dt.timezone(delta)
    full, cities = _zone_index()
    lowered = text.lower().replace(" ", "_")
    # "Tokyo" and, with the wrong region, "Europe/Tokyo" both mean Asia/Tokyo; the result's label
    # shows the zone actually used.
    key = full.get(lowered) or cities.get(lowered.rsplit("/", 1)[-1])
    if key is None and not full and 0 < len(text) <= 64 and ".." not in text and not text.startswith("/"):
        key = text  # a tz database we could not list may still know it
    if key is not None:
        try:
            return key, zoneinfo.ZoneInfo(key)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            pass
    shown = text if len(text) <= 40 else text[:40] + "…"
    close = difflib.get_close_matches(lowered, full, n=1, cutoff=0.8) if len(text) <= 64 else []
    hint = f'did you mean "{full[close[0]]}"? Otherwise use' if close else "use"
    raise ValueError(
        f'unknown time zone {shown!r}; {hint} an IANA name such as "UTC", "Europe/Paris", '
        '"America/New_York" or "Asia/Tokyo", or an offset like "UTC+02:00"'
    )


@tool
def get_time(timezone: Annotated[str, {"examples": ["Europe/Paris"]}] = "UTC") -> dict[str, str]:
    """Current date and time in a time zone, e.g. "Europe/Paris" (default "UTC").

    Args:
        timezone: IANA time zone name such as "UTC", "Europe/Paris", "Asia/Tokyo", or an offset like "UTC+02:00".
    """
    if not isinstance(timezone, str):
        raise TypeError(f'timezone must be text like "Europe/Paris", not {type(timezone).__name__}')
    label, tz = resolve_zone(timezone)
    now = _now(tz).replace(microsecond=0)
    return {"timezone": label, "now": now.isoformat(), "weekday": now.strftime("%A")}


# --------------------------------------------------------------------------------------------
# get_weather (demo data)
# --------------------------------------------------------------------------------------------

# Fixed DEMO data (not live weather). Paris, Lisbon and Tokyo come from the seed scenarios.
WEATHER: dict[str, dict[str, Any]] = {
    "paris": {"city": "Paris", "temp_c": 8, "condition": "rain", "rain": True},
    "lisbon": {"city": "Lisbon", "temp_c": 22, "condition": "sunny", "rain": False},
    "tokyo": {"city": "Tokyo", "temp_c": 25, "condition": "partly cloudy", "rain": False},
    "london": {"city": "London", "temp_c": 11, "condition": "drizzle", "rain": True},
    "new york": {"city": "New York", "temp_c": 15, "condition": "windy", "rain": False},
    "berlin": {"city": "Berlin", "temp_c": 4, "condition": "cloudy", "rain": False},
    "sydney": {"city": "Sydney", "temp_c": 19, "condition": "sunny", "rain": False},
    "cairo": {"city": "Cairo", "temp_c": 31, "condition": "sunny", "rain": False},
    "reykjavik": {"city": "Reykjavik", "temp_c": -2, "condition": "snow", "rain": False},
}
_CITY_ALIASES = {
    "nyc": "new york",
    "new york city": "new york",
    "lisboa": "lisbon",
    "tokio": "tokyo",
    "reykjavík": "reykjavik",
}


def _city_key(city: str) -> str:
    text = city.split(",", 1)[0].lower().replace("_", " ").replace("-", " ")
    text = " ".join(text.split())
    return _CITY_ALIASES.get(text, text)


@tool
def get_weather(city: Annotated[str, {"examples": ["Paris"]}]) -> dict[str, Any]:
    """Current weather for a city, e.g. "Paris" (demo data: fixed values for a few cities, not live).

    Args:
        city: City name, e.g. "Paris", "Lisbon" or "Tokyo".
    """
    if not isinstance(city, str):
        raise TypeError(f'city must be text like "Paris", not {type(city).__name__}')
    data = WEATHER.get(_city_key(city))
    if data is None:
        shown = city if len(city) <= 40 else city[:40] + "…"
        known = ", ".join(sorted(d["city"] for d in WEATHER.values()))
        raise ValueError(f"no weather data for {shown!r} (demo data); known cities: {known}")
    return dict(data)


# --------------------------------------------------------------------------------------------
# multiply
# --------------------------------------------------------------------------------------------


@tool
def multiply(a: float, b: float) -> int | float:
    """Multiply two numbers, e.g. {"a": 6, "b": 7} -> 42.

    Args:
        a: First number.
        b: Second number.
    """
    for label, value in (("a", a), ("b", b)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{label} must be a number, not {type(value).__name__}")
    return _tidy(_check_number(a * b))


# --------------------------------------------------------------------------------------------
# toggle_light (demo state)
# --------------------------------------------------------------------------------------------

ROOMS = ("kitchen", "living room", "bedroom", "bathroom", "office", "hallway")
lights: dict[str, bool] = {room: False for room in ROOMS}  # demo state: room -> on?
_lights_lock = threading.Lock()


def reset_lights() -> dict[str, bool]:
    """Turn every demo light off again; returns the (shared) state dict."""
    with _lights_lock:
        for room in ROOMS:
            lights[room] = False
    return lights


@tool
def toggle_light(room: Annotated[str, {"examples": ["kitchen"]}], on: bool) -> str:
    """Switch the light of a room on or off, e.g. {"room": "kitchen", "on": false} (demo, in memory).

    Args:
        room: One of kitchen, living room, bedroom, bathroom, office, hallway.
        on: true to switch the light on, false to switch it off.
    """
    return switch_light(lights, _lights_lock, room, on)


def switch_light(state: dict[str, bool], lock: threading.Lock, room: Any, on: Any) -> str:
    """What toggle_light does, on the lights in ``state`` (room -> on?) under ``lock``: the demo's
    shared lights, or a bench episode's own (textagent.bench.tools)."""
    if not isinstance(room, str):
        raise TypeError(f'room must be text like "kitchen", not {type(room).__name__}')
    if not isinstance(on, bool):
        raise TypeError(f"on must be true or false, not {on!r}")
    key = " ".join(room.lower().replace("_", " ").replace("-", " ").split())
    if key not in state:
        shown = room if len(room) <= 40 else room[:40] + "…"
        raise ValueError(f"unknown room {shown!r}; valid rooms: {', '.join(ROOMS)}")
    with lock:
        before = state[key]
        state[key] = on
    return f"{key} light is now {'on' if on else 'off'}" + ("" if before != on else " (it already was)")


# The worked exchanges the model may see before its task; demo_tools() shows the call-less ones
# and the MAX_EXAMPLES most like the question, the closest last (ToolSet.max_examples). Each
# teaches one habit, with values unlike any real question: a question answered without tools;
# a calculation written as an expression; the steps a question asks for, one call each; every
# value looked up before it is computed with; one call per item asked about, all in one reply
# (they do not wait for each other); an action done
# only when its condition holds; a lookup answered at once. Answers restate the results they
# rest on. The model copies the examples nearest its question, and the last one most.
DEMO_EXAMPLES = (
    Example(
        task="What is the opposite of 'hot'?",
        calls=(),
        answer="The opposite of 'hot' is 'cold'.",
    ),
    Example(
        task="Who wrote Romeo and Juliet?",
        calls=(),
        answer="William Shakespeare wrote Romeo and Juliet.",
    ),
    Example(
        task="Good morning!",
        calls=(),
        answer="Good morning! How can I help you today?",
    ),
    Example(
        task="What is 2.5% of 3200?",
        calls=(("calculate", {"expression": "3200 * 2.5 / 100"}, "80"),),
        answer="2.5% of 3200 is 80.",
    ),
    Example(
        task="Get the weather in Dublin, add 5 to the temperature, then switch off the office light.",
        calls=(
            ("get_weather", {"city": "Dublin"}, '{"city": "Dublin", "temp_c": 12, "condition": "rain", "rain": true}'),
            ("calculate", {"expression": "12 + 5"}, "17"),
            ("toggle_light", {"room": "office", "on": False}, "office light is now off"),
        ),
        answer="Dublin has rain at 12 °C; 12 + 5 = 17; the office light is now off.",
    ),
    Example(
        task="What is the average temperature of Rome and Oslo right now?",
        calls=(
            ("get_weather", {"city": "Rome"}, '{"city": "Rome", "temp_c": 24, "condition": "sunny", "rain": false}'),
            ("get_weather", {"city": "Oslo"}, '{"city": "Oslo", "temp_c": 9, "condition": "cloudy", "rain": false}'),
            ("calculate", {"expression": "(24 + 9) / 2"}, "16.5"),
        ),
        answer="Rome is at 24 °C and Oslo at 9 °C; their average is 16.5 °C.",
        replies=(2, 1),
    ),
    Example(
        task="What time is it in Sydney and in New York?",
        calls=(
            (
                "get_time",
                {"timezone": "Australia/Sydney"},
                '{"timezone": "Australia/Sydney", "now": "2025-01-10T08:30:00+11:00", "weekday": "Friday"}',
            ),
            (
                "get_time",
                {"timezone": "America/New_York"},
                '{"timezone": "America/New_York", "now": "2025-01-09T16:30:00-05:00", "weekday": "Thursday"}',
            ),
        ),
        answer="It is 08:30 on Friday in Sydney and 16:30 on Thursday in New York.",
        replies=(2,),
    ),
    Example(
        task="Switch on the lights in the bathroom, the office and the hallway.",
        calls=(
            ("toggle_light", {"room": "bathroom", "on": True}, "bathroom light is now on"),
            ("toggle_light", {"room": "office", "on": True}, "office light is now on"),
            ("toggle_light", {"room": "hallway", "on": True}, "hallway light is now on"),
        ),
        answer="The bathroom, office and hallway lights are now on.",
        replies=(3,),
    ),
    Example(
        task="The living room is empty now; switch its lamp off.",
        calls=(("toggle_light", {"room": "living room", "on": False}, "living room light is now off"),),
        answer="The living room light is now off.",
    ),
    Example(
        task="Tell me the local hour in London.",
        calls=(
            (
                "get_time",
                {"timezone": "Europe/London"},
                '{"timezone": "Europe/London", "now": "2025-01-09T21:30:00+00:00", "weekday": "Thursday"}',
            ),
        ),
        answer="It is 21:30 on Thursday in London.",
    ),
    Example(
        task="Check the weather in Vienna. If it is snowing there, switch on the bathroom light.",
        calls=(
            ("get_weather", {"city": "Vienna"}, '{"city": "Vienna", "temp_c": -3, "condition": "snow", "rain": false}'),
            ("toggle_light", {"room": "bathroom", "on": True}, "bathroom light is now on"),
        ),
        answer="It is snowing in Vienna at -3 °C, so the bathroom light is now on.",
    ),
    Example(
        task="If Athens is rainy at the moment, light up the hallway; if not, leave it.",
        calls=(
            (
                "get_weather",
                {"city": "Athens"},
                '{"city": "Athens", "temp_c": 30, "condition": "sunny", "rain": false}',
            ),
        ),
        answer="Athens is sunny at 30 °C, not raining, so I left the hallway light as it was.",
    ),
    Example(
        task="Should I bring an umbrella in Dublin today?",
        calls=(
            ("get_weather", {"city": "Dublin"}, '{"city": "Dublin", "temp_c": 12, "condition": "rain", "rain": true}'),
        ),
        answer="Yes, bring an umbrella: it is raining in Dublin, at 12 °C.",
    ),
    Example(
        task="What's the weather like in Prague right now?",
        calls=(
            (
                "get_weather",
                {"city": "Prague"},
                '{"city": "Prague", "temp_c": 7, "condition": "cloudy", "rain": false}',
            ),
        ),
        answer="It is cloudy in Prague, at 7 °C.",
    ),
    Example(
        task="Is it sunny in Madrid right now?",
        calls=(
            (
                "get_weather",
                {"city": "Madrid"},
                '{"city": "Madrid", "temp_c": 27, "condition": "sunny", "rain": false}',
            ),
        ),
        answer="Yes, it is sunny in Madrid, at 27 °C.",
    ),
)


# Tool-using examples shown per question: the ones most like it (ToolSet.max_examples).
MAX_EXAMPLES = 5


def demo_tools() -> ToolSet:
    """A fresh ToolSet with every demo tool (the lights' state is shared module state)."""
    return ToolSet(
        [calculate, get_time, get_weather, multiply, toggle_light], example=DEMO_EXAMPLES, max_examples=MAX_EXAMPLES
    )
