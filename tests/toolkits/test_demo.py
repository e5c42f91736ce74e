"""textagent.toolkits.demo: the seed tools, their bounds and their error messages."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from textagent.toolkits import demo
from textagent.toolkits.arithmetic import evaluate
from textagent.toolkits.demo import calculate, demo_tools, get_time, get_weather, multiply, toggle_light
from textagent.tools import Tool, ToolSet


@dataclass(frozen=True)
class Call:
    name: str
    args: Any = field(default_factory=dict)


@pytest.fixture(autouse=True)
def _lights_off():
    demo.reset_lights()
    yield
    demo.reset_lights()


# --------------------------------------------------------------------------------------------
# demo_tools
# --------------------------------------------------------------------------------------------


def test_demo_tools_is_a_fresh_toolset():
    a, b = demo_tools(), demo_tools()
    assert isinstance(a, ToolSet) and a is not b
    assert list(a) == ["calculate", "get_time", "get_weather", "multiply", "toggle_light"]
    for t in a.values():
        assert isinstance(t, Tool)
        assert t.description and len(t.description) < 200, t.name
        assert "e.g." in t.description, t.name  # an example argument for the model


def test_module_names_stay_plain_callables():
    assert calculate("17*24") == 408
    assert multiply(25, 10) == 250
    assert get_weather("Paris")["temp_c"] == 8
    assert toggle_light("kitchen", True) == "kitchen light is now on"


def test_schemas():
    tools = demo_tools()
    assert tools["calculate"].parameters["required"] == ["expression"]
    assert tools["calculate"].parameters["properties"]["expression"]["examples"] == ["17 * 24 + sqrt(144)"]
    assert tools["get_time"].parameters["properties"]["timezone"]["default"] == "UTC"
    assert "required" not in tools["get_time"].parameters
    assert tools["multiply"].parameters["properties"]["a"]["type"] == "number"
    light = tools["toggle_light"].parameters
    assert light["required"] == ["room", "on"] and light["properties"]["on"]["type"] == "boolean"


# --------------------------------------------------------------------------------------------
# calculate
# --------------------------------------------------------------------------------------------


def test_calculate_is_the_arithmetic_evaluator():
    assert calculate("17 * 24 + sqrt(144)") == evaluate("17 * 24 + sqrt(144)") == 420
    with pytest.raises(ValueError, match="unknown name `x`"):
        calculate("x + 1")


def test_calculate_type_checks_plain_calls():
    with pytest.raises(TypeError, match="text"):
        calculate(17)


def test_calculate_through_toolset():
    tools = demo_tools()
    ok = tools.execute(Call("calculate", {"expression": "17 * 24"}))
    assert ok.ok and ok.output == "408"
    bare = tools.execute(Call("calculate", "408 + 100"))
    assert bare.ok and bare.output == "508"
    bad = tools.execute(Call("calculate", {"expression": "9**9**9"}), timeout=5)
    assert bad.error == "tool_error" and bad.output.startswith("ERROR: OverflowError: 9 ** 387420489 is too large")
    zero = tools.execute(Call("calculate", {"expression": "1/0"}))
    assert zero.output == "ERROR: ZeroDivisionError: division by zero"
    deep = tools.execute(Call("calculate", {"expression": "(" * 10_000 + "1" + ")" * 10_000}))
    assert deep.error == "tool_error" and "ValueError" in deep.output
    blob = tools.execute(Call("calculate", {"expression": "1" * (10 * 1024 * 1024)}))
    assert blob.error == "bad_arguments" and "too large" in blob.output
    wrong = tools.execute(Call("calculate", {"expression": 17}))
    assert wrong.error == "bad_arguments" and "`expression`: 17 is not of type 'string'" in wrong.output


# --------------------------------------------------------------------------------------------
# get_time
# --------------------------------------------------------------------------------------------

FIXED = dt.datetime(2024, 3, 1, 12, 30, 45, 123456, tzinfo=dt.timezone.utc)


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(demo, "_now", lambda tz: FIXED.astimezone(tz))


def test_get_time_default_utc(frozen_clock):
    assert get_time() == {"timezone": "UTC", "now": "2024-03-01T12:30:45+00:00", "weekday": "Friday"}


@pytest.mark.parametrize(
    "zone, label, now",
    [
        ("Europe/Paris", "Europe/Paris", "2024-03-01T13:30:45+01:00"),
        ("europe/paris", "Europe/Paris", "2024-03-01T13:30:45+01:00"),
        ("Tokyo", "Asia/Tokyo", "2024-03-01T21:30:45+09:00"),
        ("New York", "America/New_York", "2024-03-01T07:30:45-05:00"),
        ("utc", "UTC", "2024-03-01T12:30:45+00:00"),
        ("GMT", "UTC", "2024-03-01T12:30:45+00:00"),
        ("UTC+2", "UTC+02:00", "2024-03-01T14:30:45+02:00"),
        ("-05:30", "UTC-05:30", "2024-03-01T07:00:45-05:30"),
    ],
)
def test_get_time_zones(frozen_clock, zone, label, now):
    result = get_time(zone)
    assert (result["timezone"], result["now"]) == (label, now)


@pytest.mark.parametrize(
    "zone, label",
    [
        ("Tokyo", "Asia/Tokyo"),
        ("new york", "America/New_York"),
        ("Europe/Tokyo", "Asia/Tokyo"),  # the city decides when the region is wrong
        ("America/Paris", "Europe/Paris"),
    ],
)
def test_get_time_city_names(frozen_clock, zone, label):
    assert get_time(zone)["timezone"] == label


def test_get_time_suggests_a_close_name():
    with pytest.raises(ValueError, match='did you mean "Europe/Paris"'):
        get_time("Europe/Pariss")
    with pytest.raises(ValueError) as info:
        get_time("Mars/Base")
    assert "did you mean" not in str(info.value)


def test_get_time_real_clock():
    result = get_time("UTC")
    now = dt.datetime.fromisoformat(result["now"])
    assert abs((dt.datetime.now(dt.timezone.utc) - now).total_seconds()) < 5


@pytest.mark.parametrize(
    "zone",
    ["Mars/Base", "Nowhere", "../../etc/passwd", "/etc/localtime", "", "UTC+99", "Europe", "a\x00b", "x" * 10_000],
)
def test_get_time_unknown_zone(zone):
    with pytest.raises(ValueError, match="unknown time zone") as info:
        get_time(zone)
    assert "Europe/Paris" in str(info.value) and len(str(info.value)) < 300


def test_get_time_through_toolset(frozen_clock):
    tools = demo_tools()
    assert (
        tools.execute(Call("get_time")).output
        == '{"timezone": "UTC", "now": "2024-03-01T12:30:45+00:00", "weekday": "Friday"}'
    )
    assert '"Asia/Tokyo"' in tools.execute(Call("get_time", "Asia/Tokyo")).output
    bad = tools.execute(Call("get_time", {"timezone": "Mars/Base"}))
    assert bad.error == "tool_error" and bad.output.startswith("ERROR: ValueError: unknown time zone 'Mars/Base'")


# --------------------------------------------------------------------------------------------
# get_weather
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "city, temp, condition, rain",
    [
        ("Paris", 8, "rain", True),
        ("Lisbon", 22, "sunny", False),
        ("Tokyo", 25, "partly cloudy", False),
    ],
)
def test_seed_weather(city, temp, condition, rain):
    assert get_weather(city) == {"city": city, "temp_c": temp, "condition": condition, "rain": rain}


@pytest.mark.parametrize("spelling", ["paris", "PARIS", "  Paris ", "Paris, France", "paris,fr"])
def test_weather_is_case_insensitive(spelling):
    assert get_weather(spelling)["city"] == "Paris"


def test_weather_aliases_and_more_cities():
    assert get_weather("NYC")["city"] == "New York"
    assert get_weather("new_york")["city"] == "New York"
    assert get_weather("tokyo")["temp_c"] == 25  # seed 002: get_weather("tokyo") -> 25
    assert len(demo.WEATHER) >= 6


def test_weather_result_is_a_copy():
    get_weather("Paris")["temp_c"] = 99
    assert get_weather("Paris")["temp_c"] == 8


def test_unknown_city_lists_known_ones():
    with pytest.raises(ValueError) as info:
        get_weather("Atlantis")
    msg = str(info.value)
    assert msg.startswith("no weather data for 'Atlantis' (demo data); known cities: ")
    for city in ("Lisbon", "Paris", "Tokyo"):
        assert city in msg


def test_weather_through_toolset():
    tools = demo_tools()
    out = tools.execute(Call("get_weather", {"city": "Paris"}))
    assert out.output == '{"city": "Paris", "temp_c": 8, "condition": "rain", "rain": true}'
    typo = tools.execute(Call("get_wether", {"city": "Paris"}))
    assert typo.error == "unknown_tool" and "Did you mean `get_weather`?" in typo.output
    wrong_key = tools.execute(Call("get_weather", {"location": "Paris"}))
    assert wrong_key.error == "bad_arguments" and "missing required argument `city`" in wrong_key.output


# --------------------------------------------------------------------------------------------
# multiply
# --------------------------------------------------------------------------------------------


def test_multiply():
    assert multiply(25, 10) == 250 and type(multiply(25, 10)) is int
    assert multiply(2.5, 2) == 5 and type(multiply(2.5, 2)) is int
    assert multiply(1.5, 1.5) == 2.25
    assert multiply(-3, 0.5) == -1.5
    with pytest.raises(OverflowError):
        multiply(1e300, 1e300)
    with pytest.raises(TypeError):
        multiply("2", 3)


def test_multiply_through_toolset():
    tools = demo_tools()
    assert tools.execute(Call("multiply", {"a": 25, "b": 10})).output == "250"
    bad = tools.execute(Call("multiply", {"a": "25", "b": 10}))
    assert bad.error == "bad_arguments" and "`a`: '25' is not of type 'number'" in bad.output
    bare = tools.execute(Call("multiply", "25 10"))
    assert bare.error == "bad_arguments" and "several arguments (a, b)" in bare.output


# --------------------------------------------------------------------------------------------
# toggle_light
# --------------------------------------------------------------------------------------------


def test_toggle_light_state():
    assert demo.lights == {room: False for room in demo.ROOMS}
    assert toggle_light("kitchen", True) == "kitchen light is now on"
    assert demo.lights["kitchen"] is True
    assert toggle_light("Kitchen", True) == "kitchen light is now on (it already was)"
    assert toggle_light("KITCHEN", False) == "kitchen light is now off"
    assert demo.lights["kitchen"] is False
    assert toggle_light("living_room", True) == "living room light is now on"
    assert demo.reset_lights() is demo.lights
    assert not any(demo.lights.values())


def test_toggle_light_unknown_room_lists_valid_ones():
    with pytest.raises(ValueError) as info:
        toggle_light("garage", True)
    assert str(info.value) == (
        "unknown room 'garage'; valid rooms: kitchen, living room, bedroom, bathroom, office, hallway"
    )


def test_toggle_light_type_errors_in_plain_calls():
    with pytest.raises(TypeError, match="true or false"):
        toggle_light("kitchen", "off")


def test_seed_002_chain_through_toolset():
    tools = demo_tools()
    weather = tools.execute(Call("get_weather", {"city": "tokyo"}))
    temp = __import__("json").loads(weather.output)["temp_c"]
    assert tools.execute(Call("multiply", {"a": temp, "b": 10})).output == "250"
    demo.lights["kitchen"] = True
    out = tools.execute(Call("toggle_light", {"room": "kitchen", "on": False}))
    assert out.ok and out.output == "kitchen light is now off" and demo.lights["kitchen"] is False
    bad = tools.execute(Call("toggle_light", {"room": "kitchen", "on": "off"}))
    assert bad.error == "bad_arguments" and "`on`: 'off' is not of type 'boolean'" in bad.output
