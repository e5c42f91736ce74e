"""bench/records.py: an episode as a typed record, read back as it was written."""

from __future__ import annotations

from dataclasses import replace


def test_an_episode_reads_back_from_its_record_and_writes_the_same_record():
    from textagent.bench.records import Episode, record_problem

    episode = Episode("t1", "single", "dev", "text", 0, success=False, stop_reason="format_errors", trace=[])
    record = episode.to_record()
    assert record_problem(record) is None and record["failure"] is not None  # classified: no scorer named it
    assert {"format_errors", "tool_errors", "loop"} <= set(record)  # the counts the metrics derive
    again = Episode.from_record(record)
    assert again.to_record() == record and replace(again, failure=None) == episode  # the class is kept
    from textagent.bench.records import BfclScores

    scores = BfclScores.from_dict(_bfcl_scores())
    scored = Episode("t2", "bfcl", "test", "text", 0, success=True, failure="wrong_value", bfcl=scores)
    assert scored.to_record()["failure"] is None and scored.to_record()["bfcl"] == _bfcl_scores()
    assert Episode.from_record(scored.to_record()).bfcl == scores  # typed again
    assert "multi_turn" not in scored.to_record()


def test_usage_checks_and_calls_are_typed_on_the_episode_and_plain_in_the_record():
    import json

    from textagent.backends.base import Usage
    from textagent.bench.checking import CheckResult
    from textagent.bench.records import Episode, record_problem
    from textagent.tools import ToolOutcome

    usage = Usage(prompt_tokens=120, prompt_evaluated=20, prompt_cached=100, completion_tokens=7)
    checks = [CheckResult("numeric", False, "expected 408"), CheckResult("calls", True)]
    calls = [
        ToolOutcome("calculate", {"expression": "17 * 24"}, True, "408"),
        ToolOutcome("f", "x", False, "ERROR", "bad_arguments"),
    ]
    episode = Episode("t", "single", "dev", "text", 0, stop_reason="answer", usage=usage, checks=checks, calls=calls)
    record = json.loads(json.dumps(episode.to_record()))  # as a file holds it
    assert record["usage"] == usage.to_dict() and record["checks"][0] == {
        "type": "numeric",
        "ok": False,
        "detail": "expected 408",
    }
    assert record_problem(record) is None
    assert record["calls"][0] == {
        "name": "calculate",
        "args": {"expression": "17 * 24"},
        "ok": True,
        "output": "408",
        "error": None,
    }
    again = Episode.from_record(record)
    assert again.usage == usage and again.checks == checks and again.calls == calls
    # an older record: usage absent or with unknown counts, a check without its detail
    old = Episode.from_record(
        {
            **record,
            "usage": {"prompt_tokens": 5, "completion_tokens": None},
            "checks": [{"type": "answered", "ok": True}],
        }
    )
    assert old.usage == Usage(prompt_tokens=5) and old.checks == [CheckResult("answered", True, "")]
    assert Episode.from_record({k: v for k, v in record.items() if k != "usage"}).usage == Usage()


def test_a_multi_turn_verdict_has_its_nested_fields_checked_as_the_top_level_is():
    """Hardening h66, 22: the fields of ``multi_turn`` the report reads are named when wrong."""
    from textagent.bench.records import Episode, MultiTurnVerdict, TurnEnd, record_problem

    verdict = {"valid": True, "turns": 2, "turns_right": 2, "force_quit": False, "empty_turns": 0}
    verdict["per_turn"] = [{"turn": 0, "format_errors": 1, "refused_calls": 0}, {"turn": 1, "format_errors": 0}]
    typed = MultiTurnVerdict.from_dict(verdict)  # an older record's missing fields: their defaults
    assert typed.per_turn[1] == TurnEnd(1, "error", format_errors=0) and typed.executed == []
    record = Episode("multi_turn_base_1", "multi_turn_base", "dev", "text", 0, multi_turn=typed).to_record()
    assert MultiTurnVerdict.from_dict(record["multi_turn"]) == typed
    assert record_problem(record) is None
    assert record_problem({**record, "multi_turn": {"turns": 2}}) is None  # an older record: fields left out
    for field, value, named in [
        ("turns", "x", "in 'multi_turn', 'turns' must be a whole number up to 1000, not 'x'"),
        ("turns", 10**9, "in 'multi_turn', 'turns' must be a whole number up to 1000"),
        ("turns_right", [1], "in 'multi_turn', 'turns_right' must be a whole number, not [1]"),
        ("per_turn", [5], "in 'multi_turn', 'per_turn' must be a list of objects whose format_errors"),
        ("per_turn", [{"refused_calls": "2"}], "in 'multi_turn', 'per_turn' must be a list of objects"),
        ("force_quit", "no", "in 'multi_turn', 'force_quit' must be true or false"),
        ("format_errors", -1, "in 'multi_turn', 'format_errors' must be a whole number"),
    ]:
        problem = record_problem({**record, "multi_turn": {**verdict, field: value}})
        assert problem is not None and problem.startswith(named), (field, problem)


def test_a_trace_reads_back_as_one_run_per_question():
    """runs_of: a start line opens a question; a result line gives its answer; a question cut off
    (no result line) has no answer; steps before any start belong to the first."""
    from textagent.bench.records import runs_of

    step = {"type": "step", "raw": "TOOL: f ARGS: {}", "calls": [{"name": "f", "args": {}}], "outcomes": []}
    trace = [
        step,
        {"type": "result", "answer": "one", "stop_reason": "answer"},
        {"type": "start"},
        step,
        step,
        {"type": "result", "answer": None, "stop_reason": "max_steps"},
        {"type": "start"},
        step,
    ]
    runs = runs_of(trace, "text")
    assert [(r.answer, r.stop_reason, len(r.steps)) for r in runs] == [
        ("one", "answer", 1),
        (None, "max_steps", 2),
        (None, "error", 1),
    ]
    assert runs[0].steps[0].calls[0].name == "f" and runs_of([], "text") == []


def test_the_bench_has_one_loader_and_its_episodes_are_typed_end_to_end():
    """Episode.from_record is called in one place (runner.load_episodes); both episodes return an
    Episode, made from their live Results (no trace written and read back inside the run)."""
    import inspect
    import pathlib
    import typing

    import textagent.bench
    from textagent.bench.bfcl.episode import run_multi_turn
    from textagent.bench.episode import run_episode
    from textagent.bench.records import Episode

    bench = pathlib.Path(textagent.bench.__file__).parent
    callers = sorted(str(p.relative_to(bench)) for p in bench.rglob("*.py") if "Episode.from_record(" in p.read_text())
    assert callers == ["runner.py"]
    for run in (run_episode, run_multi_turn):
        assert typing.get_type_hints(run)["return"] is Episode
        source = inspect.getsource(inspect.getmodule(run))
        assert "StringIO" not in source and "json.loads" not in source


def _bfcl_scores(valid: bool = True) -> dict:
    verdict = {"valid": valid, "error_type": None if valid else "wrong_value", "detail": ""}
    return {"first": verdict, "feedback": verdict, "agent": verdict, "recovered": False}


def test_single_turn_bfcl_scores_have_their_nested_fields_checked_as_the_top_level_is():
    """The views of ``bfcl`` the report reads are named when wrong (``"bfcl": {}`` was KeyError 'first')."""
    from textagent.bench.records import BfclScores, Episode, record_problem

    record = Episode(
        "simple_python_0", "simple_python", "dev", "text", 0, success=True, bfcl=BfclScores.from_dict(_bfcl_scores())
    ).to_record()
    assert record_problem(record) is None
    assert record_problem({**record, "bfcl": {**_bfcl_scores(), "recovered": None}}) is None  # left out
    view = "an object whose 'valid' is true or false"
    for bfcl, named in [
        ({}, "in 'bfcl', no 'first'"),
        ({"first": {}, "feedback": {}, "agent": {}}, f"in 'bfcl', 'first' must be {view}"),
        ({**_bfcl_scores(), "agent": None}, f"in 'bfcl', 'agent' must be {view}"),
        ({**_bfcl_scores(), "feedback": {"valid": "yes"}}, f"in 'bfcl', 'feedback' must be {view}"),
        ({**_bfcl_scores(), "first": {"valid": False, "error_type": 3}}, f"in 'bfcl', 'first' must be {view}"),
        ({**_bfcl_scores(), "recovered": "no"}, "in 'bfcl', 'recovered' must be true or false"),
    ]:
        problem = record_problem({**record, "bfcl": bfcl})
        assert problem is not None and problem.startswith(named), (bfcl, problem)


def test_the_report_skips_a_single_turn_bfcl_record_with_bad_scores_naming_it(tmp_path, caplog):
    import json
    import logging

    from textagent.bench.cli import main as bench_main
    from textagent.bench.records import Episode

    def record(index: int, bfcl: dict) -> dict:
        return {
            **Episode(f"simple_python_{index}", "simple_python", "dev", "text", 0, success=True).to_record(),
            "bfcl": bfcl,
        }

    records = [record(0, _bfcl_scores()), record(1, {}), record(2, {**_bfcl_scores(), "first": {"valid": 1}})]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    with caplog.at_level(logging.WARNING, logger="textagent.bench"):
        assert bench_main(["--report", str(tmp_path)]) == 0
    assert "simple_python" in (tmp_path / "report.md").read_text()  # the good one
    warnings = [r.getMessage() for r in caplog.records if "skipped a record" in r.getMessage()]
    where = tmp_path / "episodes.jsonl"
    assert len(warnings) == 2 and warnings[0].startswith(f"{where}:2:") and warnings[1].startswith(f"{where}:3:")
    assert "in 'bfcl', no 'first'" in warnings[0] and "in 'bfcl', 'first' must be an object" in warnings[1]
