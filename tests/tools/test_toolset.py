"""ToolSet: a mapping of tools with examples; adding and selecting tools."""

from __future__ import annotations

from typing import Literal

import pytest
from toolfakes import Call, Color, _boom, fetch_price, get_forecast

from textagent.tools import Tool, ToolSet, tool

# --------------------------------------------------------------------------------------------
# ToolSet
# --------------------------------------------------------------------------------------------


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
        assert out.args == {"city": "Paris"}  # what ran
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

    def test_an_enum_value_in_another_case_is_the_listed_value(self):
        ts = ToolSet([get_forecast])
        out = ts.execute(Call("get_forecast", {"city": "Paris", "unit": "F"}))
        assert out.ok and out.output == '{"city": "Paris", "days": 3, "unit": "f"}'
        assert ts.execute(Call("get_forecast", {"city": "Paris", "unit": " C "})).ok

        @tool
        def pick(mode: Literal["fast", "Fast", "slow"] | None = None) -> str:
            """Pick."""
            return str(mode)

        picks = ToolSet([pick])
        assert picks.execute(Call("pick", {"mode": "SLOW"})).output == "slow"  # Optional[Literal]: anyOf
        assert picks.execute(Call("pick", {"mode": "Fast"})).output == "Fast"  # listed as written
        ambiguous = picks.execute(Call("pick", {"mode": "FAST"}))  # two candidates: no guess
        assert not ambiguous.ok and "is not one of" in ambiguous.output
        assert not ts.execute(Call("get_forecast", {"city": "Paris", "unit": "kelvin"})).ok


# --------------------------------------------------------------------------------------------
# Adding tools to a ToolSet keeps its examples
# --------------------------------------------------------------------------------------------


def _demo():
    from textagent.toolkits import demo

    return demo


def test_adding_tools_to_a_toolset_keeps_its_examples_and_settings():
    demo = _demo()
    base = demo.demo_tools()
    for grown in (
        base.with_tools(get_forecast),
        base + [get_forecast],  # noqa: RUF005 - ToolSet.__add__ is what is tested
        base + get_forecast,
        [get_forecast] + base,  # noqa: RUF005 - ToolSet.__radd__
        ToolSet([base, get_forecast]),
        base + ToolSet([get_forecast]),
    ):
        assert set(grown) == {*base, "get_forecast"}
        assert grown.examples == demo.DEMO_EXAMPLES and grown.max_examples == demo.MAX_EXAMPLES
    assert list(base) == list(demo.demo_tools())  # the original is unchanged
    strict = ToolSet([get_forecast], extra_args="error").with_tools(fetch_price)
    assert strict.extra_args == "error" and set(strict) == {"get_forecast", "fetch_price"}
    with pytest.raises(ValueError, match="two tools are named 'calculate'"):
        base + [demo.calculate]  # noqa: RUF005 - ToolSet.__add__


def test_tool_names_where_tools_are_expected_get_a_clear_error():
    demo = _demo()
    with pytest.raises(
        TypeError,
        match=r"got the tool name 'calculate': pass the ToolSet itself or "
        r"toolset.values\(\).*toolset \+ \[f\]",
    ):
        ToolSet([*demo.demo_tools(), get_forecast])
    from textagent.agent import Agent
    from textagent.backends.scripted import ScriptedBackend

    with pytest.raises(TypeError, match="got the tool name 'calculate'"):
        Agent(ScriptedBackend([]), [*demo.demo_tools(), get_forecast])
    agent = Agent(ScriptedBackend([]), [demo.demo_tools(), get_forecast])  # a ToolSet inside a list is fine
    assert agent.tools.examples == demo.DEMO_EXAMPLES and "get_forecast" in agent.tools


def test_select_keeps_the_examples_that_use_only_the_selected_tools():
    demo = _demo()
    chosen = demo.demo_tools().select("calculate", "get_weather")
    assert list(chosen) == ["calculate", "get_weather"] and chosen.max_examples == demo.MAX_EXAMPLES
    used = [{name for name, _, _ in e.calls} for e in chosen.examples]
    assert {"calculate"} in used and {"calculate", "get_weather"} in used and set() in used
    assert all(u <= {"calculate", "get_weather"} for u in used)
    assert len(chosen.examples) == 3 + 1 + 1 + 4  # direct answers, 2.5% of 3200, Rome/Oslo, 4 weather
    with pytest.raises(KeyError, match="no tool named 'teleport'"):
        demo.demo_tools().select("teleport")
