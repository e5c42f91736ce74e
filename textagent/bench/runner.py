"""Run many bench episodes concurrently, one JSON line each, resumable.

    outcome = run_bench(tasks, ["text", "baseline"], "out/", workers=[Slot(url, 0), Slot(url, 1)],
                         backend_for=BackendFactory(api="llamacpp"))

Each episode (``bench.episode.run_episode``) is written as one JSON line to
``DIR/episodes.jsonl.gz`` the moment it ends, with its full trace (each line a gzip member of its
own: ``jsonl.JsonlAppender``). A resumed run (``bench --resume``) skips the episodes already in the
file (except backend errors, which are retried). A run written before the file was compressed
(``DIR/episodes.jsonl``) is read, and resumed, in its own form.

Workers are threads, one per server slot; a worker pins its episodes to its slot with
``id_slot`` so the slot's KV cache holds that worker's conversation.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..jsonl import JsonlAppender, read_jsonl
from ..trace import json_line
from .backends import Slot
from .episode import Settings, episode_of, run_episode
from .progress import Progress
from .records import Episode, record_problem
from .tasks import Task

__all__ = [
    "EPISODES_FILE",
    "PLAIN_EPISODES_FILE",
    "BenchOutcome",
    "episode_key",
    "episodes_file",
    "load_episodes",
    "run_bench",
]

EPISODES_FILE = "episodes.jsonl.gz"
PLAIN_EPISODES_FILE = "episodes.jsonl"  # runs written before the episodes were compressed
log = logging.getLogger("textagent.bench")


def episode_key(episode: Episode) -> tuple[str, str, int]:
    return (episode.task, episode.mode, episode.repeat)


def episodes_file(path: str | Path) -> Path:
    """The episodes file of a run directory (``path`` itself when it is a file): the compressed
    one, else an older run's plain one when only that is there."""
    path = Path(path)
    if not path.is_dir():
        return path
    if not (path / EPISODES_FILE).exists() and (path / PLAIN_EPISODES_FILE).exists():
        return path / PLAIN_EPISODES_FILE
    return path / EPISODES_FILE


def load_episodes(path: str | Path) -> list[Episode]:
    """Every episode of a run directory's episodes file, or of the file ``path``, compressed or
    not, each record read once (Episode.from_record); a line cut off by a crash, or a record that
    cannot be read, is skipped with a warning."""
    path = episodes_file(path)
    if not path.exists():
        return []
    episodes = []
    for line in read_jsonl(path, bad="keep"):
        # a record skipped is run again on resume; nothing else is lost
        if line.error is not None:
            log.warning("%s: skipped a record that is not whole (%s)", line.where, line.error)
        elif (problem := record_problem(line.value)) is not None:
            log.warning("%s: skipped a record that cannot be read (%s)", line.where, problem)
        else:
            episodes.append(Episode.from_record(line.value))
    return episodes


@dataclass
class BenchOutcome:
    episodes: list[Episode] = field(default_factory=list)  # finished this session
    skipped: int = 0  # already in the file (resumed)
    interrupted: bool = False
    planned: int = 0


def run_bench(
    tasks: Sequence[Task],
    modes: Sequence[str],
    out_dir: str | Path,
    *,
    workers: Sequence[Slot],
    backend_for: Callable[[str, Slot], tuple[Any, Any]],
    settings: Settings | None = None,
    repeat: int = 1,
    progress: bool | Progress = True,
    stream: IO[str] | None = None,
) -> BenchOutcome:
    """Run every (task, mode, repeat) not already in ``out_dir``'s episodes file on the workers.

    Episodes are interleaved (for each repeat, for each task, every mode) so that a partial run
    still compares the modes on the same tasks; a task's modes run one after another on the same
    worker (and so the same server slot). The mode that goes first turns with each task:
    modes that share a first prompt (text, constrained, baseline) find it cached when another ran
    it before, so the first one pays for all; turning shares that cost out evenly. Each record is appended and flushed as soon as
    its episode ends; Ctrl-C stops handing out episodes and returns what finished
    (``interrupted=True``); episodes still running are abandoned.
    """
    settings = settings or Settings()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = episodes_file(out)
    done = {episode_key(e) for e in load_episodes(path) if e.stop_reason not in ("backend_error", "error")}
    plan = [(task, mode, r) for r in range(repeat) for i, task in enumerate(tasks) for mode in _turned(modes, i)]
    todo = [p for p in plan if (p[0].id, p[1], p[2]) not in done]
    result = BenchOutcome(skipped=len(plan) - len(todo), planned=len(plan))
    if isinstance(progress, Progress):
        bar = progress
    else:
        bar = Progress(len(todo), stream=stream, enabled=bool(progress))
    jobs = _jobs(todo)
    stop = threading.Event()
    lock = threading.Lock()
    sink = JsonlAppender(path)

    def finish(episode: Episode) -> None:
        # the trace is in the record (`bench --report DIR --trace-of TASK` prints it): no file per episode
        with lock:
            if sink.closed:  # finished after Ctrl-C: the run has already been reported
                return
            sink.append(json_line(episode.to_record()))
            result.episodes.append(episode)
            bar.update(episode)

    def work(slot: Slot) -> None:
        while not stop.is_set():
            try:
                group = jobs.get_nowait()
            except queue.Empty:
                return
            for task, mode, rep in group:
                if stop.is_set():
                    return
                try:
                    backend, chat_format = backend_for(mode, slot)
                    episode = run_episode(
                        task,
                        mode,
                        backend,
                        chat_format=chat_format,
                        settings=settings,
                        slot=slot.slot,
                        endpoint=slot.endpoint,
                        repeat=rep,
                    )
                except Exception as exc:  # e.g. the server's template could not be read
                    episode = _error_episode(task, mode, rep, slot, exc)
                if stop.is_set() and not episode.success and episode.stop_reason == "backend_error":
                    return  # interrupted mid-request: not a real result
                finish(episode)

    threads = [
        threading.Thread(target=work, args=(slot,), name=f"bench-{i}", daemon=True) for i, slot in enumerate(workers)
    ]
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        result.interrupted = True
    finally:
        with lock:
            sink.close()
            bar.close()
    return result


def _jobs(todo: Sequence[tuple[Task, str, int]]) -> queue.Queue[list[tuple[Task, str, int]]]:
    """One job per (task, repeat): a worker runs that task's modes one after another on its own
    slot, so modes that send the same first prompt (text, constrained, baseline) find it in the
    slot's KV cache instead of each evaluating it on another slot at the same time."""
    grouped: dict[tuple[str, int], list[tuple[Task, str, int]]] = {}
    for item in todo:
        grouped.setdefault((item[0].id, item[2]), []).append(item)
    jobs: queue.Queue[list[tuple[Task, str, int]]] = queue.Queue()
    for group in grouped.values():
        jobs.put(group)
    return jobs


def _turned(modes: Sequence[str], i: int) -> list[str]:
    k = i % len(modes) if modes else 0
    return [*modes[k:], *modes[:k]]


def _error_episode(task: Task, mode: str, repeat: int, slot: Slot, exc: BaseException) -> Episode:
    return episode_of(
        task,
        mode,
        repeat,
        stop_reason="backend_error",
        failure="backend_error",
        endpoint=slot.endpoint,
        slot=slot.slot,
        error=f"{type(exc).__name__}: {exc}",
    )
