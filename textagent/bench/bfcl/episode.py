"""One BFCL multi-turn item run as one conversation of the Agent, scored by BFCL's checker.

Each user turn is a question of the same conversation (``Agent.run`` goes on with it); the
model's calls run on BFCL's simulators through BFCL's executor; a turn ends when the model
answers, when its replies stop being usable (the modes that end a turn there: ``bfcl-prompt``,
the feedback ablations), when a limit the run opts into ends it (``max_repeats``,
``max_call_errors``), or after MAX_CALL_STEPS steps and one more, when the item is
force-quit as BFCL force-quits it. A held-out function (``multi_turn_miss_func``) is added at its
turn: ``bfcl-prompt`` gets BFCL's own user message with the documents, the other modes the
tool itself (text modes list it in that turn; native modes send it in ``tools``) with the
message BFCL's FC mode sends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...agent import Agent
from ...backends.base import Usage
from ...steps import Result
from ...tools import Tool, ToolOutcome, ToolSet
from ...trace import run_records
from ..agent_options import agent_options
from ..checking import CheckResult
from ..mode_table import bench_mode
from ..records import Episode, MultiTurnVerdict, TurnEnd
from .multi_turn import MAX_CALL_STEPS, MultiTurnItem, Simulator, call_string, score_item
from .prompt_mode import held_out_message
from .schema import native_names, to_json_schema

__all__ = ["FC_HELD_OUT", "run_multi_turn", "simulator_tools"]

#: BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC: the user turn of a held-out function.
FC_HELD_OUT = "I have updated some more functions you can choose from. What about now?"


def simulator_tools(
    docs: Sequence[Mapping[str, Any]], sim: Simulator, executed: list[str], *, native: bool = False, check: bool = True
) -> tuple[ToolSet, dict[str, str]]:
    """(tools, {tool name: BFCL name}) whose calls run on ``sim``; the string of each call that
    ran to its end is appended to ``executed``. With ``check`` a call is validated against the
    document first (arguments it does not have are refused: a located error for the model);
    without, every call of a listed function goes to BFCL's executor as BFCL's Prompt mode
    sends it, and the model reads the executor's own error."""
    names = [str(d["name"]) for d in docs]
    mapping = native_names(names) if native else {n: n for n in names}
    back = {v: k for k, v in mapping.items()}
    tools = []
    for doc in docs:
        params: dict[str, Any] = {"type": "object"}
        if check:
            params = to_json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
            params.update(type="object", additionalProperties=False)
            params.setdefault("properties", {})
        tools.append(
            Tool(
                back[str(doc["name"])],
                str(doc.get("description") or ""),
                params,
                fn=_runner(sim, str(doc["name"]), executed),
            )
        )
    return ToolSet(tools, extra_args="error"), mapping


def _runner(sim: Simulator, name: str, executed: list[str]) -> Any:
    def run(**args: Any) -> str:
        call = call_string(name, args)
        result = sim.execute(name, args)
        # only a call that ran to its end is replayed by the scoring: one that timed out
        # (SimulatorTimeout) may never end, and its replay would hang the scoring in its place
        executed.append(call)
        return result

    return run


def run_multi_turn(
    item: MultiTurnItem,
    mode: str,
    backend: Any,
    *,
    chat_format: Any,
    settings: Any,
    options: Mapping[str, Any],
    repeat: int = 0,
) -> Episode:
    """Run ``item`` in ``mode``: its Episode, holding the Agent's run of each turn, its trace made
    from them, and ``multi_turn``, BFCL's verdict (turns right, and per turn how it ended)."""
    executed: list[str] = []
    sim = Simulator(item)
    trace: list[dict[str, Any]] = []
    runs: list[Result] = []
    turns: list[list[list[str]]] = []
    per_turn: list[TurnEnd] = []
    usage, steps, error_text, answer, stop = Usage(), 0, None, None, "answer"
    calls: list[ToolOutcome] = []
    attempted: list[str] = []
    started = time.monotonic()
    agent: Agent | None = None
    start: dict[str, Any] | None = None  # the start line of the turn under way
    try:
        bench = bench_mode(mode)
        if not bench.multi_turn:
            raise ValueError(f"mode {mode!r} does not run multi-turn items")
        native, check = bench.native_names, bench.checks_calls
        tools, mapping = simulator_tools(item.functions, sim, executed, native=native, check=check)
        step_calls: list[list[str]] = []

        def on_step(step: Any) -> None:
            step_calls.append(list(executed))
            executed.clear()

        # no time limit per turn: BFCL has none, and a turn cut by the clock would score as force-quit
        agent = Agent(
            backend,
            tools,
            max_steps=MAX_CALL_STEPS + 1,
            max_seconds=None,
            reply_tokens=settings.reply_tokens,
            observation_limit=settings.observation_limit,
            chat_format=chat_format,
            on_step=on_step,
            **agent_options(mode, settings, tools, documents=item.functions, question=item.turn_text(0)),
            **options,
        )
        for turn in range(len(item.turns)):
            held = item.held_out.get(turn)
            question = item.turn_text(turn)
            if held:
                sim.add_functions(held)
                more, more_map = simulator_tools(held, sim, executed, native=native, check=check)
                mapping.update(more_map)
                agent.add_tools(*more.values())
                question = held_out_message(held) if bench.bfcl_words else FC_HELD_OUT
            step_calls.clear()
            start = agent.start_record(question)
            result = agent.run(question)
            trace += run_records(start, result.steps, result)
            start = None
            runs.append(result)
            turns.append([list(s) for s in step_calls])
            usage += result.usage
            steps += len(result.steps)
            answer, stop = result.answer, result.stop_reason
            refused = sum(1 for s in result.steps for o in s.outcomes if o.error in ("unknown_tool", "bad_arguments"))
            for s in result.steps:
                calls += [replace(o, name=mapping.get(o.name, o.name), output=o.output[:300]) for o in s.outcomes]
                attempted += [mapping.get(c.name, c.name) for c in s.calls]
            per_turn.append(
                TurnEnd(
                    turn,
                    stop,
                    len(result.steps),
                    sum(len(s) for s in step_calls),
                    result.format_errors,
                    refused,
                    not any(step_calls),
                )
            )
            if result.error is not None:
                error_text = f"{type(result.error).__name__}: {result.error}"
            if stop == "backend_error":
                break
            if stop in ("max_steps", "time_limit", "token_budget"):
                break  # force-quit: BFCL ends the item here
    except Exception as exc:  # a harness failure is recorded, never fatal
        error_text, stop = f"{type(exc).__name__}: {exc}", "error"
        if start is not None and agent is not None:  # the turn it cut: its steps so far
            cut = [] if runs and agent.steps is runs[-1].steps else list(agent.steps)
            trace += run_records(start, cut, None)
            runs.append(Result(None, "error", cut, Usage(), 0.0, mode=mode))
    finally:
        sim.close()
    seconds = time.monotonic() - started
    force_quit = stop in ("max_steps", "time_limit", "token_budget")
    if stop in ("backend_error", "error"):
        verdict = MultiTurnVerdict(False, "error", error_text, 0, len(item.turns))
    else:
        score = score_item(item, turns)
        verdict = MultiTurnVerdict(score.valid, score.error_type, score.error, score.turns_right, score.turns)
    verdict.force_quit, verdict.per_turn, verdict.executed = force_quit, per_turn, turns
    verdict.empty_turns = sum(t.empty for t in per_turn if item.ground_truth[t.turn])
    verdict.format_errors = sum(t.format_errors for t in per_turn)
    verdict.refused_calls = sum(t.refused_calls for t in per_turn)
    failure = "backend_error" if stop in ("backend_error", "error") else str(verdict.error_type)
    return Episode(
        task=item.id,
        kind=item.category,
        split=item.split,
        mode=mode,
        repeat=repeat,
        success=verdict.valid,
        stop_reason=stop,
        answer=answer,
        steps=steps,
        seconds=round(seconds, 4),
        usage=usage,
        checks=[CheckResult("bfcl_multi_turn", verdict.valid, verdict.error or "")],
        calls=calls,
        attempted=attempted,
        needs_tools=True,
        error=error_text,
        trace=trace,
        failure=None if verdict.valid else failure,
        multi_turn=verdict,
        runs=runs,
    )
