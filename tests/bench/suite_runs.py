"""Suite tasks run on a scripted backend as the bench runs them, and episodes read back from
records, for the bench's tests."""

from __future__ import annotations

from textagent.backends.scripted import ScriptedBackend
from textagent.bench.episode import Settings, run_episode
from textagent.bench.records import Episode
from textagent.bench.tasks import load_tasks

SUITE = {t.id: t for t in load_tasks()}

#: a call of the suite's weather tool, the city to fill in
W = 'TOOL: get_weather ARGS: {"city": "%s"}'


def episode(task_id, replies, *, mode="text", honour_stop=True, **settings) -> Episode:
    """A suite task run in ``mode`` on a backend that gives ``replies`` in turn."""
    backend = ScriptedBackend(replies, honour_stop=honour_stop)
    return run_episode(SUITE[task_id], mode, backend, chat_format="chatml", settings=Settings(**settings))


def read_back(**fields) -> Episode:
    """An Episode read from a record of these fields (a task, text mode and an answer unless given)."""
    return Episode.from_record({"task": "t", "mode": "text", "stop_reason": "answer", **fields})
