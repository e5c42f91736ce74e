"""Bench test helpers: run directories made of reference and broken episodes of the suite."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from benchruns import write_episodes

from textagent.backends.scripted import ScriptedBackend
from textagent.bench.episode import run_episode
from textagent.bench.reference import ReferenceBackend
from textagent.bench.report import RUN_FILE
from textagent.bench.tasks import load_tasks

SUITE = {t.id: t for t in load_tasks()}
IDS = [
    "single-calc-mul",
    "single-weather-berlin",
    "notool-capital-france",
    "chain-calc-seed",
    "bare-is-prime",
    "typed-currency",
    "distract-divide",
]


def _make_run(path, *, broken=(), modes=("text", "baseline"), meta=None):
    """A run directory: reference replies (solved) except for the tasks in ``broken``."""
    path.mkdir(parents=True, exist_ok=True)
    tasks = [SUITE[i] for i in IDS]
    good = ReferenceBackend(tasks)
    write_episodes(
        path,
        (
            run_episode(
                task, mode, ScriptedBackend(["ANSWER: no idea"]) if task.id in broken else good, chat_format="chatml"
            )
            for task in tasks
            for mode in modes
        ),
    )
    meta = {
        "modes": list(modes),
        "started": "2026-11-29T12:00:00+00:00",
        "model": "tiny",
        "planned": 99,
        "machine": {"cpu": "Test CPU", "cores": 2, "system": "Linux", "python": "3.11"},
        "command": "textagent bench --out x",
        "unavailable": {"native": "no mode= yet"},
        **(meta or {}),
    }
    (path / RUN_FILE).write_text(json.dumps(meta))
    return path


@pytest.fixture
def make_run() -> Callable[..., Path]:
    """``make_run(path, broken=(), modes=("text", "baseline"), meta=None)``: a run directory of
    reference replies (solved) except for the tasks in ``broken``."""
    return _make_run
