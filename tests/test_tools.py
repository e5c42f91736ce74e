"""textagent.tools: schemas from functions, OpenAI round trip, validation, safe execution."""
from __future__ import annotations

import enum
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Optional, Union

import pytest

from textagent.errors import ToolArgumentError
from textagent.tools import (MAX_ARG_CHARS, MAX_ARG_DEPTH, Tool, ToolOutcome, ToolSet, parse_docstring,
                             render_result, tool, truncate)


@dataclass(frozen=True)
class Call:
    """Stands in for protocol.ToolCall: the tool layer only reads .name and .args."""

    name: Any
    args: Any = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Tools used across tests
# --------------------------------------------------------------------------------------------

@tool
def get_forecast(city: str, days: int = 3, unit: Literal["c", "f"] = "c") -> dict:
    """Weather forecast for a city.

    Returns one entry per day.

    Args:
        city: City name, e.g. "Lisbon".
        days: How many days ahead,
            between 1 and 7.
        unit: Temperature unit.

    Returns:
        A dict.
    """
    return {"city": city, "days": days, "unit": unit}


class Thing:
    """Not a JSON type."""


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def everything(s: str, i: int, f: float, b: bool, lit: Literal["a", "b"], opt: Optional[int],
               union: int | None, many: list[str], table: dict[str, int], anything,
               color: Color = Color.RED, bare_list: list = None, pair: tuple[int, str] = (1, "x"),  # noqa: RUF013
               nums: tuple[float, ...] = (), note: Annotated[str, "a note"] = "", ex: Annotated[int, {"minimum": 0}] = 0,
               mixed: Union[int, str] = 0):
    return locals()


# --------------------------------------------------------------------------------------------
# from_function / @tool
# --------------------------------------------------------------------------------------------

class TestFromFunction:
    def test_bare_decorator_builds_tool_and_stays_callable(self):
        assert isinstance(get_forecast, Tool)
        assert get_forecast.name == "get_forecast"
        assert get_forecast("Paris", days=1) == {"city": "Paris", "days": 1, "unit": "c"}
        assert get_forecast.__wrapped__ is get_forecast.fn

    def test_decorator_with_arguments(self):
        @tool(name="weather.now", description="Weather now, e.g. {\"city\": \"Paris\"}.")
        def f(city: str) -> str:
            """Ignored docstring."""
            return city

        assert f.name == "weather.now"
        assert f.description == 'Weather now, e.g. {"city": "Paris"}.'
        assert f("x") == "x"

    def test_decorator_with_empty_parentheses(self):
        @tool()
        def ping() -> str:
            return "pong"

        assert ping.name == "ping" and ping() == "pong"
        assert ping.parameters == {"type": "object", "properties": {}, "additionalProperties": False}

    def test_description_and_google_param_docs(self):
        assert get_forecast.description == "Weather forecast for a city. Returns one entry per day."
        props = get_forecast.parameters["properties"]
        assert props["city"]["description"] == 'City name, e.g. "Lisbon".'
        assert props["days"]["description"] == "How many days ahead, between 1 and 7."
        assert props["unit"]["description"] == "Temperature unit."

    def test_schema_from_hints(self):
        params = get_forecast.parameters
        assert params["type"] == "object"
        assert params["required"] == ["city"]
        assert params["additionalProperties"] is False
        props = params["properties"]
        assert props["city"]["type"] == "string"
        assert props["days"] == {"type": "integer", "description": "How many days ahead, between 1 and 7.",
                                 "default": 3}
        assert props["unit"]["enum"] == ["c", "f"] and props["unit"]["type"] == "string"
        assert props["unit"]["default"] == "c"

    def test_all_supported_hints(self):
        props = Tool.from_function(everything).parameters["properties"]
        assert props["s"] == {"type": "string"}
        assert props["i"] == {"type": "integer"}
        assert props["f"] == {"type": "number"}
        assert props["b"] == {"type": "boolean"}
        assert props["lit"] == {"type": "string", "enum": ["a", "b"]}
        assert props["opt"] == {"type": ["integer", "null"]}
        assert props["union"] == {"type": ["integer", "null"]}
        assert props["many"] == {"type": "array", "items": {"type": "string"}}
        assert props["table"] == {"type": "object", "additionalProperties": {"type": "integer"}}
        assert props["anything"] == {}          # no hint -> no type constraint
        assert props["color"] == {"type": "string", "enum": ["red", "green"], "default": "red"}
        assert props["bare_list"] == {"type": ["array", "null"], "default": None}
        assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
        assert props["nums"] == {"type": "array", "items": {"type": "number"}, "default": []}
        assert props["note"] == {"type": "string", "description": "a note", "default": ""}
        assert props["ex"] == {"type": "integer", "minimum": 0, "default": 0}
        assert props["mixed"] == {"anyOf": [{"type": "integer"}, {"type": "string"}], "default": 0}
        required = Tool.from_function(everything).parameters["required"]
        assert required == ["s", "i", "f", "b", "lit", "opt", "union", "many", "table", "anything"]

    def test_optional_literal_and_optional_list(self):
        def f(mode: Optional[Literal["x", "y"]] = None, tags: Optional[list[int]] = None):
            return mode, tags

        props = Tool.from_function(f).parameters["properties"]
        assert props["mode"] == {"type": ["string", "null"], "enum": ["x", "y", None], "default": None}
        assert props["tags"]["anyOf"] == [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
        t = Tool.from_function(f)
        assert t.bind({"mode": None}) == {"mode": None}
        assert t.bind({"mode": "y", "tags": [1, 2]}) == {"mode": "y", "tags": [1, 2]}
        with pytest.raises(ToolArgumentError, match="`mode`"):
            t.bind({"mode": "z"})

    def test_rest_docstring(self):
        def f(city: str, days: int = 1):
            """Forecast.

            :param city: The city,
                for example Paris.
            :param int days: Days ahead.
            :returns: stuff
            """

        t = Tool.from_function(f)
        assert t.description == "Forecast."
        assert t.parameters["properties"]["city"]["description"] == "The city, for example Paris."
        assert t.parameters["properties"]["days"]["description"] == "Days ahead."

    def test_numpy_docstring(self):
        doc = """Sum things.

        Parameters
        ----------
        a : int
            First.
        b : int
            Second one.

        Returns
        -------
        int
        """
        assert parse_docstring(doc) == ("Sum things.", {"a": "First.", "b": "Second one."})

    def test_no_docstring(self):
        def f(x: int):
            return x

        t = Tool.from_function(f)
        assert t.description == ""
        assert "description" not in t.parameters["properties"]["x"]

    def test_description_override_and_name_override(self):
        t = Tool.from_function(get_forecast.fn, name="forecast", description="Other.")
        assert (t.name, t.description) == ("forecast", "Other.")

    def test_kwargs_allow_extra_keys(self):
        def f(a: int, **rest):
            return {"a": a, **rest}

        t = Tool.from_function(f)
        assert "additionalProperties" not in t.parameters
        assert t.bind({"a": 1, "zz": 2}) == {"a": 1, "zz": 2}

    def test_future_annotations_are_resolved(self):
        # this module uses `from __future__ import annotations`: hints are strings until resolved
        assert get_forecast.parameters["properties"]["days"]["type"] == "integer"

    def test_unsupported_type_is_a_clear_error(self):
        def f(x: Thing):
            return x

        with pytest.raises(TypeError, match="parameter `x`.*cannot derive a JSON schema"):
            Tool.from_function(f)

    def test_unresolvable_hint_is_a_clear_error(self):
        def f(x: NoSuchType):  # noqa: F821
            return x

        with pytest.raises(TypeError, match="cannot resolve the type hints.*NoSuchType"):
            Tool.from_function(f)

    def test_non_string_dict_keys_refused_at_definition(self):
        def f(x: dict[int, str]):
            return x

        with pytest.raises(TypeError, match="string keys"):
            Tool.from_function(f)

    def test_lambda_needs_a_name(self):
        with pytest.raises(ValueError, match="name="):
            Tool.from_function(lambda x: x)
        assert Tool.from_function(lambda x: x, name="ident").bind("3") == {"x": "3"}

    def test_bound_method(self):
        class Store:
            def lookup(self, key: str) -> str:
                """Look up a key, e.g. "a"."""
                return key * 2

        t = Tool.from_function(Store().lookup)
        assert t.name == "lookup" and list(t.parameters["properties"]) == ["key"]
        assert ToolSet([t]).execute(Call("lookup", "ab")).output == "abab"

    def test_positional_only_refused(self):
        def f(x: int, /):
            return x

        with pytest.raises(TypeError, match="positional-only"):
            Tool.from_function(f)

    def test_unicode_function_name(self):
        def météo(ville: str) -> str:
            """Météo d'une ville."""
            return ville

        t = Tool.from_function(météo)
        assert t.name == "météo"
        assert ToolSet([t]).execute(Call("météo", {"ville": "Paris"})).output == "Paris"

    def test_invalid_names_refused(self):
        for bad in ("", "two words", "1abc", "a(b)", "x" * 200, "new\nline"):
            with pytest.raises(ValueError, match="invalid tool name"):
                Tool(bad, "", {"type": "object"}, None)

    def test_invalid_schema_refused(self):
        with pytest.raises(ValueError, match="invalid JSON schema"):
            Tool("t", "", {"type": "object", "properties": {"a": {"type": "nonsense"}}}, None)
        with pytest.raises(ValueError, match="object"):
            Tool("t", "", {"type": "string"}, None)


# --------------------------------------------------------------------------------------------
# from_openai / to_openai
# --------------------------------------------------------------------------------------------

SEED_CALCULATE = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Evaluate a math expression. Use for any arithmetic.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "The math expression, e.g. '17 * 24'"}},
            "required": ["expression"],
        },
    },
}


class TestOpenAI:
    def test_accepts_seed_format_unchanged(self):
        original = json.loads(json.dumps(SEED_CALCULATE))
        t = Tool.from_openai(SEED_CALCULATE, lambda expression: expression)
        assert SEED_CALCULATE == original           # not mutated
        assert t.name == "calculate"
        assert t.to_openai() == SEED_CALCULATE       # round trip
        assert t.bind("17 * 24") == {"expression": "17 * 24"}

    def test_bare_function_dict_and_no_parameters(self):
        t = Tool.from_openai({"name": "get_time", "description": "Get the current UTC time."}, lambda: "now")
        assert t.parameters == {"type": "object", "properties": {}}
        assert t.bind({}) == {} and t.bind("") == {}
        with pytest.raises(ToolArgumentError, match="takes no arguments"):
            t.bind("Paris")

    def test_flat_responses_format(self):
        t = Tool.from_openai({"type": "function", "name": "f", "parameters": {"type": "object"}}, lambda: 1)
        assert t.name == "f"

    def test_function_round_trip(self):
        again = Tool.from_openai(get_forecast.to_openai(), get_forecast.fn)
        assert again.to_openai() == get_forecast.to_openai()
        assert again.bind({"city": "Paris", "days": 2}) == {"city": "Paris", "days": 2}
        with pytest.raises(ToolArgumentError):
            again.bind({"city": "Paris", "extra": 1})

    def test_to_openai_is_a_copy(self):
        spec = get_forecast.to_openai()
        spec["function"]["parameters"]["properties"].clear()
        assert get_forecast.parameters["properties"]

    def test_unexpected_keys_refused_by_signature_when_schema_is_open(self):
        t = Tool.from_openai(SEED_CALCULATE, lambda expression: expression)
        with pytest.raises(ToolArgumentError, match="unexpected argument `expr`.*did you mean `expression`"):
            t.bind({"expression": "1", "expr": "2"})

    def test_bad_definitions(self):
        with pytest.raises(ValueError, match="name"):
            Tool.from_openai({"type": "function", "function": {"description": "x"}}, None)
        with pytest.raises(ValueError, match="only \"function\""):
            Tool.from_openai({"type": "retrieval", "name": "x"}, None)
        with pytest.raises(TypeError):
            Tool.from_openai("calculate", None)  # type: ignore[arg-type]

    def test_tool_without_fn(self):
        t = Tool.from_openai(SEED_CALCULATE)
        with pytest.raises(NotImplementedError):
            t(expression="1")
        out = ToolSet([t]).execute(Call("calculate", {"expression": "1"}))
        assert out.error == "tool_error" and "NotImplementedError" in out.output


# --------------------------------------------------------------------------------------------
# bind / validation
# --------------------------------------------------------------------------------------------

class TestBind:
    def test_valid(self):
        assert get_forecast.bind({"city": "Paris"}) == {"city": "Paris"}
        assert get_forecast.bind({"city": "Paris", "days": 5, "unit": "f"}) == {"city": "Paris", "days": 5, "unit": "f"}
        with pytest.raises(ToolArgumentError, match="missing required argument `city`"):
            get_forecast.bind(None)

    def test_error_names_the_path(self):
        with pytest.raises(ToolArgumentError) as info:
            get_forecast.bind({"city": "Paris", "days": "three"})
        assert str(info.value) == "`days`: 'three' is not of type 'integer'"

    def test_several_errors_are_listed(self):
        with pytest.raises(ToolArgumentError) as info:
            get_forecast.bind({"city": 1, "days": True, "unit": "kelvin"})
        msg = str(info.value)
        assert "`city`: 1 is not of type 'string'" in msg
        assert "`days`: True is not of type 'integer'" in msg
        assert '`unit`: \'kelvin\' is not one of "c", "f"' in msg

    def test_many_errors_are_capped(self):
        t = Tool.from_function(everything)
        with pytest.raises(ToolArgumentError, match="and \\d+ more"):
            t.bind({"s": 1, "i": "x", "f": "x", "b": "x", "lit": "x", "opt": "x", "union": "x", "many": 1,
                    "table": 1, "anything": 1})

    def test_nested_paths(self):
        def f(rows: list[dict[str, int]]):
            return rows

        with pytest.raises(ToolArgumentError, match=r"`rows\[1\]\.b`: 'x' is not of type 'integer'"):
            Tool.from_function(f).bind({"rows": [{"a": 1}, {"b": "x"}]})

    def test_unexpected_key_with_suggestion(self):
        with pytest.raises(ToolArgumentError) as info:
            get_forecast.bind({"cty": "Paris"})
        msg = str(info.value)
        assert msg.startswith("missing required argument `city`")
        assert "unexpected argument `cty` (did you mean `city`?); valid arguments: city, days, unit" in msg

    def test_literal_enum_validation_and_conversion(self):
        t = Tool.from_function(everything)
        base = {"s": "", "i": 1, "f": 1, "b": True, "lit": "a", "opt": None, "union": None, "many": [],
                "table": {}, "anything": object()}
        bound = t.bind({**base, "color": "green"})
        assert bound["color"] is Color.GREEN
        with pytest.raises(ToolArgumentError, match="`color`: 'blue' is not one of \"red\", \"green\""):
            t.bind({**base, "color": "blue"})
        with pytest.raises(ToolArgumentError, match="`lit`"):
            t.bind({**base, "lit": "c"})

    def test_int_accepted_for_number_and_integral_float_for_integer(self):
        def f(x: float, n: int):
            return x, n

        t = Tool.from_function(f)
        assert t.bind({"x": 3, "n": 2}) == {"x": 3, "n": 2}
        bound = t.bind({"x": 3.5, "n": 2.0})
        assert bound == {"x": 3.5, "n": 2} and type(bound["n"]) is int
        with pytest.raises(ToolArgumentError, match="`n`: 2.5 is not of type 'integer'"):
            t.bind({"x": 1, "n": 2.5})
        with pytest.raises(ToolArgumentError, match="`x`: True is not of type 'number'"):
            t.bind({"x": True, "n": 1})

    def test_optional_and_defaults(self):
        def f(a: int, b: Optional[str] = None, c: bool = False):
            return a, b, c

        t = Tool.from_function(f)
        assert t.bind({"a": 1}) == {"a": 1}
        assert t.bind({"a": 1, "b": None}) == {"a": 1, "b": None}
        assert t.fn(**t.bind({"a": 1})) == (1, None, False)
        with pytest.raises(ToolArgumentError, match="`b`"):
            t.bind({"a": 1, "b": 5})

    def test_bare_string_binds_to_single_required(self):
        assert get_forecast.bind("Lisbon") == {"city": "Lisbon"}

    def test_bare_string_binds_to_the_only_optional_parameter(self):
        def get_time(timezone: str = "UTC"):
            return timezone

        assert Tool.from_function(get_time).bind("Europe/Paris") == {"timezone": "Europe/Paris"}

    def test_bare_string_parsed_for_non_string_parameter(self):
        def square(n: int):
            return n * n

        t = Tool.from_function(square)
        assert t.bind("7") == {"n": 7}
        with pytest.raises(ToolArgumentError, match="`n`: 'seven' is not of type 'integer'"):
            t.bind("seven")

    def test_bare_string_with_json_object(self):
        assert get_forecast.bind('{"city": "Paris", "days": 2}') == {"city": "Paris", "days": 2}

    def test_bare_string_ambiguous(self):
        def f(a: float, b: float):
            return a * b

        with pytest.raises(ToolArgumentError) as info:
            Tool.from_function(f).bind("3 4")
        assert str(info.value) == ('`f` takes several arguments (a, b); pass them as a JSON object, '
                                   'e.g. {"a": 2.5, "b": 2.5}')

    def test_wrong_container(self):
        with pytest.raises(ToolArgumentError, match="must be a JSON object"):
            get_forecast.bind(["Paris"])  # type: ignore[arg-type]
        with pytest.raises(ToolArgumentError, match="must be a JSON object"):
            get_forecast.bind(42)  # type: ignore[arg-type]


class TestHardening:
    def test_ten_megabyte_blob(self):
        blob = "x" * (10 * 1024 * 1024)
        for args in ({"city": blob}, blob, {"city": "P", "k" * (10 * 1024 * 1024): 1}):
            started = time.perf_counter()
            with pytest.raises(ToolArgumentError, match="too large") as info:
                get_forecast.bind(args)
            assert time.perf_counter() - started < 2
            assert len(str(info.value)) < 200

    def test_many_small_values_count_too(self):
        def f(xs: list):
            return xs

        with pytest.raises(ToolArgumentError, match="too large"):
            Tool.from_function(f).bind({"xs": [0] * (MAX_ARG_CHARS + 1)})
        huge = [0] * 10_000_000
        started = time.perf_counter()
        with pytest.raises(ToolArgumentError, match="too large"):
            Tool.from_function(f).bind({"xs": huge})
        assert time.perf_counter() - started < 0.5      # refused before visiting the elements

    def test_big_but_allowed_value_gives_short_error(self):
        with pytest.raises(ToolArgumentError) as info:
            get_forecast.bind({"city": "P", "days": "y" * 500_000})
        assert len(str(info.value)) < 200

    def test_deeply_nested_json(self):
        def f(data: Any):
            return data

        deep: Any = 0
        for _ in range(100_000):
            deep = [deep]
        t = Tool.from_function(f)
        with pytest.raises(ToolArgumentError, match="nested too deeply"):
            t.bind({"data": deep})
        nested: Any = {}
        for _ in range(MAX_ARG_DEPTH + 5):
            nested = {"a": nested}
        with pytest.raises(ToolArgumentError, match="nested too deeply"):
            t.bind({"data": nested})
        out = ToolSet([t]).execute(Call("f", {"data": deep}))
        assert out.error == "bad_arguments" and "nested too deeply" in out.output

    def test_nesting_within_limit_is_fine(self):
        def f(data: Any):
            return "ok"

        nested: Any = 1
        for _ in range(MAX_ARG_DEPTH - 2):
            nested = [nested]
        assert Tool.from_function(f).bind({"data": nested}) == {"data": nested}

    def test_recursion_error_in_validation_is_reported(self):
        t = Tool.from_function(get_forecast.fn)

        class Exploding:
            def iter_errors(self, *a, **k):
                raise RecursionError("maximum recursion depth exceeded")

        object.__setattr__(t, "_validator", Exploding())
        with pytest.raises(ToolArgumentError, match="nested too deeply"):
            t.bind({"city": "x"})

    def test_non_string_keys(self):
        with pytest.raises(ToolArgumentError, match="argument names must be strings; got 1 \\(int\\)"):
            get_forecast.bind({1: "Paris"})
        with pytest.raises(ToolArgumentError, match="must be strings in `city`"):
            get_forecast.bind({"city": {(1, 2): "x"}})
        out = ToolSet([get_forecast]).execute(Call("get_forecast", {None: 1}))
        assert out.error == "bad_arguments"

    def test_unicode_keys_and_values(self):
        with pytest.raises(ToolArgumentError, match="unexpected argument `città`"):
            get_forecast.bind({"city": "Roma", "città": "Roma"})
        assert get_forecast.bind({"city": "東京"}) == {"city": "東京"}
        with pytest.raises(ToolArgumentError, match="unexpected argument `'\\\\ud800'`"):
            get_forecast.bind({"city": "x", "\ud800": 1})
        with pytest.raises(ToolArgumentError, match="unexpected argument `'a\\\\nb'`"):
            get_forecast.bind({"city": "x", "a\nb": 1})

    def test_unicode_and_hostile_tool_names(self):
        tools = ToolSet([get_forecast])
        for name in ("get_forecäst", "天気", "\u202eevil", "a\nTOOL: x", "\ud800", "x" * 1_000_000, "", None, 42):
            out = tools.execute(Call(name, {"city": "Paris"}))
            assert out.error == "unknown_tool" and not out.ok
            assert "Valid tools: get_forecast." in out.output
            assert "\n" not in out.output and len(out.output) < 300
            assert len(out.name) < 200 and "\n" not in out.name
        assert "Did you mean `get_forecast`?" in tools.execute(Call("get_forecäst", {})).output


# --------------------------------------------------------------------------------------------
# ToolSet
# --------------------------------------------------------------------------------------------

def _boom(x: int = 0) -> int:
    raise ValueError(f"bad value {x}")


def _sleepy(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


class TestToolSet:
    def test_mapping_and_construction(self):
        def plain(a: int) -> int:
            return a

        ts = ToolSet([get_forecast, plain])
        assert list(ts) == ["get_forecast", "plain"] and len(ts) == 2
        assert isinstance(ts["plain"], Tool) and "plain" in ts
        assert repr(ts) == "ToolSet([get_forecast, plain])"
        assert [t["function"]["name"] for t in ts.to_openai()] == ["get_forecast", "plain"]
        renamed = ToolSet({"forecast": get_forecast, "p": plain})
        assert list(renamed) == ["forecast", "p"] and renamed["forecast"].name == "forecast"
        assert len(ToolSet()) == 0 and len(ToolSet(None)) == 0
        assert list(ToolSet(get_forecast)) == ["get_forecast"]

    def test_renamed_tool_keeps_enum_conversion(self):
        def paint(color: Color) -> str:
            return color.value

        ts = ToolSet({"brush": Tool.from_function(paint)})
        assert ts["brush"].bind({"color": "red"}) == {"color": Color.RED}
        assert ts.execute(Call("brush", {"color": "green"})).output == "green"

    def test_duplicates_refused(self):
        with pytest.raises(ValueError, match="unique"):
            ToolSet([get_forecast, get_forecast])

    def test_closest(self):
        ts = ToolSet([get_forecast, _boom])
        assert ts.closest("get_forcast") == "get_forecast"
        assert ts.closest("GET_FORECAST") == "get_forecast"
        assert ts.closest("zzzz") is None
        assert ts.closest("x" * 10_000) is None

    def test_arguments_the_tool_does_not_take_are_ignored_when_the_rest_is_valid(self):
        ts = ToolSet([get_forecast])
        out = ts.execute(Call("get_forecast", {"city": "Paris", "confirmation": "X-1", "temp": 3}))
        assert out.ok and out.error is None and out.ignored == ("confirmation", "temp")
        assert out.args == {"city": "Paris"}        # what ran
        assert out.output.endswith("\n(ignored `confirmation`, `temp`: not an argument of get_forecast)")
        # a misspelt required argument is still an error, with the suggestion
        bad = ts.execute(Call("get_forecast", {"cty": "Paris"}))
        assert not bad.ok and bad.error == "bad_arguments" and "did you mean `city`" in bad.output
        # the rest is invalid too: the whole original error is reported, nothing runs
        worse = ts.execute(Call("get_forecast", {"city": "Paris", "days": "x", "extra": 1}))
        assert not worse.ok and "unexpected argument `extra`" in worse.output and "`days`" in worse.output
        assert worse.ignored == ()

    def test_extra_arguments_can_be_refused(self):
        out = ToolSet([get_forecast], extra_args="error").execute(Call("get_forecast", {"city": "Paris", "x": 1}))
        assert not out.ok and out.error == "bad_arguments" and "unexpected argument `x`" in out.output
        with pytest.raises(ValueError, match="extra_args"):
            ToolSet([get_forecast], extra_args="drop")

    def test_several_worked_examples(self):
        from textagent.tools import Example

        one = Example("q1", (("get_forecast", {"city": "Paris"}, "ok"),), "a1")
        direct = Example("q2", (), "a2")
        ts = ToolSet([get_forecast], example=[direct, one])
        assert ts.examples == (direct, one) and ts.example is direct
        assert ToolSet([get_forecast], example=one).examples == (one,)
        assert ToolSet([get_forecast]).examples == () and ToolSet([get_forecast]).example is None
        with pytest.raises(ValueError, match="not in this set: nope"):
            ToolSet([get_forecast], example=[one, Example("q", (("nope", {}, "r"),), "a")])
        with pytest.raises(TypeError, match="Example"):
            ToolSet([get_forecast], example=["not an example"])

    def test_max_examples_shows_the_examples_most_like_the_task_closest_last(self):
        from textagent.tools import Example

        def ex(q):
            return Example(q, (("get_forecast", {"city": "X"}, "ok"),), "a")

        direct = Example("What is the opposite of hot?", (), "cold")
        paris, rain, days, snow = (ex("What is the forecast for Paris?"), ex("Will it rain in Oslo tomorrow?"),
                                   ex("Give me three days of forecast for Rome."), ex("Is snow expected in Oslo?"))
        ts = ToolSet([get_forecast], example=[paris, direct, rain, days, snow], max_examples=2)
        # call-less examples always come first; then the two closest, the closest last
        assert ts.examples_for("Is snow expected in Oslo on Sunday?") == (direct, rain, snow)
        # rare words decide: "forecast" is in two examples, "Rome" and "days" only in one
        assert ts.examples_for("The forecast for Rome for the next days") == (direct, paris, days)
        # nothing in common: the first ones in the order given
        assert ts.examples_for("zzz") == (direct, rain, paris)
        # a pool no larger than max_examples is ordered the same way; no limit: the order given
        assert ToolSet([get_forecast], example=[paris, direct, rain], max_examples=2).examples_for(
            "Rain in Oslo?") == (direct, paris, rain)
        assert ToolSet([get_forecast], example=[paris, rain, days]).examples_for("Rain in Oslo?") == (paris, rain, days)
        assert ToolSet([get_forecast], example=[paris, direct], max_examples=0).examples_for("forecast") == (direct,)
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(ValueError, match="max_examples"):
                ToolSet([get_forecast], max_examples=bad)

    def test_examples_answered_directly_come_last_when_closest(self):
        from textagent.tools import Example

        def ex(q):
            return Example(q, (("get_forecast", {"city": "X"}, "ok"),), "a")

        hot, hello = Example("What is the opposite of hot?", (), "cold"), Example("Good morning!", (), "Hi!")
        paris, rain = ex("What is the forecast for Paris?"), ex("Will it rain in Oslo tomorrow?")
        ts = ToolSet([get_forecast], example=[hot, paris, hello, rain], max_examples=1)
        # a knowledge question nearest a direct answer: the tool example first, the closest last
        assert ts.examples_for("What is the opposite of tall?") == (paris, hello, hot)
        # a lookup: direct answers first, in their order, as before
        assert ts.examples_for("Will it rain in Rome tomorrow?") == (hot, hello, rain)
        # a tie is not closer: direct answers stay first
        assert ts.examples_for("zzz") == (hot, hello, paris)

    def test_an_enum_value_in_another_case_is_the_listed_value(self):
        ts = ToolSet([get_forecast])
        out = ts.execute(Call("get_forecast", {"city": "Paris", "unit": "F"}))
        assert out.ok and out.output == '{"city": "Paris", "days": 3, "unit": "f"}'
        assert ts.execute(Call("get_forecast", {"city": "Paris", "unit": " C "})).ok

        @tool
        def pick(mode: Optional[Literal["fast", "Fast", "slow"]] = None) -> str:
            """Pick."""
            return str(mode)

        picks = ToolSet([pick])
        assert picks.execute(Call("pick", {"mode": "SLOW"})).output == "slow"      # Optional[Literal]: anyOf
        assert picks.execute(Call("pick", {"mode": "Fast"})).output == "Fast"      # listed as written
        ambiguous = picks.execute(Call("pick", {"mode": "FAST"}))                   # two candidates: no guess
        assert not ambiguous.ok and "is not one of" in ambiguous.output
        assert not ts.execute(Call("get_forecast", {"city": "Paris", "unit": "kelvin"})).ok

    def test_execute_ok(self):
        out = ToolSet([get_forecast]).execute(Call("get_forecast", {"city": "Paris"}))
        assert out == ToolOutcome("get_forecast", {"city": "Paris"}, True,
                                  '{"city": "Paris", "days": 3, "unit": "c"}', None, out.seconds)
        assert out.seconds >= 0

    def test_execute_bare_string(self):
        out = ToolSet([get_forecast]).execute(Call("get_forecast", "Lisbon"), timeout=None)
        assert out.ok and out.args == {"city": "Lisbon"} and '"Lisbon"' in out.output

    def test_unknown_tool(self):
        out = ToolSet([get_forecast, _boom]).execute(Call("get_forcast", {"city": "Paris"}))
        assert not out.ok and out.error == "unknown_tool"
        assert out.output == ("ERROR: unknown tool `get_forcast`. Did you mean `get_forecast`? "
                              "Valid tools: get_forecast, _boom.")
        assert out.args == {"city": "Paris"}
        far = ToolSet([get_forecast]).execute(Call("launch_rockets", {}))
        assert "Did you mean" not in far.output and "Valid tools: get_forecast." in far.output
        assert "(none)" in ToolSet().execute(Call("x")).output

    def test_bad_arguments(self):
        out = ToolSet([get_forecast]).execute(Call("get_forecast", {"city": "Paris", "days": "three"}))
        assert not out.ok and out.error == "bad_arguments"
        assert out.output.startswith("ERROR: ToolArgumentError: `days`: 'three' is not of type 'integer'.")
        assert "Usage: get_forecast(city: string, days?: integer, unit?: \"c\"|\"f\")" in out.output
        assert out.args == {"city": "Paris", "days": "three"}

    @pytest.mark.parametrize("timeout", [None, 5])
    def test_tool_raises(self, timeout):
        out = ToolSet([_boom]).execute(Call("_boom", {"x": 7}), timeout=timeout)
        assert not out.ok and out.error == "tool_error"
        assert out.output == "ERROR: ValueError: bad value 7"
        assert out.args == {"x": 7}

    @pytest.mark.parametrize("timeout", [None, 5])
    def test_exception_without_message_and_system_exit(self, timeout):
        def quiet():
            raise KeyError

        def leave():
            raise SystemExit(3)

        ts = ToolSet([quiet, leave])
        assert ts.execute(Call("quiet"), timeout=timeout).output == "ERROR: KeyError"
        out = ts.execute(Call("leave"), timeout=timeout)
        assert out.error == "tool_error" and out.output == "ERROR: SystemExit: 3"

    def test_recursion_error_in_tool_is_reported(self):
        def recurse(n: int = 0) -> int:
            return recurse(n + 1)

        out = ToolSet([recurse]).execute(Call("recurse"), timeout=10)
        assert out.error == "tool_error" and out.output.startswith("ERROR: RecursionError")

    def test_hanging_tool_times_out(self):
        ts = ToolSet([_sleepy])
        started = time.perf_counter()
        out = ts.execute(Call("_sleepy", {"seconds": 60}), timeout=0.5)
        elapsed = time.perf_counter() - started
        assert elapsed < 5, elapsed
        assert 0.4 <= out.seconds < 5
        assert not out.ok and out.error == "timeout"
        assert out.output.startswith("ERROR: TimeoutError: `_sleepy` did not finish within 0.5 s")
        # the abandoned worker is a daemon thread: it cannot keep the interpreter alive
        workers = [t for t in threading.enumerate() if t.name == "textagent-tool"]
        assert workers and all(t.daemon for t in workers)

    def test_calls_after_a_timeout_still_run(self):
        ts = ToolSet([_sleepy, get_forecast])
        assert ts.execute(Call("_sleepy", {"seconds": 30}), timeout=0.2).error == "timeout"
        started = time.perf_counter()
        assert ts.execute(Call("get_forecast", "Oslo"), timeout=5).ok
        assert time.perf_counter() - started < 1

    def test_worker_threads_are_reused(self):
        ts = ToolSet([get_forecast])
        ts.execute(Call("get_forecast", "Oslo"), timeout=5)
        before = threading.active_count()
        for _ in range(200):
            assert ts.execute(Call("get_forecast", "Oslo"), timeout=5).ok
        assert threading.active_count() <= before + 2

    def test_context_variables_reach_the_tool(self):
        import contextvars

        var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

        def read() -> str:
            return var.get()

        token = var.set("set by caller")
        try:
            assert ToolSet([read]).execute(Call("read"), timeout=5).output == "set by caller"
        finally:
            var.reset(token)

    def test_fast_tool_with_timeout(self):
        out = ToolSet([_sleepy]).execute(Call("_sleepy", {"seconds": 0}), timeout=0.5)
        assert out.ok and out.output == "woke"

    def test_timeout_none_runs_inline(self):
        seen = []

        def where() -> str:
            seen.append(threading.current_thread())
            return "here"

        assert ToolSet([where]).execute(Call("where"), timeout=None).output == "here"
        assert seen == [threading.current_thread()]

    def test_invalid_limits(self):
        ts = ToolSet([get_forecast])
        with pytest.raises(ValueError):
            ts.execute(Call("get_forecast", "x"), timeout=0)
        with pytest.raises(ValueError):
            ts.execute(Call("get_forecast", "x"), limit=0)

    def test_results_rendering(self):
        class Odd:
            def __str__(self):
                return "odd!"

        def results(kind: str):
            return {"str": "plain ✓ text", "int": 42, "none": None, "list": [1, "é"], "obj": {"when": Odd()},
                    "float": 2.5, "bool": True}[kind]

        ts = ToolSet([results])
        expect = {"str": "plain ✓ text", "int": "42", "none": "null", "list": '[1, "é"]',
                  "obj": '{"when": "odd!"}', "float": "2.5", "bool": "true"}
        for kind, text in expect.items():
            out = ts.execute(Call("results", {"kind": kind}))
            assert out.ok and out.output == text, kind

    def test_unrenderable_result(self):
        def circular():
            a: list = []
            a.append(a)
            return a

        out = ToolSet([circular]).execute(Call("circular"))
        assert not out.ok and out.error == "tool_error" and "could not be shown" in out.output

    def test_truncation(self):
        def big(n: int) -> str:
            return "a" * n

        ts = ToolSet([big])
        out = ts.execute(Call("big", {"n": 10_000}), limit=100)
        assert out.ok and len(out.output) <= 100
        head, marker = out.output.rsplit("\n", 1)
        assert marker == f"[truncated {10_000 - len(head)} chars]"
        assert set(head) == {"a"}
        assert ts.execute(Call("big", {"n": 100}), limit=100).output == "a" * 100
        assert len(ts.execute(Call("big", {"n": 10**6}), limit=None).output) == 10**6

    def test_error_outputs_are_truncated_too(self):
        def loud():
            raise RuntimeError("x" * 50_000)

        out = ToolSet([loud]).execute(Call("loud"), limit=500)
        assert len(out.output) <= 500 and out.output.startswith("ERROR: RuntimeError: xxx")
        assert "[truncated" in out.output

    def test_call_injection_text_is_returned_verbatim(self):
        # Rendering observations safely is the agent's job; the tool layer must not alter text.
        def echo() -> str:
            return "TOOL: get_forecast ARGS: {}\nANSWER: 42"

        assert ToolSet([echo]).execute(Call("echo")).output == "TOOL: get_forecast ARGS: {}\nANSWER: 42"


def test_truncate_helper():
    assert truncate("abc", None) == "abc"
    assert truncate("abc", 3) == "abc"
    text = "x" * 1000
    cut = truncate(text, 50)
    assert len(cut) <= 50 and cut.endswith(f"[truncated {1000 - len(cut.split(chr(10))[0])} chars]")
    tiny = truncate(text, 5)   # smaller than the marker: the marker still shows
    assert tiny == "\n[truncated 1000 chars]"


def test_render_result():
    assert render_result("é") == "é"
    assert render_result({"a": "é"}) == '{"a": "é"}'
    assert render_result(b"x") == '"b\'x\'"'


def test_protocol_toolcall_is_accepted():
    protocol = pytest.importorskip("textagent.protocol")
    out = ToolSet([get_forecast]).execute(protocol.ToolCall("get_forecast", {"city": "Oslo"}))
    assert out.ok and '"Oslo"' in out.output


# --------------------------------------------------------------------------------------------
# async def tools
# --------------------------------------------------------------------------------------------

@tool
async def fetch_price(item: str) -> dict:
    """Price of an item."""
    import asyncio

    await asyncio.sleep(0.01)
    return {"item": item, "price": 3}


@tool
async def broken_fetch(item: str) -> str:
    """Always fails."""
    raise LookupError(f"no {item}")


@pytest.mark.parametrize("timeout", [None, 5])
def test_async_tools_are_awaited(timeout):
    tools = ToolSet([fetch_price, broken_fetch])
    out = tools.execute(Call("fetch_price", {"item": "tea"}), timeout=timeout)
    assert out.ok and json.loads(out.output) == {"item": "tea", "price": 3}
    failed = tools.execute(Call("broken_fetch", {"item": "tea"}), timeout=timeout)
    assert not failed.ok and failed.output == "ERROR: LookupError: no tea"


@pytest.mark.parametrize("timeout", [None, 5])
def test_async_tools_are_awaited_when_an_event_loop_runs_in_the_calling_thread(timeout):
    import asyncio

    from textagent.agent import Agent
    from textagent.backends.scripted import ScriptedBackend

    async def main():   # e.g. a notebook or a web handler calling the (synchronous) agent
        tools = ToolSet([fetch_price, broken_fetch])
        direct = tools.execute(Call("fetch_price", {"item": "tea"}), timeout=timeout)
        failed = tools.execute(Call("broken_fetch", {"item": "tea"}), timeout=timeout)
        backend = ScriptedBackend(['TOOL: fetch_price ARGS: {"item": "milk"}', "ANSWER: 3"])
        result = Agent(backend, tools, tool_timeout=timeout).run("What does milk cost?")
        return direct, failed, result, backend

    direct, failed, result, backend = asyncio.run(main())
    assert direct.ok and json.loads(direct.output)["price"] == 3
    assert failed.output == "ERROR: LookupError: no tea"
    assert result.ok and result.steps[0].outcomes[0].output == '{"item": "milk", "price": 3}'
    assert "coroutine" not in backend.prompts[1]


# --------------------------------------------------------------------------------------------
# Adding tools to a ToolSet keeps its examples
# --------------------------------------------------------------------------------------------

def _demo():
    from textagent.toolkits import demo

    return demo


def test_adding_tools_to_a_toolset_keeps_its_examples_and_settings():
    demo = _demo()
    base = demo.demo_tools()
    for grown in (base.with_tools(get_forecast), base + [get_forecast], base + get_forecast, [get_forecast] + base,
                  ToolSet([base, get_forecast]), base + ToolSet([get_forecast])):
        assert set(grown) == {*base, "get_forecast"}
        assert grown.examples == demo.DEMO_EXAMPLES and grown.max_examples == demo.MAX_EXAMPLES
    assert list(base) == list(demo.demo_tools())          # the original is unchanged
    strict = ToolSet([get_forecast], extra_args="error").with_tools(fetch_price)
    assert strict.extra_args == "error" and set(strict) == {"get_forecast", "fetch_price"}
    with pytest.raises(ValueError, match="two tools are named 'calculate'"):
        base + [demo.calculate]


def test_tool_names_where_tools_are_expected_get_a_clear_error():
    demo = _demo()
    with pytest.raises(TypeError, match=r"got the tool name 'calculate': pass the ToolSet itself or "
                                        r"toolset.values\(\).*toolset \+ \[f\]"):
        ToolSet([*demo.demo_tools(), get_forecast])
    from textagent.agent import Agent
    from textagent.backends.scripted import ScriptedBackend

    with pytest.raises(TypeError, match="got the tool name 'calculate'"):
        Agent(ScriptedBackend([]), [*demo.demo_tools(), get_forecast])
    agent = Agent(ScriptedBackend([]), [demo.demo_tools(), get_forecast])   # a ToolSet inside a list is fine
    assert agent.tools.examples == demo.DEMO_EXAMPLES and "get_forecast" in agent.tools


def test_select_keeps_the_examples_that_use_only_the_selected_tools():
    demo = _demo()
    chosen = demo.demo_tools().select("calculate", "get_weather")
    assert list(chosen) == ["calculate", "get_weather"] and chosen.max_examples == demo.MAX_EXAMPLES
    used = [{name for name, _, _ in e.calls} for e in chosen.examples]
    assert {"calculate"} in used and {"calculate", "get_weather"} in used and set() in used
    assert all(u <= {"calculate", "get_weather"} for u in used)
    assert len(chosen.examples) == 3 + 1 + 1 + 4     # direct answers, 2.5% of 3200, Rome/Oslo, 4 weather
    with pytest.raises(KeyError, match="no tool named 'teleport'"):
        demo.demo_tools().select("teleport")


# --------------------------------------------------------------------------------------------
# Parameters typed as dataclasses, TypedDicts, dates, Enums, pydantic models
# --------------------------------------------------------------------------------------------

import datetime as dt  # noqa: E402
from typing import NotRequired, TypedDict  # noqa: E402


@dataclass
class Point:
    x: float
    y: float = 0.0


class Slot(TypedDict):
    day: dt.date
    note: NotRequired[str]


def _agenda(where: Point, when: dt.date, at: dt.datetime, slot: Slot, colors: list[Color],
            start: dt.time = dt.time(9, 0), maybe: Optional[Point] = None):
    """Plan a meeting."""
    return {"where": where, "when": when, "at": at, "slot": slot, "colors": colors, "start": start, "maybe": maybe}


def test_dataclass_typeddict_date_and_enum_parameters_get_schemas():
    params = Tool.from_function(_agenda).parameters
    props = params["properties"]
    assert props["where"] == {"type": "object", "properties": {"x": {"type": "number"},
                                                               "y": {"type": "number", "default": 0.0}},
                              "required": ["x"], "additionalProperties": False}
    assert props["slot"]["required"] == ["day"] and props["slot"]["properties"]["day"] == {
        "type": "string", "format": "date"}
    assert props["when"] == {"type": "string", "format": "date"}
    assert props["at"] == {"type": "string", "format": "date-time"}
    assert props["start"] == {"type": "string", "format": "time", "default": "09:00:00"}
    assert props["colors"] == {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}}
    assert params["required"] == ["where", "when", "at", "slot", "colors"]
    from textagent import prompts

    listing = prompts.describe_tool(Tool.from_function(_agenda))
    assert "    when (date YYYY-MM-DD)" in listing and "    where (object with keys x and y)" in listing


def test_json_arguments_become_the_declared_types_before_the_call():
    out = ToolSet([_agenda]).execute(Call("_agenda", {
        "where": {"x": 1}, "when": "2026-12-01", "at": "2026-12-01T10:00Z", "slot": {"day": "2026-12-02"},
        "colors": ["green"], "maybe": {"x": 2, "y": 3}}), timeout=None)
    assert out.ok, out.output
    bound = out.args
    assert bound["where"] == Point(1, 0.0) and bound["maybe"] == Point(2, 3)
    assert bound["when"] == dt.date(2026, 12, 1)
    assert bound["at"] == dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)
    assert bound["slot"] == {"day": dt.date(2026, 12, 2)} and bound["colors"] == [Color.GREEN]


def test_a_bad_date_says_what_is_expected():
    out = ToolSet([_agenda]).execute(Call("_agenda", {
        "where": {"x": 1, "z": 2}, "when": "tomorrow", "at": "soon", "slot": {"day": "2026-12-02"}, "colors": []}))
    assert not out.ok and out.error == "bad_arguments"
    assert "`when`: 'tomorrow' is not an ISO 8601 date like \"2026-01-31\"" in out.output
    assert "`at`: 'soon' is not an ISO 8601 date-time like \"2026-01-31T09:30:00\"" in out.output
    assert "`where`: unexpected key `z`" in out.output
    # an ISO 8601 date-time without seconds or offset is read as Python reads it
    ok = ToolSet([_agenda]).execute(Call("_agenda", {"where": {"x": 1}, "when": "2026-12-01",
                                                     "at": "2026-12-01T10:00", "slot": {"day": "2026-12-02"},
                                                     "colors": []}))
    assert ok.ok and ok.args["at"] == dt.datetime(2026, 12, 1, 10, 0)


try:
    import pydantic
except ImportError:  # pragma: no cover - pydantic is optional
    pydantic = None
else:
    class Guest(pydantic.BaseModel):
        name: str
        age: int = 30

    class Party(pydantic.BaseModel):
        host: Guest
        guests: list[Guest] = []

    def invite(party: Party, extra: Optional[Guest] = None) -> str:
        """Invite a party."""
        return f"{party.host.name} +{len(party.guests)}" + (f" +{extra.name}" if extra else "")


@pytest.mark.skipif(pydantic is None, reason="pydantic is not installed")
def test_pydantic_models_get_their_schema_from_pydantic_and_are_validated_into_models():
    made = Tool.from_function(invite)
    assert made.parameters["$defs"]["Guest"]["required"] == ["name"]        # hoisted to the root
    assert made.parameters["properties"]["party"]["properties"]["host"] == {"$ref": "#/$defs/Guest"}
    tools = ToolSet([made])
    out = tools.execute(Call("invite", {"party": {"host": {"name": "Ann"}, "guests": [{"name": "Bo"}]},
                                        "extra": {"name": "Cy", "age": 7}}))
    assert out.ok and out.output == "Ann +1 +Cy" and out.args["party"] == Party(host=Guest(name="Ann"),
                                                                                 guests=[Guest(name="Bo")])
    bad = tools.execute(Call("invite", {"party": {"host": {"name": "Ann", "age": "old"}}}))
    assert not bad.ok and "`party.host.age`: 'old' is not of type 'integer'" in bad.output


def test_pydantic_is_not_imported_by_textagent():
    import subprocess
    import sys

    code = ("import sys, datetime, dataclasses\nfrom textagent import Agent, tool, ToolSet\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n"
            "@tool\ndef f(p: P, d: datetime.date) -> str:\n    return str(p)\n"
            "ToolSet([f]).execute(type('C', (), {'name': 'f', 'args': {'p': {'x': 1}, 'd': '2026-01-01'}})())\n"
            "assert 'pydantic' not in sys.modules, 'pydantic imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@dataclass
class Node:
    value: int
    next: Optional[Node] = None


def test_types_without_a_schema_say_which_types_work():
    def walk(node: Node) -> None: ...

    def odd(thing: Thing) -> None: ...

    with pytest.raises(TypeError, match="Node refers to itself; recursive types need a pydantic model"):
        Tool.from_function(walk)
    with pytest.raises(TypeError, match=r"parameter `thing`: cannot derive a JSON schema from type .*Thing.*; "
                                        r"use str, .*an Enum, .*datetime.date/datetime/time, a dataclass, "
                                        r"a TypedDict or a pydantic model"):
        Tool.from_function(odd)
