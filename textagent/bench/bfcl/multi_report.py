"""The BFCL multi-turn section of a bench report: items and turns right per mode and category, with
95 % intervals, how turns ended, what an item cost, and paired tests between the modes.

An item is right when BFCL's checker accepts it; a turn is right when the checker accepts the
item's first turns up to and including it (``turns_right`` of the record): the turn accuracy
says how far into the conversation each mode stays right. Pairs are compared on the items (and
on the turns) both modes finished: exact McNemar, Newcombe's interval (bench.paired).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import paired
from ..metrics import called_tools, copied_example, episode_tokens, latest_records, repeated_feedback, wilson
from .loop_stats import FORCE_QUIT_CAUSES, loop_stats

__all__ = ["TURNS_HEADING", "feedback_turns", "multi_turn_rows", "render_multi_turn", "turn_answers", "turn_outcomes"]


TURNS_HEADING = "### Paired, on turns (a turn is right when every turn up to it is)"


def _records(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in latest_records(records)
        if isinstance(r.get("multi_turn"), Mapping) and r.get("stop_reason") not in ("backend_error", "error")
    ]


def turn_outcomes(records: Sequence[Mapping[str, Any]], mode: str) -> dict[tuple[str, int, int], bool]:
    """{(task, repeat, turn): right?} of one mode: a turn is right when every turn up to it is."""
    out = {}
    for r in _records(records):
        if r.get("mode") != mode:
            continue
        mt = r["multi_turn"]
        for k in range(int(mt.get("turns") or 0)):
            out[(str(r["task"]), int(r.get("repeat", 0)), k)] = k < int(mt.get("turns_right") or 0)
    return out


def turn_answers(record: Mapping[str, Any]) -> list[tuple[str, set[str]]]:
    """The answers that ended the turns of one item, in order (each turn's ``result`` in the
    trace), each with the names of the tools its turn called."""
    answers: list[tuple[str, set[str]]] = []
    called: set[str] = set()
    for event in record.get("trace") or ():
        if not isinstance(event, Mapping):
            continue
        if event.get("type") == "start":
            called = set()
        elif event.get("type") == "step":
            called |= called_tools(event)
        elif event.get("type") == "result" and event.get("answer") is not None:
            answers.append((str(event["answer"]), called))
    return answers


def feedback_turns(record: Mapping[str, Any]) -> tuple[int, int]:
    """(right, told): the item's turns in which the model was told of a format error or a refused
    call, and how many of those turns were right. What the loop's feedback turned into right turns."""
    mt = record["multi_turn"]
    told = right = 0
    for k, turn in enumerate(mt.get("per_turn") or ()):
        if int(turn.get("format_errors") or 0) or int(turn.get("refused_calls") or 0):
            told += 1
            right += k < int(mt.get("turns_right") or 0)
    return right, told


def _pct(k: int, n: int) -> str:
    if not n:
        return "—"
    low, high = wilson(k, n)
    return f"{100 * k / n:.1f} % ({100 * low:.0f}–{100 * high:.0f} %), {k}/{n}"


def multi_turn_rows(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> list[list[str]]:
    """One row per (category, mode)."""
    rows = []
    recs = _records(records)
    categories = list(dict.fromkeys(str(r.get("kind")) for r in recs))
    for category in categories:
        for mode in modes:
            mine = [r for r in recs if r.get("mode") == mode and r.get("kind") == category]
            if not mine:
                continue
            n = len(mine)
            mts = [r["multi_turn"] for r in mine]
            turns = sum(int(m.get("turns") or 0) for m in mts)
            right_turns = sum(int(m.get("turns_right") or 0) for m in mts)
            answers = [a for r in mine for a in turn_answers(r)]
            told = [feedback_turns(r) for r in mine]
            loops = [loop_stats(r) for r in mine]
            rows.append(
                [
                    category,
                    mode,
                    _pct(sum(bool(r.get("success")) for r in mine), n),
                    _pct(right_turns, turns),
                    _force_quits(loops, n),
                    f"{sum(int(m.get('empty_turns') or 0) for m in mts)}/{turns}",
                    f"{sum(int(m.get('format_errors') or 0) for m in mts) / n:.2f}",
                    f"{sum(int(m.get('refused_calls') or 0) for m in mts) / n:.2f}",
                    f"{sum(k for k, _ in told)}/{sum(t for _, t in told)}",
                    f"{sum(s.repeating for s in loops)}/{sum(s.after_failure for s in loops)}",
                    f"{sum(copied_example(a, called) for a, called in answers)}/{len(answers)}",
                    f"{sum(repeated_feedback(a) for a, _ in answers)}/{len(answers)}",
                    f"{sum(int(r.get('steps') or 0) for r in mine) / n:.1f}",
                    f"{sum(episode_tokens(r.get('usage')) for r in mine) / n:,.0f}",
                    f"{sum(float(r.get('seconds') or 0) for r in mine) / n:.0f} s",
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
    "the turn in `text-no-feedback` and `bfcl-prompt`). Refused calls: calls not run because the tool is "
    "unknown or the arguments do not fit its schema (the model is told why). Turns told of a mistake: "
    "turns in which the model got a format error or a refused call back, and how many of them were right "
    "(what the feedback turned into right turns; bench.bfcl.multi_report.feedback_turns). Force-quits by "
    "cause: the last reply repeated a failed reply of its turn (repeating), failed otherwise (failing), or its "
    "calls ran and no answer came (calling). Replies after a failed one: how many of the replies that came "
    "right after a failed reply (a format error, a failed call or an answer sent back) repeat a failed "
    "reply of the same turn, the same text or the same calls (bench.bfcl.loop_stats). Answers copying an example: "
    "turns ended by an answer that holds a phrase of a worked example instead of a result, or says in "
    "their form that a tool ran when the turn did not run it "
    "(bench.metrics.copied_example); answers repeating the feedback: turn answers holding a sentence of "
    "what textagent tells the model when a reply or call goes wrong (bench.metrics.repeated_feedback). "
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


def _by_category(recs: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """All the records (named ""), then, when they hold more than one category, each category's:
    a goal can be set per category (multi_turn_miss_func apart from multi_turn_miss_param)."""
    kinds = sorted({str(r.get("kind")) for r in recs})
    if len(kinds) < 2:
        return [("", recs)]
    return [("", recs), *((k, [r for r in recs if str(r.get("kind")) == k]) for k in kinds)]


def render_multi_turn(records: Sequence[Mapping[str, Any]], modes: Sequence[str]) -> str:
    """The section, or "" when the run has no multi-turn items."""
    recs = _records(records)
    if not recs:
        return ""
    out = ["## BFCL multi-turn", "", _table(_HEADER, multi_turn_rows(recs, modes)), "", _EXPLAIN, ""]
    shown = [m for m in modes if any(r.get("mode") == m for r in recs)]
    if len(shown) >= 2:
        items, turns = [], []
        groups = _by_category(recs)
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
