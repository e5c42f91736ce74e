"""Tool.bind: model arguments, bare text included, to keyword arguments."""

from __future__ import annotations

import pytest
from toolfakes import Color, everything, get_forecast

from textagent.errors import ToolArgumentError
from textagent.tools import Tool, bare_target, bare_value, bind_bare

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
            t.bind(
                {
                    "s": 1,
                    "i": "x",
                    "f": "x",
                    "b": "x",
                    "lit": "x",
                    "opt": "x",
                    "union": "x",
                    "many": 1,
                    "table": 1,
                    "anything": 1,
                }
            )

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
        base = {
            "s": "",
            "i": 1,
            "f": 1,
            "b": True,
            "lit": "a",
            "opt": None,
            "union": None,
            "many": [],
            "table": {},
            "anything": object(),
        }
        bound = t.bind({**base, "color": "green"})
        assert bound["color"] is Color.GREEN
        with pytest.raises(ToolArgumentError, match='`color`: \'blue\' is not one of "red", "green"'):
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
        def f(a: int, b: str | None = None, c: bool = False):
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
        assert str(info.value) == (
            '`f` takes several arguments (a, b); pass them as a JSON object, e.g. {"a": 2.5, "b": 2.5}'
        )

    def test_wrong_container(self):
        with pytest.raises(ToolArgumentError, match="must be a JSON object"):
            get_forecast.bind(["Paris"])  # type: ignore[arg-type]
        with pytest.raises(ToolArgumentError, match="must be a JSON object"):
            get_forecast.bind(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# The one binder (textagent.tools.binding), shared with the parser's ``TOOL: f ARGS: bare``
# --------------------------------------------------------------------------------------------

INT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
FLAG = {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]}


class TestOneBinder:
    def test_target_is_the_single_required_else_the_only_parameter(self):
        assert bare_target(INT) == "n"
        assert bare_target({"properties": {"a": {}}}) == "a"
        assert bare_target({"properties": {"a": {}, "b": {}}}) is None
        assert bare_target({"properties": {"a": {}, "b": {}}, "required": ["a", "b"]}) is None
        # a required name the properties do not list still takes the text
        assert bare_target({"type": "object", "required": ["q"]}) == "q"
        assert bind_bare("cats", {"type": "object", "required": ["q"]}) == {"q": "cats"}

    def test_json_text_is_the_value_when_the_parameter_takes_no_strings(self):
        assert bind_bare("12", INT) == {"n": 12}
        assert bind_bare("twelve", INT) == {"n": "twelve"}
        # decoded even when it is not of the type: validation names the real value
        assert bind_bare("2.5", INT) == {"n": 2.5}
        assert bind_bare("[1, 2]", INT) == {"n": [1, 2]}
        # a schema that takes strings keeps the text as written
        assert bind_bare(" 12 ", {"properties": {"s": {"type": "string"}}}) == {"s": " 12 "}
        assert bind_bare("12", {"properties": {"s": {"enum": ["12", 12]}}}) == {"s": "12"}
        assert bare_value("12", {"anyOf": [{"type": "integer"}, {"type": "array"}]}) == 12
        assert bare_value("12", None) == "12"

    def test_python_literals_are_read(self):
        assert bind_bare("True", FLAG) == {"on": True} and bind_bare(" False ", FLAG) == {"on": False}
        assert bind_bare("None", {"properties": {"x": {"type": ["number", "null"]}}}) == {"x": None}
        assert bind_bare("None", {"properties": {"s": {"type": "string"}}}) == {"s": "None"}

    def test_a_json_object_is_the_arguments_and_no_fit_is_none(self):
        assert bind_bare('{"n": "12"}', INT) == {"n": "12"}
        assert bind_bare("", {"type": "object", "properties": {}}) == {}
        assert bind_bare("x", {"type": "object", "properties": {}}) is None
        assert bind_bare("1 2", {"properties": {"a": {}, "b": {}}}) is None

    def test_tool_bind_uses_it(self):
        def square(n: int) -> int:
            return n * n

        def toggle(on: bool) -> bool:
            return on

        t = Tool.from_function(square)
        assert t.bind("12") == {"n": 12} and t.bind("3.0") == {"n": 3}
        with pytest.raises(ToolArgumentError, match=r"2\.5 is not of type 'integer'"):
            t.bind("2.5")
        assert Tool.from_function(toggle).bind("True") == {"on": True}
        required_only = Tool("search", "", {"type": "object", "required": ["q"]})
        assert required_only.bind("cats") == {"q": "cats"}

    def test_the_parser_binds_with_it(self):
        from textagent.protocol import ToolCall, parse_reply

        tools = {"square": INT, "toggle": FLAG, "search": {"type": "object", "required": ["q"]}}
        assert parse_reply("TOOL: square ARGS: 2.5", tools=tools).calls == [ToolCall("square", {"n": 2.5})]
        assert parse_reply("TOOL: toggle ARGS: True", tools=tools).calls == [ToolCall("toggle", {"on": True})]
        assert parse_reply("TOOL: search ARGS: cats", tools=tools).calls == [ToolCall("search", {"q": "cats"})]
        # no single parameter fits, or no such tool: the parser keeps the text
        assert parse_reply("TOOL: nope ARGS: 12", tools=tools).calls == [ToolCall("nope", "12")]
