"""The BFCL part of a bench report: accuracy per category and mode in each view, with Wilson
intervals, tokens and seconds per item, and the failures in BFCL's terms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..metrics import episode_tokens, wilson
from ..records import Episode
from .checker import ERROR_TYPES
from .habits import render_habits

__all__ = ["ERROR_TITLES", "OVERALL", "CategoryScore", "bfcl_scores", "draw_categories", "render_bfcl"]

OVERALL = "overall"
ERROR_TITLES = {
    "wrong_function": "wrong function",
    "unknown_parameter": "unknown parameter",
    "missing_parameter": "missing parameter",
    "wrong_type": "wrong type",
    "wrong_value": "wrong value",
    "wrong_count": "wrong number of calls",
    "no_call": "no call",
    "irrelevance_call": "call on an irrelevance item",
    "unparseable": "unparseable reply",
    "backend_error": "backend error",
}


@dataclass
class CategoryScore:
    """One (category, mode) cell: items, right in each view, recovered, cost, failures (first reply)."""

    items: int = 0
    first: int = 0
    feedback: int = 0
    agent: int = 0
    recovered: int = 0
    tokens: int = 0
    seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)

    def add(self, episode: Episode) -> None:
        scores = episode.bfcl
        assert scores is not None  # a single-turn BFCL item
        self.items += 1
        self.first += scores.first.valid
        self.feedback += scores.feedback.valid
        self.agent += scores.agent.valid
        self.recovered += scores.recovered
        self.tokens += episode_tokens(episode.usage)
        self.seconds += float(episode.seconds or 0.0)
        if not scores.first.valid:
            label = episode.failure or scores.first.error_type or "unparseable"
            self.failures[label] = self.failures.get(label, 0) + 1

    def rate(self, view: str = "first") -> float:
        return getattr(self, view) / self.items if self.items else 0.0


def bfcl_scores(episodes: Sequence[Episode], modes: Sequence[str]) -> dict[str, dict[str, CategoryScore]]:
    """{category (and OVERALL): {mode: CategoryScore}} over the episodes that carry BFCL scores."""
    table: dict[str, dict[str, CategoryScore]] = {}
    for episode in episodes:
        if episode.bfcl is None or episode.mode not in modes:
            continue
        for key in (str(episode.kind), OVERALL):
            table.setdefault(key, {m: CategoryScore() for m in modes})[episode.mode].add(episode)
    if OVERALL in table:
        table[OVERALL] = table.pop(OVERALL)  # last
    return table


def _cell(score: CategoryScore, view: str = "first") -> str:
    if not score.items:
        return "—"
    right = getattr(score, view)
    low, high = wilson(right, score.items)
    return f"{right}/{score.items} ({right / score.items:.0%}, {low:.0%}–{high:.0%})"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def render_bfcl(episodes: Sequence[Episode], modes: Sequence[str], *, first_reply: bool = False) -> str:
    """The markdown section; empty when no episode is a BFCL item. ``first_reply``: the episodes
    stopped after their first reply, so the feedback and agent views were not measured."""
    table = bfcl_scores(episodes, modes)
    if not table:
        return ""
    shown = [m for m in modes if table.get(OVERALL, {}).get(m) and table[OVERALL][m].items]
    out = [
        "## BFCL (single-turn AST categories)",
        "",
        "BFCL's view: the calls of the **first reply**, scored by a reimplementation of BFCL's AST checker "
        "(`textagent/bench/bfcl/checker.py`); right/items (rate, 95 % Wilson interval).",
        "",
    ]
    rows = [[f"**{c}**" if c == OVERALL else c, *[_cell(cells[m]) for m in shown]] for c, cells in table.items()]
    out += [_table(["category", *shown], rows), ""]
    out += [
        "### Views",
        "",
        "**first reply**: BFCL's view. **with feedback**: the first reply that parsed and whose calls "
        "passed the tools' schemas, after textagent's feedback on a format error or on a call's arguments "
        "(else the first that parsed); *recovered* counts the items right only thanks to it. "
        "**agent**: every call made before the final answer, the tools returning a neutral result "
        '(`{"status": "success"}`), a call repeated word for word counted once, a call its tool refused not counted. All rows are over '
        "all categories above.",
        "",
    ]
    overall = table[OVERALL]
    if first_reply:
        out += [
            "Run with `--first-reply`: every episode stopped after its first reply, so the feedback "
            "and agent views were not measured.",
            "",
        ]
        later = [
            ["with feedback", *["not measured"] * len(shown)],
            ["agent (all calls before the answer)", *["not measured"] * len(shown)],
        ]
    else:
        later = [
            ["with feedback", *[_cell(overall[m], "feedback") for m in shown]],
            ["recovered by feedback", *[str(overall[m].recovered) for m in shown]],
            ["agent (all calls before the answer)", *[_cell(overall[m], "agent") for m in shown]],
        ]
    rows = [
        ["first reply (BFCL)", *[_cell(overall[m]) for m in shown]],
        *later,
        ["tokens per item (computed + generated)", *[f"{overall[m].tokens / overall[m].items:,.0f}" for m in shown]],
        ["seconds per item", *[f"{overall[m].seconds / overall[m].items:.1f}" for m in shown]],
    ]
    out += [_table(["view", *shown], rows), ""]
    out += ["### Failures in BFCL's terms (first reply)", ""]
    labels = [e for e in (*ERROR_TYPES, "backend_error") if any(overall[m].failures.get(e) for m in shown)]
    rows = [[ERROR_TITLES.get(e, e), *[str(overall[m].failures.get(e, 0)) for m in shown]] for e in labels]
    rows.append(["**right**", *[f"**{overall[m].first}**" for m in shown]])
    out += [_table(["failure", *shown], rows), ""]
    out += [render_habits(episodes, shown)]
    return "\n".join(out)


def draw_categories(ax: Any, episodes: Sequence[Episode], modes: Sequence[str]) -> bool:
    """Grouped bars on a matplotlib axis: first-reply accuracy per category, a bar per mode, with
    Wilson intervals. False when there is nothing to draw."""
    table = bfcl_scores(episodes, modes)
    if not table:
        return False
    shown = [m for m in modes if table[OVERALL][m].items]
    categories = list(table)
    width = 0.8 / max(1, len(shown))
    for j, mode in enumerate(shown):
        xs = [i + (j - (len(shown) - 1) / 2) * width for i in range(len(categories))]
        rates, low, high = [], [], []
        for c in categories:
            s = table[c][mode]
            r = s.rate() * 100
            lo, hi = wilson(s.first, s.items) if s.items else (0.0, 0.0)
            rates.append(r)
            low.append(max(0.0, r - lo * 100))
            high.append(max(0.0, hi * 100 - r))
        ax.bar(xs, rates, width, yerr=[low, high], capsize=2, label=mode, error_kw={"elinewidth": 0.8})
    ax.set_xticks(range(len(categories)), categories, rotation=20, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("BFCL first-reply accuracy, % (95 % CI)")
    ax.set_title("BFCL by category and mode")
    ax.legend(fontsize=7, ncol=min(len(shown), 6), loc="upper center", bbox_to_anchor=(0.5, -0.28))
    return True
