"""Reading and writing a run directory's episodes in tests, in the form the bench writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from textagent.bench.records import Episode
from textagent.bench.runner import EPISODES_FILE, load_episodes
from textagent.jsonl import JsonlAppender
from textagent.trace import json_line


def read_episodes(run: Path) -> list[Episode]:
    return load_episodes(run)


def read_records(run: Path) -> list[dict[str, Any]]:
    """The records of a run's episodes, as dicts a test may change and write back."""
    return [e.to_record() for e in load_episodes(run)]


def episodes(records: Iterable[Mapping[str, Any] | Episode]) -> list[Episode]:
    """Episodes of records (dicts in the form the bench writes) or of Episodes, as a run loads them."""
    return [r if isinstance(r, Episode) else Episode.from_record(r) for r in records]


def write_episodes(run: Path, records: Iterable[Mapping[str, Any] | Episode]) -> Path:
    """``run/episodes.jsonl.gz`` holding ``records`` (Episodes or their records, and nothing
    else), one gzip member each."""
    path = run / EPISODES_FILE
    path.unlink(missing_ok=True)
    with JsonlAppender(path) as sink:
        for record in records:
            sink.append(json_line(record.to_record()) if isinstance(record, Episode) else json.dumps(record))
    return path
