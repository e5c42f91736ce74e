"""The agent loop's own overhead per step, with no model: ``python -m benchmarks.loop``.

A ScriptedBackend answers instantly, so everything measured is textagent's: rendering the
prompt, parsing the reply, validating and dispatching the call, formatting the observation,
appending to the transcript and (optionally) writing the trace. Target: <= 1 ms per step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence

from textagent.agent import Agent
from textagent.backends.scripted import ScriptedBackend
from textagent.toolkits.demo import demo_tools

REPLIES = [
    'I need the product first.\nTOOL: calculate ARGS: {"expression": "17 * 24"}',
    'TOOL: get_weather ARGS: {"city": "Tokyo"}',
    "TOOL: multiply ARGS: a=25, b=10",
    'TOOL: toggle_light ARGS: {"room": "kitchen", "on": false}',
]


def measure(steps: int, runs: int, *, trace: bool, tool_timeout: float | None) -> list[float]:
    """Seconds per step of each run of ``steps`` tool steps plus one answer step."""
    tools = demo_tools()
    per_step = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            replies = [REPLIES[i % len(REPLIES)] for i in range(steps)] + ["ANSWER: done"]
            agent = Agent(
                ScriptedBackend(replies),
                tools,
                max_steps=steps + 1,
                tool_timeout=tool_timeout,
                trace=os.path.join(tmp, f"t{run}.jsonl") if trace else None,
            )
            started = time.perf_counter()
            result = agent.run("Get the weather in Tokyo, multiply the temperature by 10, then turn off the light.")
            elapsed = time.perf_counter() - started
            assert result.stop_reason == "answer", result.stop_reason
            per_step.append(elapsed / (steps + 1))
    return per_step


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    measure(4, 5, trace=False, tool_timeout=30)  # warm up imports and caches
    rows = []
    for steps, trace, timeout in [(4, False, 30), (4, True, 30), (4, False, None), (40, False, 30)]:
        runs = max(5, args.runs // (10 if steps > 10 else 1))
        samples = measure(steps, runs, trace=trace, tool_timeout=timeout)
        rows.append(
            {
                "steps": steps + 1,
                "trace": trace,
                "tool_thread": timeout is not None,
                "us_per_step_median": statistics.median(samples) * 1e6,
                "us_per_step_p95": sorted(samples)[int(len(samples) * 0.95) - 1] * 1e6,
                "runs": runs,
            }
        )
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'steps/run':>9} {'trace':>6} {'tool thread':>11} {'median µs/step':>15} {'p95 µs/step':>12}")
    for r in rows:
        print(
            f"{r['steps']:>9} {r['trace']!s:>6} {r['tool_thread']!s:>11} "
            f"{r['us_per_step_median']:>15.0f} {r['us_per_step_p95']:>12.0f}"
        )
    worst = max(r["us_per_step_median"] for r in rows)
    print(f"target <= 1000 µs per step: {'met' if worst <= 1000 else 'MISSED'} (worst median {worst:.0f} µs)")
    return 0 if worst <= 1000 else 1


if __name__ == "__main__":
    raise SystemExit(main())
