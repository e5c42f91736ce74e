"""bench/facts.py: an episode's facts from its run, and the failure taxonomy (one scripted
episode per class, live and read back alike)."""

from __future__ import annotations

import pytest
from suite_runs import W, episode

from textagent.bench import facts as F
from textagent.bench.records import Episode


@pytest.mark.parametrize(
    "task_id, replies, expected",
    [
        ("single-weather-berlin", [W % "Berlin", "ANSWER: It is 4 °C."], None),
        ("notool-capital-france", [W % "Paris", "ANSWER: Paris"], "call_not_needed"),
        (
            "single-weather-berlin",
            ["Let me look it up.\nOBSERVATION: Berlin is 20 °C", "x"],
            "hallucinated_observation",
        ),
        ("single-weather-berlin", [W % "Berlin", W % "Berlin", "ANSWER: 3 degrees", "ANSWER: 3 degrees"], "loop"),
        ("single-weather-berlin", ['TOOL: get_weather ARGS: {"city": "Berlin"'] * 3, "unparseable"),
        ("single-weather-berlin", [W % "Paris", W % "London"], "budget"),
        ("single-calc-mul", ["ANSWER: 408"], "no_call"),
        ("distract-divide", ['TOOL: search_web ARGS: {"query": "48/6"}', "ANSWER: 8", "ANSWER: 8"], "wrong_tool"),
        ("single-weather-lisbon", [W % "Paris", "ANSWER: rain in Lisbon"], "invalid_args"),
        ("single-weather-berlin", [W % "Berlin", "ANSWER: It is 40 °C.", "ANSWER: It is 40 °C."], "wrong_answer"),
        ("single-weather-berlin", [], "backend_error"),
    ],
)
def test_each_failure_class(task_id, replies, expected):
    live = episode(task_id, replies, max_steps=2 if expected == "budget" else None)
    record = live.to_record()
    assert record["failure"] == expected, (record["stop_reason"], record["checks"], record["trace"][1:3])
    assert F.classify(live) == expected == F.classify(Episode.from_record(record))  # live and read back alike
    assert (expected is None) == record["success"]


def test_hallucination_when_the_server_ignores_stop():
    record = episode(
        "single-weather-berlin", ["I know this.\nOBSERVATION (get_weather): 30 °C\nANSWER: 30"], honour_stop=False
    ).to_record()
    steps = [s for s in record["trace"] if s["type"] == "step"]
    assert steps[0]["dropped"] and record["failure"] == "hallucinated_observation"


def test_retrying_after_a_tool_error_is_not_a_loop():
    call = 'TOOL: get_stock_price ARGS: {"symbol": "ACME"}'
    record = episode("recover-stock-acme", [call, call, "ANSWER: 123.45 USD"]).to_record()
    assert record["success"] and not record["loop"] and record["tool_errors"] == 1


def test_recovery_after_a_first_step_format_error():
    record = episode(
        "single-weather-berlin", ['TOOL: get_weather ARGS: {"city": ', W % "Berlin", "ANSWER: 4 °C"]
    ).to_record()
    assert record["success"]
    assert record["first_step_format_error"] and record["recovered"] and record["format_errors"] == 1
    baseline = episode(
        "single-weather-berlin", ['TOOL: get_weather ARGS: {"city": ', W % "Berlin"], mode="baseline"
    ).to_record()
    assert baseline["stop_reason"] == "format_errors" and not baseline["recovered"]
    assert baseline["failure"] == "unparseable"


def test_native_decode_failures_from_the_agents_details():
    rec = {
        "task": "t",
        "mode": "native",
        "success": False,
        "stop_reason": "answer",
        "needs_tools": True,
        "attempted": [],
        "trace": [
            {
                "type": "step",
                "raw": '{"name": "calculate", "arguments": {}}',
                "outcomes": [],
                "details": {"native": "content", "decode_failure": "json"},
            },
            {"type": "step", "raw": "", "outcomes": [], "details": {"native": "tool_calls"}},
        ],
    }
    assert Episode.from_record(rec).facts.native_decode_failures == 1
    assert F.classify(Episode.from_record(rec)) == "unparseable"
    rescued = {
        **rec,
        "trace": [{**rec["trace"][0], "details": {"native": "content", "decode_failure": "json", "fallback": True}}],
    }
    again = Episode.from_record(rescued)
    assert again.facts.native_decode_failures == 1 and F.classify(again) == "no_call"
