"""What a first reply does with the tools it is shown, per BFCL category and mode: calls skipped
where a tool fits, answers claiming a call that never ran, the same tool called more times than
the question asks (the pair example's shape), and irrelevance items answered without a call; and,
with the loop's gate on (``--retry gate`` or ``abstain``), the first answers it asked again and
what came next."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from ..answers import called_tools, claimed_call, skipped_call
from ..records import Episode
from .score import step_calls

__all__ = ["Habits", "duplicated_shape", "habits_by_category", "render_habits"]

# checker._check_count's sentence: "expected 1 call(s), got 2."
_COUNT = re.compile(r"expected (\d+) call\(s\), got (\d+)\.")


def duplicated_shape(episode: Episode) -> bool:
    """A first reply that made more calls than the item asks for, calling one tool twice or more:
    the shape of the worked example that calls its tool twice in one reply ("for A, and for B"),
    where the question asked for one (``get_current_weather`` once in fahrenheit and again in
    celsius)."""
    if episode.bfcl is None:
        return False
    first = episode.bfcl.first
    count = _COUNT.search(first.detail)
    if first.error_type != "wrong_count" or count is None or int(count[2]) <= int(count[1]):
        return False
    steps = episode.result.steps
    calls = step_calls(steps[0]) if steps else None
    names = collections.Counter(name for name, _ in calls or ())
    return any(n > 1 for n in names.values())


@dataclass
class Habits:
    """One (category, mode) cell: items, and how many of them show each habit."""

    items: int = 0
    skipped: int = 0  # a tool fits, the first reply answered without a call
    claims: int = 0  # the answer says a tool ran that the episode never ran
    duplicated: int = 0  # duplicated_shape
    irrelevance_right: int = 0  # an irrelevance item answered without a call
    irrelevance_items: int = 0
    gated: int = 0  # an answer the gate asked again (textagent.retry)
    gated_then_called: int = 0  # ... and the reply after it made a call

    def add(self, episode: Episode) -> None:
        self.items += 1
        self.skipped += skipped_call(episode)
        self.claims += claimed_call(episode.answer, called_tools(episode))
        self.duplicated += duplicated_shape(episode)
        if "irrelevance" in str(episode.kind):
            self.irrelevance_items += 1
            self.irrelevance_right += episode.bfcl is not None and episode.bfcl.first.valid
        steps = episode.result.steps
        gate = next((i for i, step in enumerate(steps) if step.retry is not None and step.retry.gated), None)
        if gate is not None:
            self.gated += 1
            self.gated_then_called += gate + 1 < len(steps) and bool(steps[gate + 1].calls)

    def __iadd__(self, other: Habits) -> Habits:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self


def habits_by_category(episodes: Sequence[Episode], modes: Sequence[str]) -> dict[str, dict[str, Habits]]:
    """{category: {mode: Habits}} over the single-turn BFCL episodes, categories as they come."""
    table: dict[str, dict[str, Habits]] = {}
    for episode in episodes:
        if episode.bfcl is not None and episode.mode in modes:
            table.setdefault(str(episode.kind), {m: Habits() for m in modes})[episode.mode].add(episode)
    return table


def _cell(h: Habits) -> str:
    if not h.items:
        return "—"
    shown = f"{h.skipped} / {h.claims} / {h.duplicated}"
    return shown + (f" / {h.irrelevance_right} of {h.irrelevance_items}" if h.irrelevance_items else "")


def render_habits(episodes: Sequence[Episode], modes: Sequence[str]) -> str:
    """The markdown section, empty when no episode is a single-turn BFCL item."""
    table = habits_by_category(episodes, modes)
    if not table:
        return ""
    shown = [m for m in modes if any(cells[m].items for cells in table.values())]
    total = {m: Habits() for m in shown}
    for cells in table.values():
        for m in shown:
            total[m] += cells[m]
    lines = [
        "### What the first replies did with the tools",
        "",
        "Per category: calls skipped where a tool fits (the first reply answered without one) / "
        'answers claiming a call that never ran ("f ran with ..." where f did not run) / replies '
        "calling one tool more times than the item asks (the shape of the worked example that calls "
        "its tool twice), and on irrelevance categories the items answered without a call.",
        "",
        *_category_table("category: skipped / claims / twice / irrelevance right", _cell, table, total, shown),
    ]
    if any(total[m].gated for m in shown):
        lines += [
            "",
            "The loop's gate asked again after a first answer given without a call while a listed tool "
            "was close to the question (`--retry gate`, `abstain`): replies after it that called a tool, "
            "of the answers asked again.",
            "",
            *_category_table(
                "category: called after the gate",
                lambda h: f"{h.gated_then_called} of {h.gated}" if h.items else "—",
                {c: cells for c, cells in table.items() if any(cells[m].gated for m in shown)},
                total,
                shown,
            ),
        ]
    return "\n".join([*lines, ""])


def _category_table(
    first: str,
    cell: Callable[[Habits], str],
    table: dict[str, dict[str, Habits]],
    total: dict[str, Habits],
    shown: Sequence[str],
) -> list[str]:
    """A markdown table: a row per category of ``table`` and the total, a column per mode."""
    rows = [[c, *[cell(cells[m]) for m in shown]] for c, cells in table.items()]
    rows.append(["**all**", *[cell(total[m]) for m in shown]])
    return [
        f"| {first} | " + " | ".join(shown) + " |",
        "|---|" + "---:|" * len(shown),
        *["| " + " | ".join(r) + " |" for r in rows],
    ]
