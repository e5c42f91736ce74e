"""Paired differences: two modes (or two runs) scored on the same items.

Two modes run on the same items are paired data: what decides between them is the items one got
right and the other wrong (the discordant pairs), not the two rates side by side. For each pair
this gives the items both ran, the wins and losses, the difference in points with Newcombe's 95 %
interval for paired proportions (method 10: Wilson intervals of each rate, combined with the
correlation of the pairs), and the exact McNemar p-value (a two-sided binomial test of the
discordant pairs against 1/2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from .metrics import latest, wilson
from .mode_table import BENCH_MODES, FIRST_PAIRS
from .records import Episode

__all__ = [
    "ALPHA",
    "EXPLAIN",
    "HEADER",
    "Paired",
    "mcnemar_exact",
    "mode_pairs",
    "newcombe_interval",
    "outcomes",
    "pair",
    "pair_outcomes",
    "row",
]

ALPHA = 0.05  # a difference is called real when the exact McNemar p is below this


def mcnemar_exact(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p-value: P(a split at least as uneven as wins:losses | p = 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def newcombe_interval(both: int, only_a: int, only_b: int, neither: int) -> tuple[float, float]:
    """95 % interval of rate(A) - rate(B) for paired items (Newcombe 1998, method 10)."""
    n = both + only_a + only_b + neither
    if n == 0:
        return -1.0, 1.0
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n)
    l2, u2 = wilson(both + only_b, n)
    denom = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(denom) if denom else 0.0
    d = p1 - p2
    lower = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    upper = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, d - lower), min(1.0, d + upper)


@dataclass(frozen=True)
class Paired:
    """A against B on the items both have."""

    a: str
    b: str
    items: int
    both: int  # right in both
    wins: int  # right in A only
    losses: int  # right in B only

    @property
    def neither(self) -> int:
        return self.items - self.both - self.wins - self.losses

    @property
    def right_a(self) -> int:
        return self.both + self.wins

    @property
    def right_b(self) -> int:
        return self.both + self.losses

    @property
    def difference(self) -> float:
        """rate(A) - rate(B), as a fraction of the items."""
        return (self.wins - self.losses) / self.items if self.items else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return newcombe_interval(self.both, self.wins, self.losses, self.neither)

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.wins, self.losses)

    @property
    def real(self) -> bool:
        return self.items > 0 and self.p_value < ALPHA

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "a": self.a,
            "b": self.b,
            "items": self.items,
            "right_a": self.right_a,
            "right_b": self.right_b,
            "wins": self.wins,
            "losses": self.losses,
            "difference": self.difference,
            "interval": [low, high],
            "p_value": self.p_value,
            "real": self.real,
        }


def pair_outcomes(a: str, b: str, outcomes_a: Mapping[Any, bool], outcomes_b: Mapping[Any, bool]) -> Paired:
    """Pair two {item key: right?} maps on the keys they share."""
    shared = outcomes_a.keys() & outcomes_b.keys()
    both = sum(1 for k in shared if outcomes_a[k] and outcomes_b[k])
    wins = sum(1 for k in shared if outcomes_a[k] and not outcomes_b[k])
    losses = sum(1 for k in shared if outcomes_b[k] and not outcomes_a[k])
    return Paired(a, b, len(shared), both, wins, losses)


def outcomes(episodes: Iterable[Episode], mode: str) -> dict[tuple[str, int], bool]:
    """{(task, repeat): success} of one mode (the latest episode of each)."""
    return {(e.task, e.repeat): e.success for e in latest(episodes) if e.mode == mode}


def pair(episodes: Sequence[Episode], a: str, b: str) -> Paired:
    """Mode ``a`` against mode ``b`` of one run, on the episodes both finished."""
    return pair_outcomes(a, b, outcomes(episodes, a), outcomes(episodes, b))


def mode_pairs(modes: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs a report shows: every mode against the reference (``bfcl-prompt``, the external
    baseline) first, then the mode table's first pairs (``text`` against ``constrained``), then
    every other pair."""
    modes = list(dict.fromkeys(modes))
    first: list[tuple[str, str]] = []
    for reference in (m for m in modes if m in BENCH_MODES and BENCH_MODES[m].reference):
        first += [(m, reference) for m in modes if m != reference and (m, reference) not in first]
    first += [p for p in FIRST_PAIRS if p[0] in modes and p[1] in modes]
    rest = [p for p in combinations(modes, 2) if p not in first and p[::-1] not in first]
    return first + rest


def _points(x: float) -> str:
    return f"{x * 100:+.1f}"


def row(p: Paired) -> list[str]:
    """The table row of one pair (see ``HEADER``)."""
    if not p.items:
        return [f"{p.a} − {p.b}", "0", "—", "—", "—", "—", "—", "—"]
    low, high = p.interval
    return [
        f"{p.a} − {p.b}",
        str(p.items),
        f"{p.right_a} / {p.right_b}",
        str(p.wins),
        str(p.losses),
        f"{_points(p.difference)} ({_points(low)} to {_points(high)})",
        f"{p.p_value:.3g}",
        "**real**" if p.real else "noise",
    ]


HEADER = [
    "A − B",
    "items both ran",
    "right A / B",
    "A only",
    "B only",
    "points A − B (95 % paired CI)",
    "exact McNemar p",
    f"at p < {ALPHA}",
]

EXPLAIN = (
    "Two modes on the same items are paired: what separates them is the items one got right and the "
    "other wrong (*A only*, *B only*). The interval is Newcombe's for paired proportions; the p-value "
    "is the exact McNemar test (two-sided binomial test of the discordant items against 1/2). "
    f"A difference is called **real** when p < {ALPHA}; else it is noise at this size."
)
