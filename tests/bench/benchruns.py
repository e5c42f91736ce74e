"""Reading and writing a run directory's episodes in tests, in the form the bench writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from textagent.bench.runner import EPISODES_FILE, load_records
from textagent.jsonl import JsonlAppender


def read_episodes(run: Path) -> list[dict[str, Any]]:
    return load_records(run)


def write_episodes(run: Path, records: Iterable[Mapping[str, Any]]) -> Path:
    """``run/episodes.jsonl.gz`` holding ``records`` (and nothing else), one gzip member each."""
    path = run / EPISODES_FILE
    path.unlink(missing_ok=True)
    with JsonlAppender(path) as sink:
        for record in records:
            sink.append(json.dumps(record))
    return path
