"""The bench on the real llama-server (Qwen 0.5B): three tasks in every mode this textagent runs.

It asserts that every episode ends with a named stop reason, is written with its trace, that
the report renders, and that the text modes solve the tasks the 0.5B solves on the suite (a
broken prompt, parser or tool path shows as a failed task, not as a different number).
"""

from __future__ import annotations

import pytest

from textagent.bench.backends import BackendFactory, Slot, mode_availability
from textagent.bench.episode import Settings
from textagent.bench.report import write_report
from textagent.bench.runner import load_episodes, run_bench
from textagent.bench.tasks import load_tasks

pytestmark = pytest.mark.integration

TASKS = ("single-calc-mul", "single-weather-berlin", "notool-capital-france")


def test_three_tasks_in_every_available_mode(qwen_server, tmp_path):
    modes, _ = mode_availability(["text", "constrained", "native", "baseline"])
    tasks = [t for t in load_tasks() if t.id in TASKS]
    outcome = run_bench(
        tasks,
        modes,
        tmp_path,
        workers=[Slot(qwen_server.url, 0)],
        backend_for=BackendFactory(timeout=600),
        settings=Settings(reply_tokens=128, max_steps=6, max_seconds=600),
        progress=False,
    )
    assert not outcome.interrupted
    records = [e.to_record() for e in load_episodes(tmp_path)]  # each episode as its record says it
    assert sorted((r["task"], r["mode"]) for r in records) == sorted((t, m) for t in TASKS for m in modes)
    for r in records:
        assert r["stop_reason"] in ("answer", "max_steps", "token_budget", "time_limit", "format_errors"), r["error"]
        assert r["trace"] and r["trace"][-1]["type"] == "result"
        assert r["usage"]["prompt_tokens"]
        assert (r["failure"] is None) == r["success"]
    solved = {(r["task"], r["mode"]) for r in records if r["success"]}
    for mode in ("text", "constrained"):
        assert sum((t, mode) in solved for t in TASKS) >= 2, [(r["task"], r["mode"], r["failure"]) for r in records]
    report = write_report(tmp_path).read_text()
    assert "| metric | " + " | ".join(dict.fromkeys(r["mode"] for r in records)) in report


def test_bfcl_items_in_every_mode_on_the_real_server(qwen_server, tmp_path):
    """Two real BFCL items (a parallel one with a dotted name, an irrelevance one) through every
    mode, BFCL's prompt included: each episode is scored in the three views and reported."""
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks

    fetch_wheel()  # the pinned bfcl-eval wheel (1.9 MB from PyPI), verified and cached
    modes, _ = mode_availability(["text", "constrained", "native", "native+fallback", "bfcl-prompt", "baseline"])
    tasks = [t for t in bfcl_tasks("bfcl:parallel,irrelevance") if t.id in ("parallel_0", "irrelevance_1")]
    outcome = run_bench(
        tasks,
        modes,
        tmp_path,
        workers=[Slot(qwen_server.url, 0)],
        backend_for=BackendFactory(timeout=600),
        settings=Settings(reply_tokens=128, max_seconds=600),
        progress=False,
    )
    assert not outcome.interrupted
    records = [e.to_record() for e in load_episodes(tmp_path)]  # each episode as its record says it
    assert len(records) == 2 * len(modes) and "bfcl-prompt" in modes
    for r in records:
        assert r["error"] is None and r["stop_reason"] != "backend_error", r["error"]
        assert set(r["bfcl"]) == {"first", "feedback", "agent", "recovered"}
        assert r["success"] == r["bfcl"]["first"]["valid"]
        assert r["success"] or r["failure"] in (
            "wrong_function",
            "unknown_parameter",
            "missing_parameter",
            "wrong_type",
            "wrong_value",
            "wrong_count",
            "no_call",
            "irrelevance_call",
            "unparseable",
        )
    report = write_report(tmp_path).read_text()
    assert "## BFCL (single-turn AST categories)" in report and "| parallel |" in report
