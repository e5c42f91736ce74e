"""textagent.examples: which worked examples are shown for a task (ToolSet.examples_for)."""

from __future__ import annotations

import pytest

from textagent.examples import Example, select_examples
from textagent.tools import ToolSet, tool


@tool
def get_forecast(city: str) -> str:
    """Weather forecast for a city."""
    return city


class TestExampleSelection:
    def test_max_examples_shows_the_examples_most_like_the_task_closest_last(self):
        def ex(q):
            return Example(q, (("get_forecast", {"city": "X"}, "ok"),), "a")

        direct = Example("What is the opposite of hot?", (), "cold")
        paris, rain, days, snow = (
            ex("What is the forecast for Paris?"),
            ex("Will it rain in Oslo tomorrow?"),
            ex("Give me three days of forecast for Rome."),
            ex("Is snow expected in Oslo?"),
        )
        ts = ToolSet([get_forecast], example=[paris, direct, rain, days, snow], max_examples=2)
        # call-less examples always come first; then the two closest, the closest last
        assert ts.examples_for("Is snow expected in Oslo on Sunday?") == (direct, rain, snow)
        # rare words decide: "forecast" is in two examples, "Rome" and "days" only in one
        assert ts.examples_for("The forecast for Rome for the next days") == (direct, paris, days)
        # nothing in common: the first ones in the order given
        assert ts.examples_for("zzz") == (direct, rain, paris)
        # a pool no larger than max_examples is ordered the same way; no limit: the order given
        assert ToolSet([get_forecast], example=[paris, direct, rain], max_examples=2).examples_for("Rain in Oslo?") == (
            direct,
            paris,
            rain,
        )
        assert ToolSet([get_forecast], example=[paris, rain, days]).examples_for("Rain in Oslo?") == (paris, rain, days)
        assert ToolSet([get_forecast], example=[paris, direct], max_examples=0).examples_for("forecast") == (direct,)
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(ValueError, match="max_examples"):
                ToolSet([get_forecast], max_examples=bad)

    def test_examples_answered_directly_come_last_when_closest(self):
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


def test_select_examples_works_on_a_plain_pool():
    lookup = Example("Rain in Oslo?", (("get_forecast", {"city": "Oslo"}, "rain"),), "Rain.")
    sums = Example("What is 2 + 2?", (("get_forecast", {"city": "X"}, "ok"),), "4")
    direct = Example("Hello!", (), "Hi!")
    pool = (lookup, direct, sums)
    assert select_examples(pool, "anything", None) is pool
    assert select_examples(pool, "Will it rain in Oslo?", 1) == (direct, lookup)
    assert ToolSet([get_forecast], example=pool, max_examples=1).examples_for("Will it rain in Oslo?") == (
        direct,
        lookup,
    )
    with pytest.raises(ValueError, match="replies"):
        Example("q", (("get_forecast", {}, "r"),), "a", replies=(2,))
