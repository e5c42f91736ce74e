"""One BFCL multi-turn item run as one conversation of the Agent, scored by BFCL's checker.

Each user turn is a question of the same conversation (``Agent.run`` goes on with it); the
model's calls run on BFCL's simulators through BFCL's executor; a turn ends when the model
answers, when its replies stop being usable (the modes that end a turn there: ``bfcl-prompt``,
``text-no-feedback``), or after MAX_CALL_STEPS steps and one more, when the item is
force-quit as BFCL force-quits it. A held-out function (``multi_turn_miss_func``) is added at its
turn: ``bfcl-prompt`` gets BFCL's own user message with the documents, the other modes the
tool itself (text modes list it in that turn; native modes send it in ``tools``) with the
message BFCL's FC mode sends.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...agent import Agent
from ...backends.base import Usage
from ...tools import Tool, ToolSet
from ..agent_options import agent_options
from ..mode_table import bench_mode
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
    item: MultiTurnItem, mode: str, backend: Any, *, chat_format: Any, settings: Any, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Run ``item`` in ``mode``; the fields of the bench record that differ from a single-turn
    episode's: success, stop_reason, answer, steps, usage, calls, attempted, trace, error and
    ``multi_turn`` (BFCL's verdict, turns right, and per turn how it ended)."""
    executed: list[str] = []
    sim = Simulator(item)
    trace = io.StringIO()
    turns: list[list[list[str]]] = []
    per_turn: list[dict[str, Any]] = []
    usage, steps, error_text, answer, stop = Usage(), 0, None, None, "answer"
    calls: list[dict[str, Any]] = []
    attempted: list[str] = []
    started = time.monotonic()
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
            trace=trace,
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
            result = agent.run(question)
            turns.append([list(s) for s in step_calls])
            usage += result.usage
            steps += len(result.steps)
            answer, stop = result.answer, result.stop_reason
            format_errors = result.format_errors
            refused = sum(1 for s in result.steps for o in s.outcomes if o.error in ("unknown_tool", "bad_arguments"))
            for s in result.steps:
                calls += [
                    {
                        "name": mapping.get(o.name, o.name),
                        "args": o.args,
                        "ok": o.ok,
                        "output": o.output[:300],
                        "error": o.error,
                    }
                    for o in s.outcomes
                ]
                attempted += [mapping.get(c.name, c.name) for c in s.calls]
            per_turn.append(
                {
                    "turn": turn,
                    "stop_reason": stop,
                    "steps": len(result.steps),
                    "calls": sum(len(s) for s in step_calls),
                    "format_errors": format_errors,
                    "refused_calls": refused,
                    "empty": not any(step_calls),
                }
            )
            if result.error is not None:
                error_text = f"{type(result.error).__name__}: {result.error}"
            if stop == "backend_error":
                break
            if stop in ("max_steps", "time_limit", "token_budget"):
                break  # force-quit: BFCL ends the item here
    except Exception as exc:  # a harness failure is recorded, never fatal
        error_text, stop = f"{type(exc).__name__}: {exc}", "error"
    finally:
        sim.close()
    seconds = time.monotonic() - started
    if stop in ("backend_error", "error"):
        score = None
        success = False
    else:
        score = score_item(item, turns)
        success = score.valid
    lines = [json.loads(line) for line in trace.getvalue().splitlines() if line.strip()]
    force_quit = stop in ("max_steps", "time_limit", "token_budget")
    return {
        "success": success,
        "stop_reason": stop,
        "answer": answer,
        "steps": steps,
        "seconds": round(seconds, 4),
        "usage": usage.to_dict(),
        "calls": calls,
        "attempted": attempted,
        "trace": lines,
        "error": error_text,
        "multi_turn": {
            **(
                score.to_dict()
                if score is not None
                else {
                    "valid": False,
                    "error_type": "error",
                    "error": error_text,
                    "turns_right": 0,
                    "turns": len(item.turns),
                }
            ),
            "force_quit": force_quit,
            "per_turn": per_turn,
            "executed": turns,
            "empty_turns": sum(t["empty"] for t in per_turn if item.ground_truth[t["turn"]]),
            "format_errors": sum(t["format_errors"] for t in per_turn),
            "refused_calls": sum(t["refused_calls"] for t in per_turn),
        },
    }
