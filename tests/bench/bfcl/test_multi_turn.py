"""bench/bfcl/multi_turn.py and episode.py: BFCL's multi-turn items, simulators and checker, and
an item run as one conversation of the Agent (scripted replies: no model)."""

from __future__ import annotations

import ast
import sys

import pytest

from textagent.backends.scripted import ScriptedBackend
from textagent.bench.bfcl import multi_turn as mt
from textagent.bench.bfcl.data import BfclDataError, fetch_wheel
from textagent.bench.bfcl.episode import run_multi_turn
from textagent.bench.bfcl.prompt_mode import held_out_message
from textagent.bench.episode import Settings
from textagent.protocol import ToolCall, render_call


@pytest.fixture(scope="module")
def wheel():
    return fetch_wheel()  # the pinned bfcl-eval wheel, verified and cached (.ci/run fetches it first)


def _calls(item: mt.MultiTurnItem, turn: list[str]) -> list[tuple[str, dict]]:
    """Ground-truth call strings as (name, keyword arguments): positional ones named from the documents."""
    docs = {d["name"]: d for d in (*item.functions, *(d for v in item.held_out.values() for d in v))}
    out = []
    for text in turn:
        node = ast.parse(text, mode="eval").body
        names = list((docs[node.func.id].get("parameters") or {}).get("properties") or {})
        args = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
        args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
        out.append((node.func.id, args))
    return out


def _reference(item: mt.MultiTurnItem, *, bfcl: bool = False) -> list[str]:
    """The ground truth as the replies of a model: each turn's calls in one reply, then an answer."""
    replies = []
    for turn in item.ground_truth:
        calls = _calls(item, list(turn))
        if calls and bfcl:
            replies.append(
                "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in calls) + "]"
            )
        elif calls:
            replies.append("\n".join(render_call(ToolCall(n, a)) for n, a in calls))
        replies.append("[]" if bfcl else "ANSWER: done")
    return replies


def test_every_category_loads_with_its_turns_and_held_out_functions(wheel) -> None:
    for category in mt.MULTI_TURN_CATEGORIES:
        items = mt.load_multi_turn(category, wheel=wheel)
        assert len(items) == 200 and {i.split for i in items} == {"dev", "test"}
        assert all(len(i.turns) == len(i.ground_truth) for i in items)
    item = mt.load_multi_turn("multi_turn_miss_func", wheel=wheel)[0]
    ((turn, docs),) = item.held_out.items()
    assert item.turns[turn] == () and [d["name"] for d in docs] == ["sort"]
    assert "sort" not in {f["name"] for f in item.functions}
    assert all(f["description"].endswith("Python 3 syntax.") for f in item.functions)
    assert held_out_message(docs).endswith("\nI have updated some more functions you can choose from. What about now?")


def test_the_scorer_is_bfcls_checker_on_ground_truth_and_altered_answers(wheel) -> None:
    for category in mt.MULTI_TURN_CATEGORIES:
        for item in mt.load_multi_turn(category, wheel=wheel)[:25]:
            truth = [[list(t)] for t in item.ground_truth]
            score = mt.score_item(item, truth, wheel=wheel)
            assert score.valid and score.turns_right == score.turns == len(item.ground_truth), item.id
            k = next(i for i, t in enumerate(item.ground_truth) if t)
            altered = [list(s) for s in truth]
            altered[k] = [list(item.ground_truth[k][:-1])]  # the turn's last call left out
            bad = mt.score_item(item, altered, wheel=wheel)
            assert not bad.valid and bad.turns_right == k, item.id
            cut = mt.score_item(item, truth[:-1], wheel=wheel)  # force-quit before the last turn
            assert not cut.valid and cut.error_type == "multi_turn:force_terminated"
            assert cut.turns_right == len(item.ground_truth) - 1


def test_a_wrong_argument_fails_the_state_or_result_check(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    truth = [[list(t)] for t in item.ground_truth]
    truth[0] = [["cd(folder='document')", "mkdir(dir_name='tmp')", "mv(source='final_report.pdf', destination='tmp')"]]
    score = mt.score_item(item, truth, wheel=wheel)
    assert not score.valid and score.turns_right == 0 and score.error_type.startswith("multi_turn:")


def test_simulators_are_fresh_per_episode_and_leave_nothing_behind(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    utils, _ = mt.runtime(wheel)
    before = set(vars(utils))
    with mt.Simulator(item, wheel=wheel) as a, mt.Simulator(item, wheel=wheel) as b:
        assert '"document"' in a.execute("cd", {"folder": "document"})
        assert "temp" not in b.execute("ls", {}) and "document" in b.execute("ls", {})
        with pytest.raises(KeyError):
            a.execute("__import__", {"name": "os"})  # only listed functions: no text reaches eval
    assert set(vars(utils)) == before


def test_call_strings_are_built_from_values_never_from_model_text() -> None:
    assert (
        mt.call_string("echo", {"content": "x') or __import__('os').system('id"})
        == "echo(content=\"x') or __import__('os').system('id\")"
    )


def test_missing_mpmath_is_a_one_line_error_naming_the_extra(wheel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpmath", None)
    with pytest.raises(BfclDataError, match=r"need mpmath: pip install 'textagent\[bench\]'"):
        mt.runtime(wheel)


@pytest.mark.parametrize("category", ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param"])
@pytest.mark.parametrize("mode", ["text", "bfcl-prompt", "text-no-feedback", "text-first-failure"])
def test_ground_truth_replayed_through_the_agent_scores_right(wheel, category: str, mode: str) -> None:
    item = mt.load_multi_turn(category, wheel=wheel)[0]
    backend = ScriptedBackend(_reference(item, bfcl=mode == "bfcl-prompt"))
    out = run_multi_turn(item, mode, backend, chat_format="chatml", settings=Settings(), options={}).to_record()
    assert out["error"] is None and out["success"], out["multi_turn"]
    assert out["multi_turn"]["turns_right"] == len(item.turns)
    assert len([r for r in out["trace"] if r["type"] == "start"]) == len(item.turns)  # a question per turn
    if item.held_out:
        turn = next(iter(item.held_out))
        prompt = backend.prompts[sum(2 if t else 1 for t in item.ground_truth[:turn])]
        assert ("I have updated some more functions" in prompt) and (
            ("'name': 'sort'" in prompt) == (mode == "bfcl-prompt")
        )


def test_feedback_lets_the_text_mode_fix_a_call_the_ablation_cannot(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    replies = _reference(item)
    broken = ['TOOL: cd ARGS: {"folder": "document"', *replies]  # an object never closed, then the turn again
    full = run_multi_turn(
        item, "text", ScriptedBackend(broken), chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    assert full["success"] and full["multi_turn"]["format_errors"] == 1
    ablated = run_multi_turn(
        item,
        "text-no-feedback",
        ScriptedBackend(broken + ["ANSWER: done"] * 4),
        chat_format="chatml",
        settings=Settings(),
        options={},
    ).to_record()
    assert not ablated["success"] and ablated["multi_turn"]["per_turn"][0]["stop_reason"] == "format_errors"
    assert ablated["multi_turn"]["turns_right"] == 0


def test_a_refused_call_ends_the_turn_of_the_first_failure_ablation_and_text_mode_goes_on(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    refused = ['TOOL: cd ARGS: {"directory": "document"}', *_reference(item)]  # not a parameter of cd
    full = run_multi_turn(
        item, "text", ScriptedBackend(refused), chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    assert full["success"] and full["multi_turn"]["refused_calls"] == 1
    backend = ScriptedBackend(refused + ["ANSWER: done"] * 4)
    ablated = run_multi_turn(
        item, "text-first-failure", backend, chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    per_turn = ablated["multi_turn"]["per_turn"]
    assert per_turn[0]["stop_reason"] == "call_errors" and per_turn[0]["refused_calls"] == 1
    assert len(per_turn) == len(item.turns) and not ablated["multi_turn"]["force_quit"]  # the item goes on
    assert not ablated["success"] and ablated["multi_turn"]["turns_right"] == 0
    after = backend.prompts[1].split('"directory"', 1)[1]  # what followed the refused call
    assert "OBSERVATION" not in after and item.turn_text(1) in after  # nothing said of it: the next turn


def test_a_model_that_never_stops_calling_is_force_quit(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    replies = ["TOOL: ls ARGS: {}"] * (mt.MAX_CALL_STEPS + 1)
    out = run_multi_turn(
        item, "text", ScriptedBackend(replies), chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    assert out["multi_turn"]["force_quit"] and out["stop_reason"] == "max_steps"
    assert out["multi_turn"]["error_type"] == "multi_turn:force_terminated" and not out["success"]
    assert out["multi_turn"]["per_turn"][0]["calls"] == mt.MAX_CALL_STEPS + 1


@pytest.mark.parametrize("mode", ["text", "bfcl-prompt"])
def test_max_repeats_ends_the_turn_not_the_item_and_leaves_bfcls_own_mode_alone(wheel, mode) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    call = "[ls()]" if mode == "bfcl-prompt" else "TOOL: ls ARGS: {}"
    replies = [call] * 3 + ["ANSWER: done"] * len(item.turns) * 2
    settings = Settings(max_repeats=3)
    out = run_multi_turn(
        item, mode, ScriptedBackend(replies), chat_format="chatml", settings=settings, options={}
    ).to_record()
    first = out["multi_turn"]["per_turn"][0]
    if mode == "text":
        assert first["stop_reason"] == "repeated" and first["steps"] == 3
        assert not out["multi_turn"]["force_quit"] and len(out["multi_turn"]["per_turn"]) == len(item.turns)
    else:  # BFCL's loop: the same call again is a step like any other
        assert first["steps"] > 3


def test_the_ablation_shows_no_feedback_in_the_turns_after(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    backend = ScriptedBackend(['TOOL: cd ARGS: {"folder": "document"', *["ANSWER: done"] * 4])
    out = run_multi_turn(
        item, "text-no-feedback", backend, chat_format="chatml", settings=Settings(), options={}
    ).to_record()
    assert out["multi_turn"]["per_turn"][0]["stop_reason"] == "format_errors"
    assert "OBSERVATION (format error)" not in backend.prompts[1]  # what text mode would have said
    assert out["trace"][0]["mode"] == "text-no-feedback"


@pytest.mark.parametrize("mode", ["text", "text-no-feedback"])
def test_a_grouped_listing_shortens_the_prompt_and_still_scores_the_ground_truth(wheel, mode: str) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    plain, grouped = ScriptedBackend(_reference(item)), ScriptedBackend(_reference(item))
    run_multi_turn(item, mode, plain, chat_format="chatml", settings=Settings(), options={})
    out = run_multi_turn(
        item, mode, grouped, chat_format="chatml", settings=Settings(grouped_listing=True), options={}
    ).to_record()
    assert out["success"] and "descriptions all begin" in grouped.prompts[0]
    assert len(grouped.prompts[0]) < 0.8 * len(plain.prompts[0])
    # BFCL's own prompt is BFCL's, grouped or not
    bfcl = ScriptedBackend(_reference(item, bfcl=True))
    run_multi_turn(item, "bfcl-prompt", bfcl, chat_format="chatml", settings=Settings(grouped_listing=True), options={})
    assert "descriptions all begin" not in bfcl.prompts[0]


def test_the_concrete_example_style_reaches_the_text_modes_and_still_scores_the_ground_truth(wheel) -> None:
    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    plain, concrete = ScriptedBackend(_reference(item)), ScriptedBackend(_reference(item))
    run_multi_turn(item, "text", plain, chat_format="chatml", settings=Settings(), options={})
    out = run_multi_turn(
        item, "text", concrete, chat_format="chatml", settings=Settings(example_style="concrete"), options={}
    ).to_record()
    assert out["success"] and "and reported success." in plain.prompts[0]  # status, the default
    assert "returned)" not in concrete.prompts[0] and "ANSWER: The result is 42." in concrete.prompts[0]


def test_an_episode_counts_from_its_live_runs_as_a_report_counts_from_its_record(wheel) -> None:
    """The Episode run_multi_turn returns holds each turn's Result and a typed verdict; read back
    from its record, its runs, counts and loop statistics are the same."""
    import json

    from textagent.bench.bfcl.loop_stats import loop_stats
    from textagent.bench.bfcl.multi_report import turn_answers
    from textagent.bench.records import Episode, MultiTurnVerdict
    from textagent.trace import json_line

    item = mt.load_multi_turn("multi_turn_base", wheel=wheel)[0]
    replies = ['TOOL: cd ARGS: {"folder": "document"', "TOOL: nope ARGS: {}", *_reference(item)]
    live = run_multi_turn(item, "text", ScriptedBackend(replies), chat_format="chatml", settings=Settings(), options={})
    assert isinstance(live.multi_turn, MultiTurnVerdict) and live.success
    assert [len(r.steps) for r in live.runs] == [t.steps for t in live.multi_turn.per_turn]
    again = Episode.from_record(json.loads(json_line(live.to_record())))
    assert again.multi_turn == live.multi_turn and again.facts == live.facts
    assert [[s.raw for s in r.steps] for r in again.runs] == [[s.raw for s in r.steps] for r in live.runs]
    assert loop_stats(again) == loop_stats(live) and turn_answers(again) == turn_answers(live)
    assert (live.facts.format_errors, live.facts.tool_errors) == (1, 1)
