"""Hard limits and validation messages for model arguments."""

from __future__ import annotations

import time
from typing import Any

import pytest
from toolfakes import Call, get_forecast

from textagent.errors import ToolArgumentError
from textagent.tools import MAX_ARG_CHARS, MAX_ARG_DEPTH, Tool, ToolSet


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
        assert time.perf_counter() - started < 0.5  # refused before visiting the elements

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


@pytest.mark.parametrize(
    "schema, args",
    [
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}}, {"s": "a" * 5000 + "!"}),
        ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}, {"s": "a" * 30 + "!"}),
        (
            {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}, "additionalProperties": False},
            {"a" * 5000 + "!": 1},
        ),
    ],
)
def test_a_backtracking_pattern_cannot_hold_the_process(schema, args):
    import time

    from textagent.protocol import ToolCall
    from textagent.tools import Tool, ToolSet

    tools = ToolSet([Tool("f", "x", schema, fn=lambda **kw: "ran")], extra_args="error")
    started = time.monotonic()
    outcome = tools.execute(ToolCall("f", args), timeout=1)
    # Python's re takes minutes to forever on these; the bounded search answers in well under that
    assert time.monotonic() - started < 15
    assert not outcome.ok and outcome.error == "bad_arguments", outcome.output


def test_patterns_still_match_and_refuse_as_before():
    from textagent.protocol import ToolCall
    from textagent.tools import Tool, ToolSet

    tools = ToolSet(
        [
            Tool(
                "f",
                "x",
                {
                    "type": "object",
                    "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
                    "patternProperties": {"^x-": {"type": "integer"}},
                },
                fn=lambda **kw: "ran",
            )
        ]
    )
    assert tools.execute(ToolCall("f", {"code": "EUR", "x-n": 2})).output == "ran"
    bad = tools.execute(ToolCall("f", {"code": "eur"}))
    assert not bad.ok and "does not match '^[A-Z]{3}$'" in bad.output
    assert "is not of type 'integer'" in tools.execute(ToolCall("f", {"code": "EUR", "x-n": "two"})).output


# -- one validation budget per call (hardening round 4: S4-S6) ------------------------------------


def _tool(schema):
    from textagent.tools import Tool

    return Tool("f", "d", {"type": "object", **schema}, fn=lambda **kw: kw)


def test_nested_any_of_over_refs_stops_at_the_calls_budget():
    from textagent.errors import ToolArgumentError

    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}", "minimum": 0}]}
        for i in range(24)
    }  # 2^24 paths to the last one
    defs["d24"] = {"type": "string"}
    tool = _tool({"$defs": defs, "properties": {"root": {"$ref": "#/$defs/d0"}}})
    started = time.monotonic()
    with pytest.raises(ToolArgumentError, match="could not be checked against the schema within 1 s"):
        tool.bind({"root": 5})
    assert time.monotonic() - started < 5  # it did not answer in 15 s before


def test_pattern_searches_share_one_budget_per_call():
    from textagent.errors import ToolArgumentError

    tool = _tool(
        {
            "properties": {
                "xs": {"type": "array", "items": {"type": "string", "pattern": "^(a|aa)+$"}},
                "m": {"type": "object", "patternProperties": {"^(a|aa)+$": {}}},
            }
        }
    )
    started = time.monotonic()
    with pytest.raises(ToolArgumentError):
        tool.bind({"xs": ["a" * 40 + "b"] * 12})  # 12 values x 0.25 s each took 3.2 s
    with pytest.raises(ToolArgumentError):
        tool.bind({"m": {"a" * 40 + "b" + str(i): 1 for i in range(8)}})  # 8 keys took 6 s
    assert time.monotonic() - started < 5


def test_unique_items_is_linear_and_compares_as_json_schema_does(monkeypatch):
    import jsonschema._utils

    from textagent.errors import ToolArgumentError
    from textagent.tools import validation

    # counted, not timed: jsonschema's own check compares unhashable items pairwise (1,500
    # objects took 3.9 s of CPU), and a CPU-time bound fails on a slow or busy machine
    calls = {"canonical": 0, "pairwise": 0}
    canonical, equal = validation._canonical, jsonschema._utils.equal

    def counted_canonical(value):
        calls["canonical"] += 1
        return canonical(value)

    def counted_equal(one, other):
        calls["pairwise"] += 1
        return equal(one, other)

    monkeypatch.setattr(validation, "_canonical", counted_canonical)
    monkeypatch.setattr(jsonschema._utils, "equal", counted_equal)
    tool = _tool({"properties": {"xs": {"type": "array", "uniqueItems": True}}})
    items = [{"a": i, "b": [i, str(i)]} for i in range(1500)]
    assert tool.bind({"xs": items})["xs"] == items
    # each item is read once: itself, its two values and the list's two elements
    assert calls == {"canonical": 5 * len(items), "pairwise": 0}
    with pytest.raises(ToolArgumentError, match="non-unique"):
        tool.bind({"xs": [*items, {"b": [7, "7"], "a": 7.0}]})  # key order and 7 == 7.0 do not matter
    assert tool.bind({"xs": [1, True, "1", None, [1], {"a": 1}, {"a": True}]})  # true is not 1
