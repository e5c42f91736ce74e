"""The BFCL multi-turn section of a bench report: items and turns right per mode and category, with
95 % intervals, how turns ended, what an item cost, and paired tests between the modes.

An item is right when BFCL's checker accepts it; a turn is right when the checker accepts the
item's first turns up to and including it (``turns_right`` of the record): the turn accuracy
says how far into the conversation each mode stays right. Pairs are compared on the items (and
on the turns) both modes finished: exact McNemar, Newcombe's interval (bench.paired).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import paired
from ..answers import copied_example, repeated_feedback
from ..metrics import episode_tokens, latest, wilson
from ..records import Episode
from .loop_stats import FORCE_QUIT_CAUSES, loop_stats

__all__ = ["TURNS_HEADING", "feedback_turns", "multi_turn_rows", "render_multi_turn", "turn_answers", "turn_outcomes"]


TURNS_HEADING = "### Paired, on turns (a turn is right when every turn up to it is)"


def _items(episodes: Sequence[Episode]) -> list[Episode]:
    """The multi-turn items the run finished (a backend error or a harness failure is not one)."""
    return [e for e in latest(episodes) if e.multi_turn is not None and e.stop_reason not in ("backend_error", "error")]


def turn_outcomes(episodes: Sequence[Episode], mode: str) -> dict[tuple[str, int, int], bool]:
    """{(task, repeat, turn): right?} of one mode: a turn is right when every turn up to it is."""
    out = {}
    for e in _items(episodes):
        if e.mode != mode or e.multi_turn is None:
            continue
        for k in range(e.multi_turn.turns):
            out[(e.task, e.repeat, k)] = k < e.multi_turn.turns_right
    return out


def turn_answers(episode: Episode) -> list[tuple[str, set[str]]]:
    """The answers that ended the turns of one item, in order (each turn's run), each with the
    names of the tools its turn called."""
    return [
        (run.answer, {c.name for step in run.steps for c in step.calls})
        for run in episode.runs
        if run.answer is not None
    ]


def feedback_turns(episode: Episode) -> tuple[int, int]:
    """(right, told): the item's turns in which the model was told of a format error or a refused
    call, and how many of those turns were right. What the loop's feedback turned into right turns."""
    verdict = episode.multi_turn
    assert verdict is not None  # a multi-turn item
    told = right = 0
    for k, turn in enumerate(verdict.per_turn):
        if turn.format_errors or turn.refused_calls:
            told += 1
            right += k < verdict.turns_right
    return right, told


def _pct(k: int, n: int) -> str:
    if not n:
        return "—"
    low, high = wilson(k, n)
    return f"{100 * k / n:.1f} % ({100 * low:.0f}–{100 * high:.0f} %), {k}/{n}"


def multi_turn_rows(episodes: Sequence[Episode], modes: Sequence[str]) -> list[list[str]]:
    """One row per (category, mode)."""
    rows = []
    items = _items(episodes)
    categories = list(dict.fromkeys(e.kind for e in items))
    for category in categories:
        for mode in modes:
            mine = [e for e in items if e.mode == mode and e.kind == category]
            if not mine:
                continue
            n = len(mine)
            verdicts = [e.multi_turn for e in mine if e.multi_turn is not None]
            turns = sum(v.turns for v in verdicts)
            right_turns = sum(v.turns_right for v in verdicts)
            answers = [a for e in mine for a in turn_answers(e)]
            told = [feedback_turns(e) for e in mine]
            loops = [loop_stats(e) for e in mine]
            rows.append(
                [
                    category,
                    mode,
                    _pct(sum(e.success for e in mine), n),
                    _pct(right_turns, turns),
                    _force_quits(loops, n),
                    f"{sum(v.empty_turns for v in verdicts)}/{turns}",
                    f"{sum(v.format_errors for v in verdicts) / n:.2f}",
                    f"{sum(v.refused_calls for v in verdicts) / n:.2f}",
                    f"{sum(k for k, _ in told)}/{sum(t for _, t in told)}",
                    f"{sum(s.repeating for s in loops)}/{sum(s.after_failure for s in loops)}",
                    f"{sum(copied_example(a, called) for a, called in answers)}/{len(answers)}",
                    f"{sum(repeated_feedback(a) for a, _ in answers)}/{len(answers)}",
                    f"{sum(e.steps for e in mine) / n:.1f}",
                    f"{sum(episode_tokens(e.usage) for e in mine) / n:,.0f}",
                    f"{sum(e.seconds for e in mine) / n:.0f} s",
                ]
            )
    return rows


_HEADER = [
    "category",
    "mode",
    "items right (95 % CI)",
    "turns right (95 % CI)",
    "force-quit",
    "empty turns",
    "format errors / item",
    "refused calls / item",
    "turns told of a mistake: right",
    "replies after a failed one: repeating a failure",
    "answers copying an example",
    "answers repeating the feedback",
    "steps / item",
    "tokens / item",
    "time / item",
]
_EXPLAIN = (
    "An item is right when BFCL's own multi-turn checker accepts it; a turn is right when the checker "
    "accepts the item's first turns up to it. Force-quit: a turn that made 20 steps with calls and called "
    "again (BFCL's limit; the item fails). Empty turns: turns whose ground truth has calls in which no call "
    "ran. Format errors: replies that did not parse (text modes; each was answered with feedback, or ended "
    "the turn in `text-no-feedback`, `text-first-failure` and `bfcl-prompt`). Refused calls: calls not run "
    "because the tool is unknown or the arguments do not fit its schema (the model is told why; in "
    "`text-first-failure` the turn ends there). Turns told of a mistake: "
    "turns in which the model got a format error or a refused call back, and how many of them were right "
    "(what the feedback turned into right turns; bench.bfcl.multi_report.feedback_turns). Force-quits by "
    "cause: the last reply repeated a failed reply of its turn (repeating), failed otherwise (failing), or its "
    "calls ran and no answer came (calling). Replies after a failed one: how many of the replies that came "
    "right after a failed reply (a format error, a failed call or an answer sent back) repeat a failed "
    "reply of the same turn, the same text or the same calls (bench.bfcl.loop_stats). Answers copying an example: "
    "turns ended by an answer that holds a phrase of a worked example instead of a result, or says in "
    "their form that a tool ran when the turn did not run it "
    "(bench.answers.copied_example); answers repeating the feedback: turn answers holding a sentence of "
    "what textagent tells the model when a reply or call goes wrong (bench.answers.repeated_feedback). "
    "Tokens: prompt tokens the server evaluated plus tokens generated."
)


def _force_quits(loops: Sequence[Any], n: int) -> str:
    """Force-quits of ``n`` items, by cause (loop_stats.FORCE_QUIT_CAUSES)."""
    causes = [s.force_quit for s in loops if s.force_quit is not None]
    by = ", ".join(f"{c} {causes.count(c)}" for c in FORCE_QUIT_CAUSES if causes.count(c))
    return f"{len(causes)}/{n}" + (f" ({by})" if by else "")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _retried(items: Sequence[Episode], modes: Sequence[str]) -> list[str]:
    """Lines of what the loop's retries did, per mode, when they did it: replies kept out of the
    conversation (``--retry rewind``), answers sent back after reported errors (``--retry errors``)."""
    stats = {m: [loop_stats(e) for e in items if e.mode == m] for m in modes}
    out = []
    for what, part, count in (
        ("Replies kept out of the conversation as repeats", "rewind", lambda s: s.rewound),
        ("Answers sent back after calls whose results reported an error", "errors", lambda s: s.after_error),
    ):
        said = [
            f"{m} {sum(c)} (in {sum(1 for x in c if x)} of {len(c)} items)"
            for m, c in ((m, [count(s) for s in st]) for m, st in stats.items())
            if sum(c)
        ]
        if said:
            out += [f"{what} (`--retry {part}`): {', '.join(said)}.", ""]
    return out


def _by_category(items: list[Episode]) -> list[tuple[str, list[Episode]]]:
    """All the items (named ""), then, when they hold more than one category, each category's:
    a goal can be set per category (multi_turn_miss_func apart from multi_turn_miss_param)."""
    kinds = sorted({e.kind for e in items})
    if len(kinds) < 2:
        return [("", items)]
    return [("", items), *((k, [e for e in items if e.kind == k]) for k in kinds)]


def render_multi_turn(episodes: Sequence[Episode], modes: Sequence[str]) -> str:
    """The section, or "" when the run has no multi-turn items."""
    finished = _items(episodes)
    if not finished:
        return ""
    out = ["## BFCL multi-turn", "", _table(_HEADER, multi_turn_rows(finished, modes)), "", _EXPLAIN, ""]
    out += _retried(finished, modes)
    shown = [m for m in modes if any(e.mode == m for e in finished)]
    if len(shown) >= 2:
        items, turns = [], []
        groups = _by_category(finished)
        # each mode's turns worked out once per group, not once per pair of modes it is in
        outcomes = {(category, m): turn_outcomes(some, m) for category, some in groups for m in shown}
        for a, b in paired.mode_pairs(shown):
            for category, some in groups:
                on_items = paired.pair(some, a, b)
                if category and not on_items.items:
                    continue  # a category one of the two modes has not run: nothing to pair
                item_row = paired.row(on_items)
                turn_row = paired.row(paired.pair_outcomes(a, b, outcomes[category, a], outcomes[category, b]))
                if category:
                    item_row[0] = turn_row[0] = f"{item_row[0]}, {category}"
                items.append(item_row)
                turns.append(turn_row)
        out += [
            "### Paired, on items",
            "",
            _table(paired.HEADER, items),
            "",
            TURNS_HEADING,
            "",
            _table([paired.HEADER[0], "turns both ran", *paired.HEADER[2:]], turns),
            "",
            paired.EXPLAIN,
            "",
        ]
    return "\n".join(out)
