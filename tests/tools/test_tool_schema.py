"""Tool.from_function / @tool: schemas from hints and docstrings; the OpenAI round trip."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from toolfakes import Call, Thing, everything, get_forecast

from textagent.errors import ToolArgumentError
from textagent.tools import Tool, ToolSet, parse_docstring, tool

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
        @tool(name="weather.now", description='Weather now, e.g. {"city": "Paris"}.')
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
        assert props["days"] == {
            "type": "integer",
            "description": "How many days ahead, between 1 and 7.",
            "default": 3,
        }
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
        assert props["anything"] == {}  # no hint -> no type constraint
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
        def f(mode: Literal["x", "y"] | None = None, tags: list[int] | None = None):
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

    def test_a_name_the_protocol_cannot_write_is_refused_and_another_can_be_given(self):
        def météo(ville: str) -> str:
            """Météo d'une ville."""
            return ville

        with pytest.raises(ValueError, match="invalid tool name 'météo': use ASCII letters"):
            Tool.from_function(météo)
        t = Tool.from_function(météo, name="meteo")
        assert ToolSet([t]).execute(Call("meteo", {"ville": "Paris"})).output == "Paris"

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
        assert original == SEED_CALCULATE  # not mutated
        assert t.name == "calculate"
        assert t.to_openai() == SEED_CALCULATE  # round trip
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
        with pytest.raises(ValueError, match='only "function"'):
            Tool.from_openai({"type": "retrieval", "name": "x"}, None)
        with pytest.raises(TypeError):
            Tool.from_openai("calculate", None)  # type: ignore[arg-type]

    def test_tool_without_fn(self):
        t = Tool.from_openai(SEED_CALCULATE)
        with pytest.raises(NotImplementedError):
            t(expression="1")
        out = ToolSet([t]).execute(Call("calculate", {"expression": "1"}))
        assert out.error == "tool_error" and "NotImplementedError" in out.output


def test_a_name_an_openai_or_mcp_schema_does_not_list_is_refused_with_the_names_it_lists():
    """Issue 40, fault 4: grep(..., mode='l') went through to the client's tool, which crashed."""
    from textagent.errors import ToolArgumentError
    from textagent.protocol import ToolCall
    from textagent.tools import Tool, ToolSet

    listed = {"type": "object", "properties": {"file_name": {"type": "string"}, "pattern": {"type": "string"}}}
    grep = Tool.from_openai({"type": "function", "function": {"name": "grep", "parameters": listed}}, lambda **kw: kw)
    assert grep.closed and grep.bind({"file_name": "a", "pattern": "b"}) == {"file_name": "a", "pattern": "b"}
    with pytest.raises(ToolArgumentError, match="mode.*file_name, pattern"):
        grep.bind({"file_name": "a", "pattern": "b", "mode": "l"})
    outcome = ToolSet([grep]).execute(ToolCall("grep", {"file_name": "a", "pattern": "b", "mode": "l"}))
    assert not outcome.ok and outcome.error == "bad_arguments"  # refused, not dropped, whatever extra_args says
    # a schema that says what other names mean keeps its meaning
    open_schema = {**listed, "additionalProperties": True}
    loose = Tool.from_openai({"name": "grep", "parameters": open_schema}, lambda **kw: kw)
    assert not loose.closed and loose.bind({"file_name": "a", "mode": "l"}) == {"file_name": "a", "mode": "l"}


# h66, fault 16: the names a closed schema's subschemas declare are its names too
_GREP_PROPS = {"file_name": {"type": "string"}, "pattern": {"type": "string"}}
_MODE = {"properties": {"mode": {"enum": ["l", "c"]}}}


@pytest.mark.parametrize(
    "more",
    [
        {"allOf": [_MODE]},
        {"anyOf": [_MODE, {"required": ["pattern"]}]},
        {"oneOf": [_MODE]},
        {"if": {"required": ["file_name"]}, "then": _MODE},
        {"$ref": "#/$defs/flags", "$defs": {"flags": {"allOf": [{"$ref": "#/$defs/mode"}]}, "mode": _MODE}},
        {"dependentSchemas": {"file_name": _MODE}},
        {"dependentRequired": {"mode": ["file_name"]}},
    ],
    ids=["allOf", "anyOf", "oneOf", "if-then", "$ref", "dependentSchemas", "dependentRequired"],
)
@pytest.mark.parametrize("made", ["openai", "mcp"])
def test_a_name_a_subschema_declares_is_taken_and_others_refused(more, made):
    from textagent.tools.mcp import lists_names

    schema = {"type": "object", "properties": _GREP_PROPS, "required": ["file_name"], **more}
    if made == "openai":
        grep = Tool.from_openai({"name": "grep", "parameters": schema}, lambda **kw: kw)
    else:  # as tools/mcp.py makes a server's tool
        grep = Tool("grep", "", schema, lambda **kw: kw, closed=lists_names(schema))
    assert grep.closed
    args = {"file_name": "a", "pattern": "b", "mode": "l"}
    assert grep.bind(args) == args and ToolSet([grep]).execute(Call("grep", args)).ok
    with pytest.raises(ToolArgumentError, match="'?made_up'?.*file_name, pattern, mode"):
        grep.bind({"file_name": "a", "made_up": 1})


@pytest.mark.parametrize(
    "more",
    [
        {"allOf": [{"patternProperties": {"^x-": {}}}]},
        {"anyOf": [{"properties": {"mode": {}}, "additionalProperties": True}]},
        {"unevaluatedProperties": {"type": "string"}},
    ],
)
def test_a_subschema_that_says_what_other_names_mean_leaves_them_to_the_schema(more):
    schema = {"type": "object", "properties": _GREP_PROPS, **more}
    grep = Tool.from_openai({"name": "grep", "parameters": schema}, lambda **kw: kw)
    assert not grep.closed and grep.bind({"file_name": "a", "x-y": "z"}) == {"file_name": "a", "x-y": "z"}


# h66, fault 17: "properties": {} lists no names, and a name is refused as under listed properties
@pytest.mark.parametrize("parameters", [{"type": "object", "properties": {}}, None])
def test_an_empty_properties_refuses_every_name(parameters):
    from textagent.tools.mcp import lists_names

    now = Tool.from_openai({"name": "now", "parameters": parameters}, lambda **kw: kw)
    assert now.closed and now.bind({}) == {}
    with pytest.raises(ToolArgumentError, match="timezone"):
        now.bind({"timezone": "UTC"})
    assert not ToolSet([now]).execute(Call("now", {"timezone": "UTC"})).ok
    assert lists_names({"type": "object", "properties": {}})
    # as before: no properties at all, or additionalProperties, say nothing is listed
    assert not lists_names({"type": "object"})
    assert not lists_names({"type": "object", "properties": {}, "additionalProperties": True})
