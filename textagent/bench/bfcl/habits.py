"""What a first reply does with the tools it is shown, per BFCL category and mode: calls skipped
where a tool fits, answers claiming a call that never ran, the same tool called more times than
the question asks (the pair example's shape), and irrelevance items answered without a call; and,
with the loop's gate on (``--retry gate`` or ``abstain``), the first answers it asked again and
what came next; with its odds (``--retry odds``), the first replies begun with a call and the odds
of a call the model put on the first answers without one, where a tool fit and where none did;
with ``--retry claims``, the answers kept out for claiming a call and whether that call came."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields

from ..answers import called_tools, claimed_call, skipped_call
from ..records import Episode
from .score import step_calls

__all__ = ["Habits", "duplicated_shape", "habits_by_category", "render_habits"]

ODDS_LEVELS = (0.05, 0.1, 0.2, 0.3)  # the odds the report counts first answers at (or above)

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
    claim_taken: int = 0  # an answer kept out for saying a tool ran that had not (--retry claims)
    claim_called: int = 0  # ... and the reply after it called that tool
    probed: int = 0  # first replies whose odds of a call were asked (--retry odds)
    led: int = 0  # ... begun with a call for the model
    led_right: int = 0  # ... and right (BFCL's view of the first reply)
    checked: int = 0  # first replies the odds would begin whose call the model checked (--retry verify)
    skip_odds: list[float] = field(default_factory=list)  # the odds of a call at each skipped call
    meant_odds: list[float] = field(default_factory=list)  # ... at each irrelevance item answered without one

    def add(self, episode: Episode) -> None:
        self.items += 1
        self.skipped += skipped_call(episode)
        self.claims += claimed_call(episode.answer, called_tools(episode))
        self.duplicated += duplicated_shape(episode)
        irrelevance_right = False
        if "irrelevance" in str(episode.kind):
            self.irrelevance_items += 1
            irrelevance_right = episode.bfcl is not None and episode.bfcl.first.valid
            self.irrelevance_right += irrelevance_right
        steps = episode.result.steps
        first = steps[0].retry if steps else None
        odds = first.call_odds if first is not None else None
        if first is not None and odds is not None:
            self.probed += 1
            self.checked += first.verify_odds is not None
            if first.lead:
                self.led += 1
                self.led_right += episode.bfcl is not None and episode.bfcl.first.valid
            if skipped_call(episode):
                self.skip_odds.append(odds)
            elif irrelevance_right and not steps[0].calls:
                self.meant_odds.append(odds)
        gate = next((i for i, step in enumerate(steps) if step.retry is not None and step.retry.gated), None)
        if gate is not None:
            self.gated += 1
            self.gated_then_called += gate + 1 < len(steps) and bool(steps[gate + 1].calls)
        claims = [(i, step.retry.claimed) for i, step in enumerate(steps) if step.retry and step.retry.claimed]
        if claims:
            at, tool = claims[0]
            self.claim_taken += 1
            self.claim_called += at + 1 < len(steps) and any(c.name == tool for c in steps[at + 1].calls)

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
    lines += _acted_table(
        "The loop's gate asked again after a first answer given without a call while a listed tool "
        "was close to the question (`--retry gate`, `abstain`): replies after it that called a tool, "
        "of the answers asked again.",
        "category: called after the gate",
        ("gated_then_called", "gated"),
        table,
        total,
        shown,
    )
    lines += _acted_table(
        "The loop's claims (`--retry claims`): answers kept out of the conversation for saying a listed "
        "tool ran that never ran, and of those how many were followed by a reply calling that tool.",
        "category: claimed tool called after",
        ("claim_called", "claim_taken"),
        table,
        total,
        shown,
    )
    if any(total[m].probed for m in shown):
        lines += ["", *_odds_tables(table, total, shown)]
    return "\n".join([*lines, ""])


def _acted_table(
    words: str,
    first: str,
    counts: tuple[str, str],
    table: dict[str, dict[str, Habits]],
    total: dict[str, Habits],
    shown: Sequence[str],
) -> list[str]:
    """A table of what came after the loop acted (``counts``: the Habits fields "then", "acted"),
    "then of acted" per category where it acted, after ``words``; none where it never acted."""
    then, acted = counts
    if not any(getattr(total[m], acted) for m in shown):
        return []
    where = {c: cells for c, cells in table.items() if any(getattr(cells[m], acted) for m in shown)}

    def cell(h: Habits) -> str:
        return f"{getattr(h, then)} of {getattr(h, acted)}" if h.items else "—"

    return ["", words, "", *_category_table(first, cell, where, total, shown)]


def _reached(odds: list[float]) -> str:
    return " / ".join(str(sum(o >= level for o in odds)) for level in ODDS_LEVELS) + f" of {len(odds)}"


def _odds_tables(table: dict[str, dict[str, Habits]], total: dict[str, Habits], shown: Sequence[str]) -> list[str]:
    """The odds' two tables: first replies begun with a call, and the odds at first answers."""
    probed = {c: cells for c, cells in table.items() if any(cells[m].probed for m in shown)}
    levels = " / ".join(f"{level:g}" for level in ODDS_LEVELS)
    return [
        "The loop's odds (`--retry odds`): first replies begun with a call for the model, of the first "
        "replies whose odds were asked, and of those begun how many were right (BFCL's view); with "
        "`--retry verify`, how many the odds would have begun, their calls checked by the model.",
        "",
        *_category_table(
            "category: begun / asked, right",
            lambda h: (
                (f"{h.led} / {h.probed}, {h.led_right}" + (f"; checked {h.checked}" if h.checked else ""))
                if h.probed
                else "—"
            ),
            probed,
            total,
            shown,
        ),
        "",
        f"The odds of a call the model put on its first answers without one, counted at {levels} and "
        "above: where a tool fit (a call skipped) | on irrelevance items (an abstention that was right).",
        "",
        *_category_table(
            f"category: skipped at {levels} \\| meant at {levels}",
            lambda h: f"{_reached(h.skip_odds)} \\| {_reached(h.meant_odds)}" if h.probed else "—",
            probed,
            total,
            shown,
        ),
    ]


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
