"""The figures of the llama-server settings benchmark (``bench.server_settings``): a config, the
timings of one concurrent batch, the numbers made of them (median over rounds) and the table."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["COLUMNS", "Config", "Measurement", "Row", "aggregate", "phase_spans", "render_table", "summarize"]


@dataclass(frozen=True)
class Config:
    threads: int
    poll: int
    parallel: int
    cache_reuse: int = 0

    def server_args(self) -> list[str]:
        """Arguments beyond LocalServer's own (which passes -t and -np)."""
        args = ["--poll", str(self.poll)]
        if self.cache_reuse:
            args += ["--cache-reuse", str(self.cache_reuse)]
        return args

    def label(self) -> str:
        return f"t={self.threads} poll={self.poll} np={self.parallel} cache-reuse={self.cache_reuse}"


@dataclass
class Measurement:
    """One concurrent batch: llama.cpp's ``timings`` per slot, when each reply was read (seconds
    after the batch started, same order) and the client's wall time of the batch."""

    wall_s: float
    timings: list[dict[str, float]]
    ends_s: list[float] = field(default_factory=list)


def phase_spans(m: Measurement) -> tuple[float, float]:
    """Wall seconds of the batch's prompt phase and generation phase.

    Each slot's phases are placed on the client's clock, back from the moment its reply was read:
    generation ends then and lasts ``predicted_ms``, the prompt comes just before and lasts
    ``prompt_ms``. A phase's span runs from the first slot entering it to the last leaving it, so
    when the slots are staggered the overlap counts in both phases (the rates are then lower
    bounds). Without reply times, the slots are taken to start together (the longest phase)."""
    t = m.timings
    if len(m.ends_s) != len(t):
        return max(x["prompt_ms"] for x in t) / 1000, max(x["predicted_ms"] for x in t) / 1000
    gen_start = [end - x["predicted_ms"] / 1000 for end, x in zip(m.ends_s, t)]
    prompt_start = [g - x["prompt_ms"] / 1000 for g, x in zip(gen_start, t)]
    return max(gen_start) - min(prompt_start), max(m.ends_s) - min(gen_start)


def aggregate(m: Measurement) -> dict[str, float]:
    """One batch's numbers: aggregate prompt and generation tokens/s, per-slot generation rate."""
    t = m.timings
    prompt_n = sum(x["prompt_n"] for x in t)
    predicted_n = sum(x["predicted_n"] for x in t)
    prompt_s, predicted_s = phase_spans(m)
    return {
        "prompt_n": prompt_n,
        "predicted_n": predicted_n,
        "cache_n": sum(x.get("cache_n", 0) for x in t),
        "prompt_tps": prompt_n / prompt_s if prompt_s > 0 else 0.0,
        "gen_tps": predicted_n / predicted_s if predicted_s > 0 else 0.0,
        "gen_tps_slot": statistics.median(x["predicted_per_second"] for x in t),
        "prompt_tps_slot": statistics.median(x["prompt_per_second"] for x in t),
        "wall_s": m.wall_s,
    }


@dataclass
class Row:
    config: Config
    load: int
    numbers: dict[str, float] = field(default_factory=dict)  # medians over rounds; empty when failed
    rounds: list[dict[str, float]] = field(default_factory=list)
    note: str = ""

    @property
    def machine(self) -> str:
        return "idle" if self.load == 0 else f"loaded({self.load})"

    def to_json(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "machine": self.machine,
            "load": self.load,
            "numbers": self.numbers,
            "rounds": self.rounds,
            "note": self.note,
        }


def summarize(config: Config, load: int, rounds: Sequence[Measurement], note: str = "") -> Row:
    """The row of a config: the median of each number over the rounds measured."""
    per_round = [aggregate(m) for m in rounds]
    numbers = {k: statistics.median(r[k] for r in per_round) for k in per_round[0]} if per_round else {}
    return Row(config, load, numbers, per_round, note)


COLUMNS = (
    "machine",
    "threads",
    "poll",
    "parallel",
    "cache-reuse",
    "prompt tok/s",
    "gen tok/s",
    "gen tok/s per slot",
    "batch s",
    "note",
)


def render_table(rows: Sequence[Row]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if i < 5 or i == 9 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    for row in rows:
        c, n = row.config, row.numbers
        nums = (
            [f"{n['prompt_tps']:.1f}", f"{n['gen_tps']:.1f}", f"{n['gen_tps_slot']:.1f}", f"{n['wall_s']:.1f}"]
            if n
            else ["—"] * 4
        )
        note = row.note.replace("|", "/").replace("\n", " ")
        lines.append(
            "| "
            + " | ".join([row.machine, str(c.threads), str(c.poll), str(c.parallel), str(c.cache_reuse), *nums, note])
            + " |"
        )
    return "\n".join(lines)
