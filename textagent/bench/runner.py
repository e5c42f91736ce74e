"""Run bench episodes: one task in one mode on one backend, many of them concurrently.

    records = run_bench(tasks, ["text", "baseline"], "out/", workers=[Slot(url, 0), Slot(url, 1)],
                        backend_for=BackendFactory(api="llamacpp"))

Each episode gets fresh tools bound to its own world (``bench.world.Env``), runs the Agent in its mode (the seed-style
``baseline`` and BFCL's Prompt mode are modes of the same loop), is checked, classified and written as one JSON line to
``DIR/episodes.jsonl`` the moment it ends, with its full trace (``textagent bench --report DIR
--trace-of TASK`` prints it). A resumed run (``bench --resume``) skips the
episodes already in the file (except backend errors, which are retried).

Workers are threads, one per server slot; a worker pins its episodes to its slot with
``id_slot`` so the slot's KV cache holds that worker's conversation.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .. import prompts
from .._redact import redact
from ..agent import Agent
from ..backends.base import Capabilities, Completion, Usage
from ..errors import BackendError
from ..jsonl import read_jsonl
from ..templates import ChatFormat
from ..trace import json_line, run_records
from .agent_options import agent_options
from .backends import Slot, needs_of
from .baseline import BaselineMode
from .checking import CheckResult, Outcome, call_specs, check_task
from .progress import Progress
from .records import Episode, record_problem
from .tasks import Task
from .tools import make_toolset
from .world import Env

__all__ = [
    "EPISODES_FILE",
    "ReferenceBackend",
    "Settings",
    "check_suite",
    "episode_key",
    "load_records",
    "run_bench",
    "run_episode",
]

EPISODES_FILE = "episodes.jsonl"
log = logging.getLogger("textagent.bench")


@dataclass
class Settings:
    reply_tokens: int = 256
    max_steps: int | None = None  # caps every task's own max_steps
    max_repeats: int | None = None  # opt-in: replies in a row with the same calls end the run (Agent.max_repeats)
    max_seconds: float | None = 300.0  # per episode
    observation_limit: int = 4000
    temperature: float = 0.0
    seed: int = 0  # episode seed = seed + repeat index
    pin_slots: bool = True
    checks: str = "none"  # textagent.checks.from_names(): Agent modes run these
    examples: str = "per-task"  # "per-task": the pool's closest to each question; "all": the whole pool
    stream: bool = False  # text modes stream, closed early after complete calls (EarlyStop)
    first_reply: bool = False  # BFCL: stop each episode after its first reply (BFCL's own view)
    native_examples: bool = False  # ablation: native modes shown the text modes' placeholder examples
    grouped_listing: bool = False  # text modes: words the tools' descriptions share said once (prompts.tool_listing)
    example_style: str = prompts.DEFAULT_EXAMPLE_STYLE  # how placeholder examples show results (prompts.EXAMPLE_STYLES)
    example_tool: str = prompts.DEFAULT_EXAMPLE_TOOL  # which tools placeholder examples show (prompts.EXAMPLE_TOOLS)


# --------------------------------------------------------------------------------------------
# One episode
# --------------------------------------------------------------------------------------------


def episode_key(record: Mapping[str, Any]) -> tuple[str, str, int]:
    return (str(record.get("task")), str(record.get("mode")), int(record.get("repeat", 0)))


def run_episode(
    task: Task,
    mode: str,
    backend: Any,
    *,
    chat_format: str | ChatFormat = "chatml",
    settings: Settings | None = None,
    slot: int | None = None,
    endpoint: str | None = None,
    repeat: int = 0,
) -> dict[str, Any]:
    """Run one task in one mode and return its record (checked and classified)."""
    settings = settings or Settings()
    from .bfcl.tasks import is_multi_turn

    if is_multi_turn(task):
        return _multi_turn_episode(
            task, mode, backend, chat_format=chat_format, settings=settings, slot=slot, endpoint=endpoint, repeat=repeat
        )
    env = Env(lights=dict(task.setup.get("lights", {})))
    tools, name_map, documents = _episode_tools(task, mode, env)
    if settings.examples == "all" and getattr(tools, "max_examples", None) is not None:
        tools.max_examples = None  # the same examples for every question of a tool set
    options: dict[str, Any] = {"temperature": settings.temperature, "seed": settings.seed + repeat}
    if slot is not None and settings.pin_slots:
        options["id_slot"] = slot
    max_steps = min(task.max_steps, settings.max_steps) if settings.max_steps else task.max_steps
    if settings.first_reply:
        max_steps = 1
    started = time.monotonic()
    error_text, agent, start = None, None, None
    try:
        question, kwargs = _mode_options(task, mode, tools, documents, settings)
        agent = Agent(
            backend,
            tools,
            max_steps=max_steps,
            max_seconds=settings.max_seconds,
            reply_tokens=settings.reply_tokens,
            observation_limit=settings.observation_limit,
            chat_format=chat_format,
            **kwargs,
            **options,
        )
        start = agent.start_record(question)
        result = agent.run(question)
    except Exception as exc:  # a harness or mode failure is recorded, never fatal
        result = None
        error_text = f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - started
    # the trace from the run itself: its steps so far when it raised
    trace = run_records(start, result.steps if result is not None else agent.steps if agent is not None else [], result)
    calls, attempted, answer, stop_reason, usage = _what_happened(result)
    answered = stop_reason == "answer"
    if result is not None and result.error is not None:
        error_text = f"{type(result.error).__name__}: {result.error}"
    attempted = [name_map.get(n, n) for n in attempted]
    outcome = Outcome(answer=answer, answered=answered, calls=calls, attempted=attempted, state=env.state())
    bfcl_scores = None
    if task.bfcl is not None:
        from .bfcl.score import score_steps

        bfcl_scores = score_steps(task.bfcl, result.steps if result is not None else [], name_map)
        first = bfcl_scores["first"]
        success, checks = first["valid"], [CheckResult("bfcl", first["valid"], first["detail"])]
    else:
        success, checks = check_task(task, outcome)
    failure = None
    if bfcl_scores is not None and not success:
        failure = "backend_error" if stop_reason in ("backend_error", "error") else bfcl_scores["first"]["error_type"]
    return _episode(
        task,
        mode,
        repeat,
        success=success,
        stop_reason=stop_reason,
        answer=answer,
        steps=len(result.steps) if result is not None else 0,
        seconds=round(seconds, 4),
        usage=usage,
        checks=[c.to_dict() for c in checks],
        calls=[{**c, "output": c["output"][:1000]} for c in calls],
        attempted=attempted,
        state={"lights": {k: v for k, v in env.lights.items() if v}},
        endpoint=endpoint,
        slot=slot,
        error=error_text,
        trace=trace,
        failure=failure,
        bfcl=bfcl_scores,
    ).to_record()


def _mode_options(
    task: Task, mode: str, tools: Any, documents: list[dict[str, Any]], settings: Settings
) -> tuple[str, dict[str, Any]]:
    """The question as ``mode`` asks it, and the Agent options of the mode under the run's settings."""
    item = task.bfcl
    if mode == "baseline":
        return task.question, agent_options(mode, settings, tools, comparison=BaselineMode())
    if mode == "bfcl-prompt":
        from .bfcl.prompt_mode import BfclPromptMode

        comparison = BfclPromptMode(documents, item.system_text if item is not None else "")
        question = item.user_text if item is not None else task.question
        return question, agent_options(mode, settings, tools, comparison=comparison)
    return task.question, agent_options(mode, settings, tools, question=task.question)


def _what_happened(result: Any) -> tuple[list[dict[str, Any]], list[str], str | None, str, dict[str, Any]]:
    """From a run's result (None: it raised): the calls run, the tool names the model tried, the
    answer, the stop reason and the usage."""
    if result is None:
        return [], [], None, "error", Usage().to_dict()
    calls: list[dict[str, Any]] = [
        {"name": o.name, "args": o.args, "ok": o.ok, "output": o.output, "error": o.error}
        for s in result.steps
        for o in s.outcomes
    ]
    attempted: list[str] = []
    for s in result.steps:
        names = [c.name for c in s.calls] or [o.name for o in s.outcomes]
        if not names and s.decode_failure and not s.rescued:
            # native: a call written into content is still a call the model tried to make
            calls_in_content = s.details.get("content_calls") or []
            names = [str(c.get("name")) for c in calls_in_content if isinstance(c, dict)]
        attempted.extend(names)
    return calls, attempted, result.answer, result.stop_reason, result.usage.to_dict()


def _episode(task: Task, mode: str, repeat: int, *, endpoint: str | None, **fields: Any) -> Episode:
    """The Episode of ``task`` in ``mode``: what the task says of itself, and ``fields``."""
    return Episode(
        task=task.id,
        kind=task.kind,
        split=task.split,
        mode=mode,
        repeat=repeat,
        needs_tools=task.needs_tools,
        needs_no_tool=task.needs_no_tool,
        required_tools=sorted(task.required_tools),
        call_specs=call_specs(task),
        endpoint=None if endpoint is None else redact(endpoint),
        **fields,
    )


def _multi_turn_episode(
    task: Task,
    mode: str,
    backend: Any,
    *,
    chat_format: str | ChatFormat,
    settings: Settings,
    slot: int | None,
    endpoint: str | None,
    repeat: int,
) -> dict[str, Any]:
    """A BFCL multi-turn item (bench.bfcl.episode), as a record of the same form as the others."""
    from .bfcl.episode import run_multi_turn

    options: dict[str, Any] = {"temperature": settings.temperature, "seed": settings.seed + repeat}
    if slot is not None and settings.pin_slots:
        options["id_slot"] = slot
    out = run_multi_turn(task.bfcl, mode, backend, chat_format=chat_format, settings=settings, options=options)
    mt = out["multi_turn"]
    failure = "backend_error" if out["stop_reason"] in ("backend_error", "error") else str(mt.get("error_type"))
    episode = _episode(
        task,
        mode,
        repeat,
        success=out["success"],
        stop_reason=out["stop_reason"],
        answer=out["answer"],
        steps=out["steps"],
        seconds=out["seconds"],
        usage=out["usage"],
        checks=[CheckResult("bfcl_multi_turn", out["success"], mt.get("error") or "").to_dict()],
        calls=out["calls"],
        attempted=out["attempted"],
        endpoint=endpoint,
        slot=slot,
        error=out["error"],
        trace=out["trace"],
        multi_turn=mt,
        failure=failure,
    )
    episode.needs_tools, episode.needs_no_tool, episode.required_tools, episode.call_specs = True, False, [], []
    return episode.to_record()


def _episode_tools(task: Task, mode: str, env: Env) -> tuple[Any, dict[str, str], list[dict[str, Any]]]:
    """(tool set, {tool name: name to score it under}, the documents bfcl-prompt shows) for one
    episode: a BFCL item's functions (renamed for native modes), or the suite's bench tools."""
    if task.bfcl is not None:
        from .bfcl.schema import make_tools
        from .bfcl.tasks import item_documents

        documents = item_documents(task.bfcl)
        tools, names = make_tools(documents, native=needs_of(mode).tools)
        return tools, names, documents
    from .bfcl.schema import function_docs

    tools = make_toolset(task.tools, env, task.mcp)
    return tools, {}, function_docs(tools)


class ReferenceBackend:
    """Replays each task's ``reference`` replies: the model-free check that a suite's tasks are
    solvable and its checkers right (``textagent bench --check-suite``). It finds the task from
    the conversation (``messages``) and answers with the reply for the current step."""

    capabilities = Capabilities()  # text replies only: no grammar, no chat(), no streaming

    def __init__(self, tasks: Iterable[Task]):
        self.by_question = {prompts.task(t.question): t for t in tasks}

    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        messages = options.get("messages") or []
        at, task = None, None
        for i, message in enumerate(messages):
            if message.get("role") == "user" and message.get("content") in self.by_question:
                at, task = i, self.by_question[message["content"]]
        if task is None or at is None:
            raise BackendError("ReferenceBackend: no task of the suite in this conversation")
        step = sum(1 for m in messages[at + 1 :] if m.get("role") == "assistant")
        if step >= len(task.reference):
            raise BackendError(
                f"ReferenceBackend: task {task.id} has {len(task.reference)} reference replies; "
                f"step {step + 1} asked for another"
            )
        text = task.reference[step]
        return Completion(
            text,
            finish_reason="stop",
            usage=Usage(
                prompt_tokens=len(prompt) // 4,
                prompt_evaluated=len(prompt) // 4,
                prompt_cached=0,
                completion_tokens=len(text) // 4 + 1,
            ),
        )


def check_suite(tasks: Sequence[Task]) -> list[tuple[Task, dict[str, Any] | None]]:
    """Replay every task's reference in text mode: (task, record) pairs; record None when the
    task has no reference."""
    backend = ReferenceBackend(tasks)
    return [(t, run_episode(t, "text", backend) if t.reference else None) for t in tasks]


# --------------------------------------------------------------------------------------------
# Many episodes
# --------------------------------------------------------------------------------------------


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Every complete JSON line of an episodes file (a line cut off by a crash is skipped)."""
    path = Path(path)
    if path.is_dir():
        path = path / EPISODES_FILE
    if not path.exists():
        return []
    records = []
    for line in read_jsonl(path, bad="keep"):
        # a record skipped is run again on resume; nothing else is lost
        if line.error is not None:
            log.warning("%s: skipped a record that is not whole (%s)", line.where, line.error)
        elif (problem := record_problem(line.value)) is not None:
            log.warning("%s: skipped a record that cannot be read (%s)", line.where, problem)
        else:
            records.append(line.value)
    return records


@dataclass
class BenchOutcome:
    records: list[dict[str, Any]] = field(default_factory=list)  # finished this session
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
    """Run every (task, mode, repeat) not already in ``out_dir/episodes.jsonl`` on the workers.

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
    path = out / EPISODES_FILE
    done = {episode_key(r) for r in load_records(path) if r.get("stop_reason") not in ("backend_error", "error")}
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
    sink = _append_to(path)

    def finish(record: dict[str, Any]) -> None:
        # the trace is in the record (`bench --report DIR --trace-of TASK` prints it): no file per episode
        with lock:
            if sink.closed:  # finished after Ctrl-C: the run has already been reported
                return
            sink.write(json_line(record) + "\n")
            sink.flush()
            result.records.append(record)
            bar.update(record)

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
                    record = run_episode(
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
                    record = _error_record(task, mode, rep, slot, exc)
                if stop.is_set() and not record.get("success") and record.get("stop_reason") == "backend_error":
                    return  # interrupted mid-request: not a real result
                finish(record)

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


def _append_to(path: Path) -> IO[str]:
    """``path`` open for appending records; a line cut off by a crash is ended first, so the next
    record starts on a fresh line."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            needs_newline = f.read(1) != b"\n"
    else:
        needs_newline = False
    sink = open(path, "a", encoding="utf-8")  # noqa: SIM115 - the caller owns it
    if needs_newline:
        sink.write("\n")
    return sink


def _turned(modes: Sequence[str], i: int) -> list[str]:
    k = i % len(modes) if modes else 0
    return [*modes[k:], *modes[:k]]


def _safe(name: str) -> str:
    return re.sub(r"[^\w.+-]", "_", name)


def _error_record(task: Task, mode: str, repeat: int, slot: Slot, exc: BaseException) -> dict[str, Any]:
    return _episode(
        task,
        mode,
        repeat,
        stop_reason="backend_error",
        failure="backend_error",
        endpoint=slot.endpoint,
        slot=slot.slot,
        error=f"{type(exc).__name__}: {exc}",
    ).to_record()
