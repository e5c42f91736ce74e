"""One bench episode: one task in one mode on one backend, run, checked and classified.

    episode = run_episode(task, "text", backend, settings=Settings(max_steps=2))

The episode gets fresh tools bound to its own world (``bench.world.Env``) and runs the Agent in
its mode (the seed-style ``baseline`` and BFCL's Prompt mode are modes of the same loop); the
Episode holds the run's Result, whose counts are the episode's, and its trace
(``textagent bench --report DIR --trace-of TASK`` prints it). A BFCL multi-turn item runs
through ``bench.bfcl.episode`` and comes back as an Episode of the same form.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from .. import prompts
from .._redact import redact
from ..agent import Agent
from ..backends.base import Usage
from ..retry import ODDS, VERIFY
from ..steps import Result
from ..templates import ChatFormat
from ..tools import ToolOutcome
from ..trace import run_records
from .agent_options import agent_options
from .checking import CheckResult, Outcome, call_specs, check_task
from .mode_table import bench_mode
from .records import Episode
from .tasks import Task
from .tools import make_toolset
from .world import Env

__all__ = ["Settings", "episode_of", "run_episode"]


@dataclass
class Settings:
    reply_tokens: int = 256
    max_steps: int | None = None  # caps every task's own max_steps
    max_repeats: int | None = None  # opt-in: replies in a row with the same calls end the run (Agent.max_repeats)
    max_call_errors: int | None = None  # opt-in: replies in a row with a failed call end the run
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
    retry: str = "none"  # textagent's own modes: what the loop does after a failed reply (RETRY_PARTS, comma-separated)
    retry_temperature: float = 0.7  # the sampled retry's temperature (with "sample" in retry)
    retry_odds: float = ODDS  # the odds' threshold (with "odds" in retry)
    retry_verify: float = VERIFY  # the check's threshold (with "verify" in retry)


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
) -> Episode:
    """Run one task in one mode and return its Episode (checked and classified)."""
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
    # the run itself: its steps so far when it raised
    steps = result.steps if result is not None else agent.steps if agent is not None else []
    run = result if result is not None else Result(None, "error", list(steps), Usage(), seconds, mode=mode)
    trace = run_records(start, steps, result)
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
        first = bfcl_scores.first
        success, checks = first.valid, [CheckResult("bfcl", first.valid, first.detail)]
    else:
        success, checks = check_task(task, outcome)
    failure = None
    if bfcl_scores is not None and not success:
        failure = "backend_error" if stop_reason in ("backend_error", "error") else bfcl_scores.first.error_type
    return episode_of(
        task,
        mode,
        repeat,
        success=success,
        stop_reason=stop_reason,
        answer=answer,
        steps=len(result.steps) if result is not None else 0,
        seconds=round(seconds, 4),
        usage=usage,
        checks=list(checks),
        calls=[replace(c, output=c.output[:1000]) for c in calls],
        attempted=attempted,
        state={"lights": {k: v for k, v in env.lights.items() if v}},
        endpoint=endpoint,
        slot=slot,
        error=error_text,
        trace=trace,
        failure=failure,
        bfcl=bfcl_scores,
        runs=[run],
    )


def _mode_options(
    task: Task, mode: str, tools: Any, documents: list[dict[str, Any]], settings: Settings
) -> tuple[str, dict[str, Any]]:
    """The question as ``mode`` asks it, and the Agent options of the mode under the run's settings."""
    item = task.bfcl
    if bench_mode(mode).bfcl_words and item is not None:
        options = agent_options(mode, settings, tools, documents=documents, system=item.system_text)
        return item.user_text, options
    return task.question, agent_options(mode, settings, tools, documents=documents, question=task.question)


def _what_happened(result: Any) -> tuple[list[ToolOutcome], list[str], str | None, str, Usage]:
    """From a run's result (None: it raised): the calls run, the tool names the model tried, the
    answer, the stop reason and the usage."""
    if result is None:
        return [], [], None, "error", Usage()
    calls = [o for s in result.steps for o in s.outcomes]
    attempted: list[str] = []
    for s in result.steps:
        names = [c.name for c in s.calls] or [o.name for o in s.outcomes]
        if not names and s.decode_failure and not s.rescued:
            # native: a call written into content is still a call the model tried to make
            calls_in_content = s.details.get("content_calls") or []
            names = [str(c.get("name")) for c in calls_in_content if isinstance(c, dict)]
        attempted.extend(names)
    return calls, attempted, result.answer, result.stop_reason, result.usage


def episode_of(task: Task, mode: str, repeat: int, *, endpoint: str | None, **fields: Any) -> Episode:
    """The Episode of ``task`` in ``mode``: what the task says of itself, and ``fields``; a failure
    its scorer did not name is classified (facts.classify), as its record says."""
    episode = Episode(
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
    episode.failure = episode.failure_class
    return episode


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
) -> Episode:
    """A BFCL multi-turn item (bench.bfcl.episode), an Episode of the same form as the others."""
    from .bfcl.episode import run_multi_turn

    assert task.bfcl is not None  # a multi-turn task is a BFCL item
    options: dict[str, Any] = {"temperature": settings.temperature, "seed": settings.seed + repeat}
    if slot is not None and settings.pin_slots:
        options["id_slot"] = slot
    episode = run_multi_turn(
        task.bfcl, mode, backend, chat_format=chat_format, settings=settings, options=options, repeat=repeat
    )
    episode.task, episode.kind, episode.split = task.id, task.kind, task.split
    episode.endpoint, episode.slot = None if endpoint is None else redact(endpoint), slot
    return episode


def _episode_tools(task: Task, mode: str, env: Env) -> tuple[Any, dict[str, str], list[dict[str, Any]]]:
    """(tool set, {tool name: name to score it under}, the documents bfcl-prompt shows) for one
    episode: a BFCL item's functions (renamed for native modes), or the suite's bench tools."""
    if task.bfcl is not None:
        from .bfcl.schema import make_tools
        from .bfcl.tasks import item_documents

        documents = item_documents(task.bfcl)
        tools, names = make_tools(documents, native=bench_mode(mode).native_names)
        return tools, names, documents
    from .bfcl.schema import function_docs

    tools = make_toolset(task.tools, env, task.mcp)
    return tools, {}, function_docs(tools)
