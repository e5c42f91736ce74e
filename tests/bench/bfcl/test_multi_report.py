"""The BFCL multi-turn section of the bench report: rows, copied answers, pairs on items and turns."""

from __future__ import annotations

from typing import Any

from benchruns import episodes

from textagent.bench.bfcl.multi_report import (
    _HEADER,
    feedback_turns,
    multi_turn_rows,
    render_multi_turn,
    turn_answers,
    turn_outcomes,
)
from textagent.bench.records import Episode


def _record(task: str, mode: str, turns_right: int, answers: list[str | None], **mt: Any) -> dict[str, Any]:
    trace: list[dict[str, Any]] = []
    for answer in answers:  # each turn as a trace has it: its start, its step, its result
        trace += [
            {"type": "start", "task": "q"},
            {"type": "step", "raw": f"ANSWER: {answer}"},
            {"type": "result", "answer": answer},
        ]
    return {
        "task": task,
        "kind": "multi_turn_base",
        "mode": mode,
        "repeat": 0,
        "success": turns_right == len(answers),
        "stop_reason": "answer",
        "steps": 2 * len(answers),
        "seconds": 10.0,
        "usage": {"prompt_evaluated": 100, "completion_tokens": 20},
        "trace": trace,
        "multi_turn": {"turns": len(answers), "turns_right": turns_right, **mt},
    }


def test_turn_answers_are_the_answers_that_ended_each_turn_with_the_tools_each_turn_called():
    record = _record("multi_turn_base_1", "text", 1, ["Done.", None, "find returned a result each."])
    record["trace"][1]["calls"] = [{"name": "ls", "args": {}}]  # the first turn's step
    assert turn_answers(Episode.from_record(record)) == [("Done.", {"ls"}), ("find returned a result each.", set())]


def test_a_status_answer_counts_as_copied_only_in_a_turn_that_did_not_run_the_tool_it_names():
    record = _record("multi_turn_base_1", "text", 2, ["ls ran with a true and reported success."] * 2)
    record["trace"][1]["calls"] = [{"name": "ls", "args": {"a": True}}]
    copied = _HEADER.index("answers copying an example")
    assert multi_turn_rows(episodes([record]), ["text"])[0][copied] == "1/2"


def test_rows_count_answers_copying_an_example_per_mode():
    records = [
        _record("multi_turn_base_1", "text", 2, ["The file is moved.", "It holds 3 lines."]),
        _record("multi_turn_base_1", "proxy", 1, ["cat and echo returned a result each.", "The result is 42."]),
    ]
    rows = {row[1]: row for row in multi_turn_rows(episodes(records), ["text", "proxy"])}
    copied = _HEADER.index("answers copying an example")
    assert rows["text"][copied] == "0/2" and rows["proxy"][copied] == "2/2"
    assert rows["text"][2].endswith("1/1") and rows["proxy"][2].endswith("0/1")


def test_rows_count_turn_answers_repeating_the_feedback():
    parroted = "The call failed. Call the tool again (with corrected arguments if they were wrong)."
    record = _record("multi_turn_base_41", "text", 0, ["It holds 3 lines.", parroted])
    feedback = _HEADER.index("answers repeating the feedback")
    assert multi_turn_rows(episodes([record]), ["text"])[0][feedback] == "1/2"


def test_feedback_turns_count_the_turns_told_of_a_mistake_and_those_of_them_right():
    per_turn = [
        {"format_errors": 1, "refused_calls": 0},  # told, and right (inside the right prefix)
        {"format_errors": 0, "refused_calls": 0},  # not told
        {"format_errors": 0, "refused_calls": 2},  # told, wrong (past the right prefix)
    ]
    record = _record("multi_turn_base_1", "text", 2, ["a", "b", "c"], per_turn=per_turn)
    assert feedback_turns(Episode.from_record(record)) == (1, 2)
    assert feedback_turns(Episode.from_record(_record("multi_turn_base_2", "text", 1, ["a"]))) == (
        0,
        0,
    )  # no per-turn record
    told = _HEADER.index("turns told of a mistake: right")
    assert multi_turn_rows(episodes([record]), ["text"])[0][told] == "1/2"


def test_turn_outcomes_count_a_turn_right_only_when_every_turn_before_it_is():
    records = [_record("multi_turn_base_1", "text", 1, ["a", "b", "c"])]
    assert turn_outcomes(episodes(records), "text") == {
        ("multi_turn_base_1", 0, 0): True,
        ("multi_turn_base_1", 0, 1): False,
        ("multi_turn_base_1", 0, 2): False,
    }


def test_section_pairs_the_modes_on_items_and_on_turns_and_skips_failed_episodes():
    records = [
        _record("multi_turn_base_1", "text", 2, ["a", "b"]),
        _record("multi_turn_base_1", "native", 0, ["a", "b"]),
        {**_record("multi_turn_base_2", "native", 0, ["a"]), "stop_reason": "backend_error"},
    ]
    text = render_multi_turn(episodes(records), ["text", "native"])
    assert "| multi_turn_base | native |" in text and "1/1" in text
    assert "### Paired, on items" in text and "### Paired, on turns" in text
    assert "| text − native | 1 |" in text and "| text − native | 2 |" in text
    assert "| A − B | turns both ran |" in text.split("### Paired, on turns", 1)[1]
    assert render_multi_turn(episodes([r for r in records if r["mode"] == "x"]), ["text"]) == ""


def test_a_run_of_several_categories_is_paired_over_all_and_per_category():
    records = [
        _record("multi_turn_base_1", "text", 2, ["a", "b"]),
        _record("multi_turn_base_1", "bfcl-prompt", 0, ["a", "b"]),
        {**_record("multi_turn_miss_func_1", "text", 0, ["a"]), "kind": "multi_turn_miss_func"},
        {**_record("multi_turn_miss_func_1", "bfcl-prompt", 1, ["a"]), "kind": "multi_turn_miss_func"},
    ]
    items, turns = render_multi_turn(episodes(records), ["text", "bfcl-prompt"]).split("### Paired, on turns", 1)
    assert "| text − bfcl-prompt | 2 | 1 / 1 | 1 | 1 |" in items
    assert "| text − bfcl-prompt, multi_turn_base | 1 | 1 / 0 | 1 | 0 |" in items
    assert "| text − bfcl-prompt, multi_turn_miss_func | 1 | 0 / 1 | 0 | 1 |" in items
    assert "| text − bfcl-prompt | 3 | 2 / 1 | 2 | 1 |" in turns
    assert "| text − bfcl-prompt, multi_turn_base | 2 | 2 / 0 | 2 | 0 |" in turns
    assert "| text − bfcl-prompt, multi_turn_miss_func | 1 | 0 / 1 | 0 | 1 |" in turns
    one = render_multi_turn(episodes(records[:2]), ["text", "bfcl-prompt"])
    assert "| text − bfcl-prompt | 1 |" in one and ", multi_turn_base |" not in one
    # a category only one mode has run gets no row of its own
    lopsided = render_multi_turn(episodes(records[:3]), ["text", "bfcl-prompt"])
    assert "| text − bfcl-prompt, multi_turn_base | 1 |" in lopsided
    assert ", multi_turn_miss_func |" not in lopsided


def test_compare_pairs_two_runs_on_turns_as_well_as_items(tmp_path):
    """Two runs of multi-turn items (two models, or before and after a change) pair on turns too."""
    import json

    from textagent.bench.compare import compare_runs

    def run(name: str, turns_right: dict[str, int]) -> Any:
        folder = tmp_path / name
        folder.mkdir()
        records = [_record(task, "text", right, ["Done."] * 4) for task, right in turns_right.items()]
        (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return folder

    a = run("a", {"multi_turn_base_1": 4, "multi_turn_base_2": 1, "multi_turn_base_3": 0})
    b = run("b", {"multi_turn_base_1": 2, "multi_turn_base_2": 1, "multi_turn_base_3": 0})
    text = compare_runs(a, b)
    items = text.split("## Paired differences", 1)[1].split("### Paired, on turns", 1)[0]
    assert "| text: B − A | 3 | 0 / 1 | 0 | 1 |" in items
    turns = text.split("### Paired, on turns", 1)[1].split("\n## ", 1)[0]
    # 12 turns; A right on 5 (4 + 1), B on 3 (2 + 1): B lost turns 3 and 4 of the first item
    assert "| mode: B − A | turns both ran | right B / A | B only | A only |" in turns
    assert "| text: B − A | 12 | 3 / 5 | 0 | 2 |" in turns


def test_compare_of_single_turn_runs_has_no_turn_pairs(tmp_path):
    import json

    from textagent.bench.compare import compare_runs

    record = {**_record("simple_1", "text", 0, ["Done."]), "kind": "simple_python"}
    del record["multi_turn"]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    assert "on turns" not in compare_runs(tmp_path / "a", tmp_path / "b")


def test_report_skips_multi_turn_records_with_bad_nested_fields_naming_them(tmp_path, caplog):
    """Hardening h66, 22: `bench --report` tracebacked on `turns: "x"`, `per_turn: [5]`, `turns_right: [1]`."""
    import json
    import logging

    from textagent.bench.cli import main as bench_main

    good = _record("multi_turn_base_1", "text", 2, ["Done.", "It holds 3 lines."])
    bad = [
        _record("multi_turn_base_2", "text", 1, ["Done."], turns="x"),
        _record("multi_turn_base_3", "text", 1, ["Done."], per_turn=[5]),
        {**_record("multi_turn_base_4", "text", 1, ["Done."]), "multi_turn": {"turns": 1, "turns_right": [1]}},
        _record("multi_turn_base_5", "text", 1, ["Done."], turns=10**12),  # an entry per turn: never made
    ]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [good, *bad]))
    with caplog.at_level(logging.WARNING, logger="textagent.bench"):
        assert bench_main(["--report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| multi_turn_base | text | 100.0 % (21–100 %), 1/1 | 100.0 % (34–100 %), 2/2 |" in report  # the good one
    warnings = [r.getMessage() for r in caplog.records if "skipped a record" in r.getMessage()]
    assert len(warnings) == 4 and all(w.startswith(f"{tmp_path / 'episodes.jsonl'}:") for w in warnings)
    assert "in 'multi_turn', 'turns' must be a whole number up to 1000, not 'x'" in warnings[0]
    assert "in 'multi_turn', 'per_turn' must be a list of objects" in warnings[1]
    assert "in 'multi_turn', 'turns_right' must be a whole number, not [1]" in warnings[2]
    assert "'turns' must be a whole number up to 1000" in warnings[3]
