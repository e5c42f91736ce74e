"""The bench on the real llama-server (Qwen 0.5B): three tasks in every mode this textagent runs.

It asserts that every episode ends with a named stop reason, is written with its trace, and
that the report renders; not that the model succeeds.
"""
from __future__ import annotations

import pytest

from textagent.bench.report import write_report
from textagent.bench.runner import BackendFactory, Settings, Slot, load_records, mode_availability, run_bench
from textagent.bench.tasks import load_tasks

pytestmark = pytest.mark.integration

TASKS = ("single-calc-mul", "single-weather-berlin", "notool-capital-france")


def test_three_tasks_in_every_available_mode(qwen_server, tmp_path):
    modes, _ = mode_availability(["text", "constrained", "native", "baseline"])
    tasks = [t for t in load_tasks() if t.id in TASKS]
    outcome = run_bench(tasks, modes, tmp_path, workers=[Slot(qwen_server.url, 0)],
                        backend_for=BackendFactory(timeout=600),
                        settings=Settings(reply_tokens=128, max_steps=6, max_seconds=600), progress=False)
    assert not outcome.interrupted
    records = load_records(tmp_path)
    assert sorted((r["task"], r["mode"]) for r in records) == sorted((t, m) for t in TASKS for m in modes)
    for r in records:
        assert r["stop_reason"] in ("answer", "max_steps", "token_budget", "time_limit", "format_errors"), r["error"]
        assert r["trace"] and r["trace"][-1]["type"] == "result"
        assert r["usage"]["prompt_tokens"]
        assert (r["failure"] is None) == r["success"]
    report = write_report(tmp_path).read_text()
    assert "| metric | " + " | ".join(dict.fromkeys(r["mode"] for r in records)) in report
