"""The per-mode summary of a bench run: success with Wilson intervals, cost, the counts of what
the model did, failures by class, tasks worst first, throughput per endpoint.

Everything here is a pure function of Episodes (bench.records: made by a run, or read from the
JSON lines the runner writes), so a run can be re-summarised, or two runs compared, long after
the model is gone. An episode's own counts are bench.facts'; what its answer holds, bench.answers'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..backends.base import Usage
from .answers import called_tools, copied_example, repeated_feedback, skipped_call
from .facts import classify

if TYPE_CHECKING:
    from .records import Episode

__all__ = [
    "ModeSummary",
    "episode_tokens",
    "latest",
    "native_tools",
    "summarize",
    "task_scores",
    "throughput",
    "wilson",
]


def native_tools(mode: str) -> bool:
    """Whether textagent read the server's function calls in episodes of ``mode`` (a record's mode
    name), as the mode table says (a mode it no longer holds: no)."""
    from .mode_table import BENCH_MODES

    bench = BENCH_MODES.get(mode)
    return bench is not None and bench.reads_native_calls


Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % by default); (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n ({n}), got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


# --------------------------------------------------------------------------------------------
# Facts of one episode, from its trace
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Summary per mode
# --------------------------------------------------------------------------------------------


def episode_tokens(usage: Usage) -> int:
    """Tokens an episode cost: prompt tokens the server computed (all sent tokens when it does
    not say) plus generated tokens."""
    return _evaluated(usage) + (usage.completion_tokens or 0)


def _evaluated(usage: Usage) -> int:
    """Prompt tokens the server computed; all sent tokens when it does not say."""
    return usage.prompt_evaluated if usage.prompt_evaluated is not None else usage.prompt_tokens or 0


@dataclass
class ModeSummary:
    mode: str
    episodes: int = 0
    successes: int = 0
    ci_low: float = 0.0
    ci_high: float = 1.0
    mean_steps: float = 0.0
    tokens_per_solved: float | None = None
    prompt_tokens_per_episode: float = 0.0
    kv_reuse: float | None = None  # share of prompt tokens reused from the KV cache
    first_prompt: float | None = None  # mean prompt tokens of step 1
    first_evaluated: float | None = None  # ... of them evaluated (not found in the cache)
    format_error_rate: float = 0.0  # format-error steps / steps
    first_step_errors: int = 0
    recovered: int = 0
    recovery_rate: float | None = None  # recovered / episodes with a first-step format error
    decode_failure_rate: float | None = None  # native modes: decode-failure steps / steps
    seconds_per_task: float = 0.0
    tool_errors: int = 0
    copied_answers: int = 0  # final answers holding a placeholder example's phrase
    feedback_answers: int = 0  # final answers repeating a sentence of textagent's feedback to the model
    answered_without_call: int = 0  # episodes that needed a call and answered without one
    failures: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [successes, episodes]

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["success_rate"] = self.success_rate
        return out


def latest(episodes: Iterable[Episode]) -> list[Episode]:
    """One episode per (task, mode, repeat): the last written wins (a resumed run re-ran it)."""
    by_key: dict[tuple[Any, ...], Episode] = {}
    for e in episodes:
        by_key[(e.task, e.mode, e.repeat)] = e
    return list(by_key.values())


def summarize(episodes: Iterable[Episode], modes: Sequence[str] | None = None) -> dict[str, ModeSummary]:
    """Per-mode metrics, in the order of ``modes`` (default: as first seen)."""
    grouped: dict[str, list[Episode]] = {}
    for e in latest(episodes):
        grouped.setdefault(e.mode, []).append(e)
    order = list(modes) if modes else list(grouped)
    order += [m for m in grouped if m not in order]
    out: dict[str, ModeSummary] = {}
    for mode in order:
        es = grouped.get(mode, [])
        s = ModeSummary(mode)
        out[mode] = s
        if not es:
            continue
        s.episodes = len(es)
        s.successes = sum(1 for e in es if e.success)
        s.ci_low, s.ci_high = wilson(s.successes, s.episodes)
        facts = [e.facts for e in es]
        steps = sum(f.steps for f in facts)
        s.mean_steps = steps / len(es)
        tokens = sum(episode_tokens(e.usage) for e in es)
        s.tokens_per_solved = tokens / s.successes if s.successes else None
        sent = sum(e.usage.prompt_tokens or 0 for e in es)
        s.prompt_tokens_per_episode = sent / len(es)
        cached_known = [e.usage for e in es if e.usage.prompt_cached is not None]
        cached_total = sum(u.prompt_tokens or 0 for u in cached_known)
        if cached_total:
            s.kv_reuse = sum(u.prompt_cached or 0 for u in cached_known) / cached_total
        firsts = [
            (f.first_prompt, f.first_evaluated)
            for f in facts
            if f.first_prompt is not None and f.first_evaluated is not None
        ]
        if firsts:
            s.first_prompt = sum(p for p, _ in firsts) / len(firsts)
            s.first_evaluated = sum(e for _, e in firsts) / len(firsts)
        s.format_error_rate = sum(f.format_errors for f in facts) / steps if steps else 0.0
        s.first_step_errors = sum(1 for f in facts if f.first_step_format_error)
        s.recovered = sum(1 for f in facts if f.recovered)
        s.recovery_rate = s.recovered / s.first_step_errors if s.first_step_errors else None
        if native_tools(mode):
            s.decode_failure_rate = sum(f.native_decode_failures for f in facts) / steps if steps else 0.0
        s.seconds_per_task = sum(float(e.seconds or 0) for e in es) / len(es)
        s.tool_errors = sum(f.tool_errors for f in facts)
        s.copied_answers = sum(copied_example(e.answer, called_tools(e)) for e in es)
        s.feedback_answers = sum(repeated_feedback(e.answer) for e in es)
        s.answered_without_call = sum(skipped_call(e) for e in es)
        for e in es:
            # recomputed: episodes stay comparable as the taxonomy evolves; a BFCL item keeps
            # the checker's label (BFCL's terms)
            label = e.failure if e.bfcl is not None else classify(e)
            if label:
                s.failures[label] = s.failures.get(label, 0) + 1
            kind = s.by_kind.setdefault(e.kind, [0, 0])
            kind[0] += 1 if e.success else 0
            kind[1] += 1
    return out


def task_scores(episodes: Iterable[Episode], mode: str) -> list[dict[str, Any]]:
    """Per task of a mode: successes, episodes, mean steps, mean seconds, failure labels;
    worst first (lowest success rate, then most steps, then slowest)."""
    tasks: dict[str, dict[str, Any]] = {}
    for e in latest(episodes):
        if e.mode != mode:
            continue
        t = tasks.setdefault(
            e.task,
            {"task": e.task, "kind": e.kind, "successes": 0, "episodes": 0, "steps": 0, "seconds": 0.0, "failures": []},
        )
        t["episodes"] += 1
        t["successes"] += 1 if e.success else 0
        t["steps"] += int(e.steps or 0)
        t["seconds"] += float(e.seconds or 0)
        if e.failure:
            t["failures"].append(e.failure)
    rows = list(tasks.values())
    for t in rows:
        t["rate"] = t["successes"] / t["episodes"]
        t["mean_steps"] = t["steps"] / t["episodes"]
        t["mean_seconds"] = t["seconds"] / t["episodes"]
    rows.sort(key=lambda t: (t["rate"], -t["mean_steps"], -t["mean_seconds"], t["task"]))
    return rows


def throughput(episodes: Iterable[Episode]) -> dict[str, dict[str, float]]:
    """Per endpoint: episodes, wall time (first start to last end), episodes per minute, and
    prompt tokens evaluated and tokens generated per second of wall time."""
    by_endpoint: dict[str, list[Episode]] = {}
    for e in latest(episodes):
        if e.time is not None:
            by_endpoint.setdefault(str(e.endpoint or "?"), []).append(e)
    out: dict[str, dict[str, float]] = {}
    for endpoint, es in by_endpoint.items():
        start = min(float(e.time) - float(e.seconds or 0) for e in es)
        wall = max(float(e.time) for e in es) - start
        evaluated = sum(_evaluated(e.usage) for e in es)
        generated = sum(e.usage.completion_tokens or 0 for e in es)
        out[endpoint] = {
            "episodes": len(es),
            "wall_seconds": wall,
            "episodes_per_minute": 60 * len(es) / wall if wall > 0 else 0.0,
            "prompt_tokens_per_second": evaluated / wall if wall > 0 else 0.0,
            "generated_tokens_per_second": generated / wall if wall > 0 else 0.0,
        }
    return out
