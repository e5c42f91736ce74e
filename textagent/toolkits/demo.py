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

import datetime as _dt
import difflib
import functools
import re
import threading
import zoneinfo
from typing import Annotated, Any

from ..tools import Example, ToolSet, tool
from .arithmetic import MAX_DIGITS, MAX_EXPRESSION_CHARS, MAX_NESTING, check_number, evaluate, tidy

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
# calculate (textagent.toolkits.arithmetic)
# --------------------------------------------------------------------------------------------


@tool
def calculate(expression: Annotated[str, {"examples": ["17 * 24 + sqrt(144)"]}]) -> int | float:
    """Evaluate an arithmetic expression exactly, e.g. "17 * 24 + sqrt(144)" -> 420. Use it for any math.

    Args:
        expression: Numbers, + - * / // % ** and parentheses; functions sqrt, abs, round, floor,
            ceil, log, log10, log2, exp, sin, cos, tan; constants pi, e.
    """
    return evaluate(expression)


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
    return tidy(check_number(a * b))


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
    shared lights, or a bench episode's own (textagent.bench.world)."""
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
