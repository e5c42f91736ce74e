"""The diff of two bench runs (``textagent bench --compare A B``): each mode's metrics side by
side, paired differences on the episodes both runs finished (and on the turns of BFCL multi-turn
items, and on the agent view of BFCL single-turn items), whether the replies are the same word for word, and the tasks that flipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import paired
from .facts import FAILURE_TITLES, FAILURES
from .metrics import ModeSummary, summarize, task_scores
from .records import Episode
from .report import _METRIC_NAMES, _frac, _modes, _table, load_run, metric_rows

__all__ = ["compare_runs"]


def _delta(a: float | None, b: float | None, *, pct: bool = False, digits: int = 1) -> str:
    if a is None or b is None:
        return "—"
    d = (b - a) * (100 if pct else 1)
    unit = " pp" if pct else ""
    if abs(d) < 0.5 * 10**-digits:
        return f"±0{unit}"
    return f"{d:+,.{digits}f}{unit}"


def _replies(episodes: Sequence[Episode], mode: str) -> dict[tuple[str, int], list[str]]:
    """Each episode's replies, in order (the newest of an episode)."""
    return {(e.task, e.repeat): [s.raw for s in e.result.steps] for e in episodes if e.mode == mode}


def _same_replies(rec_a: Sequence[Episode], rec_b: Sequence[Episode], mode: str) -> str:
    """How many episodes both runs finished had the same replies, word for word (what two
    configurations of one server at temperature 0 should give), and where the first others part."""
    ra, rb = _replies(rec_a, mode), _replies(rec_b, mode)
    both = sorted(ra.keys() & rb.keys())
    differ = [k for k in both if ra[k] != rb[k]]
    line = f"Same replies, word for word: {len(both) - len(differ)} of the {len(both)} episodes both ran."
    if differ:
        task, repeat = differ[0]
        step = next(
            (i for i, (x, y) in enumerate(zip(ra[differ[0]], rb[differ[0]])) if x != y),
            min(len(ra[differ[0]]), len(rb[differ[0]])),
        )
        line += f" They part in {len(differ)}, e.g. `{task}` (repeat {repeat}) at reply {step + 1}."
    return line


def _turn_pairs(
    rec_a: Sequence[Episode], rec_b: Sequence[Episode], modes: Sequence[str], header: list[str]
) -> list[str]:
    """The same pairs on the turns of BFCL multi-turn items (a turn is right when every turn up to
    it is), as a run's own report pairs its modes; nothing unless both runs have such items."""
    from .bfcl.multi_report import TURNS_HEADING, turn_outcomes

    rows = []
    for mode in modes:
        ta, tb = turn_outcomes(rec_a, mode), turn_outcomes(rec_b, mode)
        if ta and tb:
            rows.append(paired.row(paired.pair_outcomes(f"{mode}: B", "A", tb, ta)))
    if not rows:
        return []
    header = [header[0], "turns both ran", *header[2:]]
    return [TURNS_HEADING, "", _table(header, rows), ""]


def _agent_outcomes(episodes: Sequence[Episode], mode: str, kind: str | None = None) -> dict[tuple[str, int], bool]:
    """{(task, repeat): right on BFCL's agent view} of one mode's single-turn BFCL items (of one
    category when ``kind`` is given)."""
    return {
        (e.task, e.repeat): e.bfcl.agent.valid
        for e in episodes
        if e.mode == mode and e.bfcl is not None and (kind is None or e.kind == kind)
    }


def _agent_view_pairs(
    rec_a: Sequence[Episode], rec_b: Sequence[Episode], modes: Sequence[str], header: list[str]
) -> list[str]:
    """The same pairs on BFCL's agent view (every call the episode made before its answer), overall
    and per category: what a loop acting after the first reply (a retry, the gate) changes, where
    BFCL's own view reads the first reply only. Nothing unless both runs have such items; the
    caller leaves it out for runs stopped at their first reply (the views are then the same)."""
    rows = []
    for mode in modes:
        if not (_agent_outcomes(rec_a, mode) and _agent_outcomes(rec_b, mode)):
            continue
        kinds = sorted({str(e.kind) for e in rec_b if e.mode == mode and e.bfcl is not None})
        for kind in (None, *kinds):
            p = paired.pair_outcomes(
                f"{mode}: B" if kind is None else f"{mode}, {kind}: B",
                "A",
                _agent_outcomes(rec_b, mode, kind),
                _agent_outcomes(rec_a, mode, kind),
            )
            if p.items:
                rows.append(paired.row(p))
    if not rows:
        return []
    return [
        "### BFCL's agent view (every call the episode made before its answer), overall and per category",
        "",
        _table(header, rows),
        "",
    ]


def compare_runs(a: str | Path, b: str | Path) -> str:
    """A markdown diff of two runs: metrics per mode (A, B, change), failure classes, tasks that flipped.

    ``DIR:MODE`` takes that mode of the run alone; when A and B each name a different one, B's
    mode is paired with A's (the feedback ablation of one run against the loop of another, say)
    under the name ``A's mode / B's mode``."""
    (meta_a, rec_a, mode_a), (meta_b, rec_b, mode_b) = _side(a), _side(b)
    which = "Each mode of B against the same mode of A"
    if mode_a and mode_b and mode_a != mode_b:
        which = f"Mode `{mode_b}` of B against mode `{mode_a}` of A"
        both = f"{mode_a} / {mode_b}"
        rec_a, rec_b = [replace(e, mode=both) for e in rec_a], [replace(e, mode=both) for e in rec_b]
        meta_a, meta_b = {**meta_a, "modes": [both]}, {**meta_b, "modes": [both]}
    modes = list(dict.fromkeys(_modes(meta_a, rec_a) + _modes(meta_b, rec_b)))
    sa, sb = summarize(rec_a, modes), summarize(rec_b, modes)
    out = [f"# bench compare: A = `{a}`, B = `{b}`", ""]
    shared = [m for m in modes if paired.outcomes(rec_a, m) and paired.outcomes(rec_b, m)]
    if shared:
        rows = []
        for mode in shared:
            p = paired.pair_outcomes(f"{mode}: B", "A", paired.outcomes(rec_b, mode), paired.outcomes(rec_a, mode))
            rows.append(paired.row(p))
        header = ["mode: B − A", *paired.HEADER[1:]]
        header[2], header[3], header[4], header[5] = "right B / A", "B only", "A only", "points B − A (95 % paired CI)"
        out += [
            "## Paired differences",
            "",
            f"{which}, on the episodes (task, repeat) both runs finished. " + paired.EXPLAIN,
            "",
            _table(header, rows),
            "",
        ]
        out += _turn_pairs(rec_a, rec_b, shared, header)
        if not any((m.get("settings") or {}).get("first_reply") for m in (meta_a, meta_b)):
            out += _agent_view_pairs(rec_a, rec_b, shared, header)
    for mode in modes:
        x, y = sa.get(mode, ModeSummary(mode)), sb.get(mode, ModeSummary(mode))
        out += [f"## {mode}", ""]
        if not x.episodes or not y.episodes:
            out += [f"Only in {'B' if not x.episodes else 'A'}.", ""]
            continue
        keys_a = {(e.task, e.repeat) for e in rec_a if e.mode == mode}
        keys_b = {(e.task, e.repeat) for e in rec_b if e.mode == mode}
        if keys_a != keys_b:
            out += [
                f"Note: the runs differ in episodes (only in A: {len(keys_a - keys_b)}, only in B: "
                f"{len(keys_b - keys_a)}); rates are not over the same tasks.",
                "",
            ]
        out += [_same_replies(rec_a, rec_b, mode), ""]
        ra, rb = dict(metric_rows(x)), dict(metric_rows(y))
        numeric = {
            "success rate (95 % CI)": _delta(x.success_rate, y.success_rate, pct=True),
            "mean steps": _delta(x.mean_steps, y.mean_steps, digits=2),
            "tokens per solved task": _delta(x.tokens_per_solved, y.tokens_per_solved, digits=0),
            "prompt tokens sent per episode": _delta(
                x.prompt_tokens_per_episode, y.prompt_tokens_per_episode, digits=0
            ),
            "KV reuse": _delta(x.kv_reuse, y.kv_reuse, pct=True),
            "step 1: prompt tokens evaluated / sent": _delta(x.first_evaluated, y.first_evaluated, digits=0),
            "format-error rate (per step)": _delta(x.format_error_rate, y.format_error_rate, pct=True),
            "recovery rate (first-step format errors fixed)": _delta(x.recovery_rate, y.recovery_rate, pct=True),
            "native decode-failure rate (per step)": _delta(x.decode_failure_rate, y.decode_failure_rate, pct=True),
            "time per task": _delta(x.seconds_per_task, y.seconds_per_task),
            "tool errors": _delta(x.tool_errors, y.tool_errors, digits=0),
            "answers copying an example's phrase": _delta(x.copied_answers, y.copied_answers, digits=0),
            "answers repeating the feedback": _delta(x.feedback_answers, y.feedback_answers, digits=0),
            "answered without a call where one was needed": _delta(
                x.answered_without_call, y.answered_without_call, digits=0
            ),
        }
        rows = [[name, ra[name], rb[name], numeric[name]] for name in _METRIC_NAMES]
        out += [_table(["metric", "A", "B", "B − A"], rows), ""]
        rows = []
        for label in FAILURES:
            ca, cb = x.failures.get(label, 0), y.failures.get(label, 0)
            if ca or cb:
                rows.append([FAILURE_TITLES[label], str(ca), str(cb), f"{cb - ca:+d}"])
        if rows:
            out += [_table(["failure class", "A", "B", "B − A"], rows), ""]
        ta = {t["task"]: t for t in task_scores(rec_a, mode)}
        tb = {t["task"]: t for t in task_scores(rec_b, mode)}
        better = sorted(k for k in ta.keys() & tb.keys() if tb[k]["rate"] > ta[k]["rate"])
        worse = sorted(k for k in ta.keys() & tb.keys() if tb[k]["rate"] < ta[k]["rate"])
        if better:
            out += [
                "Better in B: "
                + ", ".join(
                    f"`{k}` ({'/'.join(sorted(set(ta[k]['failures']))) or '?'} → "
                    f"{_frac([tb[k]['successes'], tb[k]['episodes']])})"
                    for k in better
                ),
                "",
            ]
        if worse:
            out += [
                "Worse in B: "
                + ", ".join(f"`{k}` (→ {'/'.join(sorted(set(tb[k]['failures']))) or '?'})" for k in worse),
                "",
            ]
        if not better and not worse:
            out += ["No task changed outcome.", ""]
    return "\n".join(out).rstrip() + "\n"


def _side(where: str | Path) -> tuple[dict[str, Any], list[Episode], str | None]:
    """(metadata, episodes, the mode asked for or None) of ``DIR`` or ``DIR:MODE``; a directory
    whose own name holds a colon is taken whole."""
    text = str(where)
    folder, sep, mode = text.rpartition(":")
    if not sep or not mode or Path(text).exists() or not Path(folder).exists():
        meta, episodes = load_run(where)
        return dict(meta), list(episodes), None
    meta, episodes = load_run(folder)
    mine = [e for e in episodes if e.mode == mode]
    if not mine:
        have = ", ".join(_modes(meta, episodes)) or "none"
        raise FileNotFoundError(f"{folder} has no episodes of mode {mode!r} (its modes: {have})")
    return {**meta, "modes": [mode]}, mine, mode
