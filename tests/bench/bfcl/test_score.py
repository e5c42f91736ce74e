"""bench/bfcl/score.py and the runner on BFCL items: three views, recovered items, native names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from textagent import ScriptedBackend
from textagent.bench.bfcl.data import BfclItem
from textagent.bench.bfcl.tasks import item_task
from textagent.bench.episode import run_episode
from textagent.bench.tasks import Task

FIXTURES = (
    {i["id"]: i for i in json.loads((Path(__file__).parent / "fixtures.json").read_text())["items"]}
    if (Path(__file__).parent / "fixtures.json").exists()
    else {}
)

DOCS = [
    {
        "name": "spotify.play",
        "description": "Play.",
        "parameters": {
            "type": "dict",
            "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
            "required": ["artist", "duration"],
        },
    }
]
TRUTH = (
    {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
    {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
)
A = 'TOOL: spotify.play ARGS: {"artist": "Taylor Swift", "duration": 20}'
B = 'TOOL: spotify.play ARGS: {"artist": "Maroon 5", "duration": 15}'


def _task(category: str = "parallel", truth=TRUTH) -> Task:
    return item_task(
        BfclItem(f"{category}_1", category, 1, ({"role": "user", "content": "Play both."},), tuple(DOCS), truth)
    )


def _views(record: dict) -> tuple[bool, bool, bool, bool]:
    b = record["bfcl"]
    return b["first"]["valid"], b["feedback"]["valid"], b["agent"]["valid"], b["recovered"]


def test_both_calls_in_the_first_reply() -> None:
    record = run_episode(_task(), "text", ScriptedBackend([A + "\n" + B, "ANSWER: playing"])).to_record()
    assert _views(record) == (True, True, True, False) and record["success"] and record["split"] == "test"


def test_calls_spread_over_steps_count_in_the_agent_view_only() -> None:
    record = run_episode(_task(), "text", ScriptedBackend([A, B, "ANSWER: playing"])).to_record()
    assert _views(record) == (False, False, True, False)
    assert record["failure"] == "wrong_count" and record["bfcl"]["first"]["error_type"] == "wrong_count"


def test_a_format_error_fixed_after_feedback_is_recovered() -> None:
    record = run_episode(_task(), "text", ScriptedBackend([A[:-1], A + "\n" + B, "ANSWER: playing"])).to_record()
    assert _views(record) == (False, True, True, True)
    assert record["failure"] == "unparseable"


def test_a_call_fixed_after_argument_feedback_is_recovered() -> None:
    wrong_type = 'TOOL: spotify.play ARGS: {"artist": "Taylor Swift", "duration": "twenty"}'
    record = run_episode(
        _task(), "text", ScriptedBackend([wrong_type + "\n" + B, A + "\n" + B, "ANSWER: playing"])
    ).to_record()
    assert _views(record) == (False, True, True, True)


def test_the_feedback_view_is_the_first_parsed_reply_when_no_call_passed() -> None:
    unknown = "TOOL: spotify.stop ARGS: {}"
    record = run_episode(_task(), "text", ScriptedBackend([A[:-1], unknown, unknown, "ANSWER: gave up"])).to_record()
    assert _views(record)[:2] == (False, False) and record["bfcl"]["feedback"]["error_type"] is not None


def test_a_repeated_call_counts_once_in_the_agent_view() -> None:
    record = run_episode(_task(), "text", ScriptedBackend([A + "\n" + B, A, "ANSWER: done"])).to_record()
    assert _views(record)[2] is True


def test_irrelevance_no_call_is_right_and_a_call_is_not() -> None:
    right = run_episode(
        _task("irrelevance", None), "text", ScriptedBackend(["ANSWER: none of the tools fits"])
    ).to_record()
    wrong = run_episode(_task("irrelevance", None), "text", ScriptedBackend([A, "ANSWER: ok"])).to_record()
    assert right["success"] and not wrong["success"] and wrong["failure"] == "irrelevance_call"


def test_bfcl_prompt_mode_on_an_item() -> None:
    record = run_episode(
        _task(),
        "bfcl-prompt",
        ScriptedBackend(
            [
                '[spotify.play(artist="Taylor Swift", duration=20), spotify.play(artist="Maroon 5", duration=15)]',
                "Done.",
            ]
        ),
    ).to_record()
    assert _views(record) == (True, True, True, False)
    bad = run_episode(_task(), "bfcl-prompt", ScriptedBackend(["I will play them."])).to_record()
    assert bad["failure"] == "unparseable" and bad["steps"] == 1


def test_native_names_are_mapped_back_for_scoring() -> None:
    from textagent.agent import Step
    from textagent.bench.bfcl.score import step_calls
    from textagent.protocol import Reply, ToolCall

    step = Step(1, "", reply=Reply([ToolCall("spotify_play", {"artist": "X", "duration": 1})], None, "", []))
    assert step_calls(step, {"spotify_play": "spotify.play"}) == [("spotify.play", {"artist": "X", "duration": 1})]


@pytest.mark.skipif(not FIXTURES, reason="no fixtures.json")
def test_real_items_from_the_fixtures_score_their_ground_truth() -> None:
    from test_checker import gt_calls  # the checker tests' ground truth -> calls

    from textagent.agent import Step
    from textagent.bench.bfcl.score import score_steps
    from textagent.protocol import Reply, ToolCall

    checked = 0
    for raw in FIXTURES.values():
        if raw.get("ground_truth") is None or "java" in raw["category"]:
            continue
        item = BfclItem(raw["id"], raw["category"], 1, (), tuple(raw["function"]), tuple(raw["ground_truth"]))
        calls = [ToolCall(name, args) for name, args in gt_calls(raw)]
        step = Step(1, "", reply=Reply(calls, None, "", []))
        assert score_steps(item, [step]).first.valid, raw["id"]
        checked += 1
    assert checked
