"""The bench report: ``report.md`` (modes side by side, failure taxonomy, worst tasks; their
traces are printed by ``--trace-of``) and ``report.png`` (when matplotlib is installed), which
report.md names but does not show: runs committed to a repository keep report.md and run.json,
and the chart is drawn again by ``--report``. The diff of two runs is bench.compare."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import paired
from .facts import FAILURE_TITLES, FAILURES
from .metrics import (
    ModeSummary,
    latest,
    native_tools,
    summarize,
    task_scores,
    throughput,
)
from .records import Episode, meta_problem
from .run_file import RUN_FILE
from .runner import EPISODES_FILE, episodes_file, load_episodes

__all__ = [
    "RUN_FILE",
    "load_run",
    "metric_rows",
    "render_markdown",
    "write_chart",
    "write_report",
]

log = logging.getLogger("textagent.bench")


def load_run(path: str | Path) -> tuple[dict[str, Any], list[Episode]]:
    """(run metadata, the latest of each episode) of a run directory or an episodes file."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    meta: dict[str, Any] = {}
    if (folder / RUN_FILE).exists():
        try:
            meta = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        problem = meta_problem(meta)
        if problem is not None:  # the report is still written, from the episodes alone
            log.warning("%s: not used (%s)", folder / RUN_FILE, problem)
            meta = {}
    episodes = latest(load_episodes(path))
    if not episodes and not episodes_file(path).exists():
        raise FileNotFoundError(f"no bench results at {path} (expected {EPISODES_FILE})")
    return meta, episodes


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def _pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x * 100:.{digits}f} %"


def _num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def metric_rows(s: ModeSummary) -> list[tuple[str, str]]:
    """(metric, formatted value) for one mode, in table order."""
    if not s.episodes:
        return [(name, "—") for name in _METRIC_NAMES]
    recovery = (
        "— (none)" if s.recovery_rate is None else f"{_pct(s.recovery_rate, 0)} ({s.recovered}/{s.first_step_errors})"
    )
    return [
        (
            "success rate (95 % CI)",
            f"**{_pct(s.success_rate)}** ({_pct(s.ci_low, 0)}–{_pct(s.ci_high, 0)}), {s.successes}/{s.episodes}",
        ),
        ("mean steps", _num(s.mean_steps, 2)),
        ("tokens per solved task", _num(s.tokens_per_solved)),
        ("prompt tokens sent per episode", _num(s.prompt_tokens_per_episode)),
        ("KV reuse", _pct(s.kv_reuse)),
        (
            "step 1: prompt tokens evaluated / sent",
            "—" if s.first_prompt is None else f"{_num(s.first_evaluated)} / {_num(s.first_prompt)}",
        ),
        ("format-error rate (per step)", _pct(s.format_error_rate)),
        ("recovery rate (first-step format errors fixed)", recovery),
        ("native decode-failure rate (per step)", _pct(s.decode_failure_rate) if native_tools(s.mode) else "n/a"),
        ("time per task", f"{s.seconds_per_task:.1f} s"),
        ("tool errors", str(s.tool_errors)),
        ("answers copying an example's phrase", str(s.copied_answers)),
        ("answers repeating the feedback", str(s.feedback_answers)),
        ("answered without a call where one was needed", str(s.answered_without_call)),
    ]


_METRIC_NAMES = [
    "success rate (95 % CI)",
    "mean steps",
    "tokens per solved task",
    "prompt tokens sent per episode",
    "KV reuse",
    "step 1: prompt tokens evaluated / sent",
    "format-error rate (per step)",
    "recovery rate (first-step format errors fixed)",
    "native decode-failure rate (per step)",
    "time per task",
    "tool errors",
    "answers copying an example's phrase",
    "answers repeating the feedback",
    "answered without a call where one was needed",
]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    align = align or ("l" + "r" * (len(header) - 1))
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _modes(meta: Mapping[str, Any], episodes: Sequence[Episode]) -> list[str]:
    seen = list(dict.fromkeys(e.mode for e in episodes))
    order = [m for m in meta.get("modes", []) if m in seen]
    return order + [m for m in seen if m not in order]


def render_markdown(meta: Mapping[str, Any], episodes: Sequence[Episode], *, chart: str | None = None) -> str:
    records = latest(episodes)
    modes = _modes(meta, records)
    summaries = summarize(records, modes)
    out: list[str] = ["# textagent bench report", ""]
    facts = _facts(meta, len(records))
    out += [*facts, ""] if facts else []

    out += ["## Modes side by side", ""]
    if modes:
        rows = [[name] + [dict(metric_rows(summaries[m]))[name] for m in modes] for name in _METRIC_NAMES]
        out.append(_table(["metric", *modes], rows))
    else:
        out.append("No episodes finished yet.")
    unavailable = meta.get("unavailable") or {}
    if unavailable:
        out += ["", "Not run: " + "; ".join(f"**{m}**: {why}" for m, why in unavailable.items()) + "."]
    out += ["", _DEFINITIONS, ""]
    out += _throughput_section(records)
    from .bfcl.report import render_bfcl

    first_reply = bool((meta.get("settings") or {}).get("first_reply"))
    bfcl_section = render_bfcl(records, modes, first_reply=first_reply)
    if bfcl_section:
        out += [bfcl_section, ""]
    from .bfcl.multi_report import render_multi_turn

    multi_section = render_multi_turn(records, modes)
    if multi_section:
        out += [multi_section, ""]
    paired_section = render_paired(records, modes)
    if paired_section:
        out += [paired_section, ""]

    if chart:
        out += [
            f"The chart of success, tokens per solved task and failures by mode is `{chart}` beside this file "
            "(`textagent bench --report <this folder>` draws it again).",
            "",
        ]
    elif meta.get("chart_note"):
        out += [f"_{meta['chart_note']}_", ""]

    out += _failure_section(summaries, modes)
    out += _worst_section(records, modes)
    return "\n".join(out).rstrip() + "\n"


def _facts(meta: Mapping[str, Any], finished: int) -> list[str]:
    """The lines under the title: when, where, what model, which tasks, the settings, the commands."""
    facts = []
    if meta.get("started"):
        facts.append(
            f"- **date**: {meta['started']}" + (f" (finished {meta['finished']})" if meta.get("finished") else "")
        )
    if meta.get("machine"):
        m = meta["machine"]
        facts.append(
            f"- **machine**: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('system', '')}, "
            f"Python {m.get('python', '?')}"
        )
    if meta.get("model"):
        facts.append(f"- **model**: {meta['model']}")
    if meta.get("endpoints"):
        facts.append(
            f"- **endpoints**: {', '.join(meta['endpoints'])} (concurrency {meta.get('concurrency', '?')} "
            "per endpoint, episodes pinned to slots)"
        )
    if meta.get("tasks_file"):
        facts.append(
            f"- **tasks**: {meta.get('n_tasks', '?')} from `{meta['tasks_file']}`, repeat {meta.get('repeat', 1)}"
        )
    if meta.get("settings"):
        st = meta["settings"]
        facts.append(
            f"- **settings**: reply_tokens {st.get('reply_tokens')}, temperature {st.get('temperature')}, "
            f"seed {st.get('seed')}, max_seconds {st.get('max_seconds')} per episode"
            + (", first reply only" if st.get("first_reply") else "")
            + (
                ", **ablation: native modes shown the text modes' placeholder examples**"
                if st.get("native_examples")
                else ""
            )
            + (", text modes list the tools grouped (`--grouped-listing`)" if st.get("grouped_listing") else "")
            + (
                f", **the loop retries after a failed reply: {st['retry']}** (`--retry`"
                + (f", temperature {st.get('retry_temperature')}" if "sample" in st["retry"] else "")
                + (f", odds threshold {st.get('retry_odds')}" if "odds" in st["retry"] else "")
                + (f", verify threshold {st.get('retry_verify')}" if "verify" in st["retry"] else "")
                + ")"
                if st.get("retry") not in (None, "none")
                else ""
            )
            # a run from before the option had the placeholder style
            + f", worked examples in the {st.get('example_style', 'placeholder')} style (`--example-style`)"
            + (
                ", showing the tools closest to each question (`--example-tool closest`)"
                if st.get("example_tool") == "closest"
                else ""
            )
        )
    if len(meta.get("commands", [])) > 1:
        facts.append(
            "- **commands** (each added to the run with `--resume`): " + "; ".join(f"`{c}`" for c in meta["commands"])
        )
    elif meta.get("command"):
        facts.append(f"- **command**: `{meta['command']}`")
    planned = meta.get("planned")
    if planned and planned > finished:
        facts.append(
            f"- **partial run**: {finished} of {planned} episodes finished (the same command with `--resume` goes on)"
        )
    return facts


def _throughput_section(records: Sequence[Episode]) -> list[str]:
    """The "Throughput per endpoint" section (none without timings)."""
    out: list[str] = []
    speeds = throughput(records)
    if speeds:
        out += [
            "## Throughput per endpoint",
            "",
            _table(
                [
                    "endpoint",
                    "episodes",
                    "wall time",
                    "episodes / min",
                    "prompt tokens evaluated / s",
                    "tokens generated / s",
                ],
                [
                    [
                        e,
                        str(int(t["episodes"])),
                        f"{t['wall_seconds']:.0f} s",
                        f"{t['episodes_per_minute']:.2f}",
                        f"{t['prompt_tokens_per_second']:.1f}",
                        f"{t['generated_tokens_per_second']:.1f}",
                    ]
                    for e, t in speeds.items()
                ],
            ),
            "",
        ]
    return out


def _failure_section(summaries: Mapping[str, Any], modes: Sequence[str]) -> list[str]:
    """The failure taxonomy and the success by task kind, a column a mode."""
    out: list[str] = []
    out += ["## Failure taxonomy", "", "Each failed episode gets the first class that applies, in this order.", ""]
    if modes:
        rows = []
        for label in FAILURES:
            counts = [summaries[m].failures.get(label, 0) for m in modes]
            rows.append([FAILURE_TITLES[label], *[str(c) for c in counts]])
        rows.append(["**solved**", *[f"**{summaries[m].successes}**" for m in modes]])
        rows.append(["episodes", *[str(summaries[m].episodes) for m in modes]])
        out.append(_table(["failure class", *modes], rows))
        out += ["", "### Success by task kind", ""]
        kinds = list(dict.fromkeys(k for m in modes for k in summaries[m].by_kind))
        rows = [[k, *[_frac(summaries[m].by_kind.get(k)) for m in modes]] for k in kinds]
        out.append(_table(["kind", *modes], rows))
    return out


def _worst_section(records: Sequence[Episode], modes: Sequence[str]) -> list[str]:
    """The five worst tasks of each mode."""
    out: list[str] = []
    out += [
        "",
        "## Worst tasks per mode",
        "",
        f"An episode's trace (every reply, call, result and observation) is in `{EPISODES_FILE}`: "
        "`textagent bench --report <this folder> --trace-of TASK [--modes MODE]` prints it.",
        "",
    ]
    for mode in modes:
        worst = [t for t in task_scores(records, mode) if t["successes"] < t["episodes"]][:5]
        out += [f"### {mode}", ""]
        if not worst:
            out += ["Every task solved.", ""]
            continue
        rows = []
        for t in worst:
            labels = ", ".join(sorted(set(t["failures"]))) or "—"
            rows.append(
                [f"`{t['task']}`", t["kind"], f"{t['successes']}/{t['episodes']}", labels, f"{t['mean_steps']:.1f}"]
            )
        out += [_table(["task", "kind", "solved", "failure", "steps"], rows, "lllll"), ""]
    return out


def render_paired(records: Sequence[Episode], modes: Sequence[str]) -> str:
    """The "Paired differences" section: every pair of modes on the episodes both finished
    (BFCL items: the first reply); empty with fewer than two modes."""
    modes = [m for m in modes if paired.outcomes(records, m)]
    if len(modes) < 2:
        return ""
    rows = [paired.row(paired.pair(records, a, b)) for a, b in paired.mode_pairs(modes)]
    return "\n".join(["## Paired differences", "", paired.EXPLAIN, "", _table(paired.HEADER, rows), ""])


def _frac(pair: list[int] | None) -> str:
    if not pair:
        return "—"
    return f"{pair[0]}/{pair[1]}"


_DEFINITIONS = (
    "Success: the model gave a final answer and every check of the task passed (95 % Wilson interval). "
    "Tokens per solved task: prompt tokens the server computed plus generated tokens, summed over all "
    "episodes of the mode, divided by the episodes solved. KV reuse: prompt tokens reused from the "
    "server's KV cache / prompt tokens sent. Format-error rate: replies that could not be used / replies. "
    "Recovery rate: episodes whose first reply was a format error and that later produced a usable reply "
    "after the feedback. Native decode failure: a native-mode reply whose call came back as text in "
    "`content` instead of `tool_calls`. `baseline` is the seed-style loop (regex `TOOL: (\\w+) ARGS: (.*)` "
    "+ `json.loads`, one call per reply, no feedback) on the same prompt. Answers copying an example's "
    "phrase: final answers holding a phrase of the worked examples, or saying in their form that a tool ran "
    "when it did not (`bench.answers.copied_example`); "
    "answers repeating the feedback: final answers holding a whole sentence of what textagent tells the model "
    "when a reply or call goes wrong (`bench.answers.repeated_feedback`)."
)


# --------------------------------------------------------------------------------------------
# Chart
# --------------------------------------------------------------------------------------------


def _mode_ticks(ax: Any, xs: range, modes: Sequence[str]) -> None:
    """Mode names under the bars that do not run together: up to three side by side, long ones
    broken after ``+``/``-`` ("native+" / "fallback"); more, slanted."""
    if len(modes) <= 3:
        ax.set_xticks(list(xs), [re.sub(r"(?<=[+-])", "\n", m) if len(m) > 8 else m for m in modes], fontsize=9)
    else:
        ax.set_xticks(list(xs), modes, rotation=30, ha="right", rotation_mode="anchor", fontsize=9)


def write_chart(summaries: Mapping[str, ModeSummary], path: str | Path, records: Sequence[Episode] = ()) -> str | None:
    """Draw report.png; returns None on success, else why it was not drawn. With BFCL records,
    a second row shows the accuracy per BFCL category and mode."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "report.png was not drawn: matplotlib is not installed (pip install 'textagent[bench]')"
    modes = [m for m, s in summaries.items() if s.episodes]
    if not modes:
        return "report.png was not drawn: no episodes"
    from .bfcl.report import draw_categories

    has_bfcl = any(e.bfcl is not None for e in records)
    if has_bfcl:
        fig = plt.figure(figsize=(15, 10.5))
        grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.15])
        axes = [fig.add_subplot(grid[0, i]) for i in range(3)]
        draw_categories(fig.add_subplot(grid[1, :]), records, modes)
    else:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    xs = range(len(modes))
    rates = [summaries[m].success_rate * 100 for m in modes]
    low = [max(0.0, r - summaries[m].ci_low * 100) for r, m in zip(rates, modes)]
    high = [max(0.0, summaries[m].ci_high * 100 - r) for r, m in zip(rates, modes)]
    ax = axes[0]
    ax.bar(xs, rates, yerr=[low, high], capsize=6, color="#4C72B0")
    _mode_ticks(ax, xs, modes)
    ax.set_ylim(0, 112)  # room for a percentage above a bar whose interval reaches 100
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("success rate, % (95 % CI)")
    ax.set_title("Success by mode")
    for x, r, h in zip(xs, rates, high):  # above the error bar, never on it
        ax.text(x, r + h + 1.5, f"{r:.0f}%", ha="center", va="bottom", fontsize=9)
    ax = axes[1]
    tokens = [summaries[m].tokens_per_solved or 0 for m in modes]
    ax.bar(xs, tokens, color="#55A868")
    _mode_ticks(ax, xs, modes)
    ax.margins(y=0.15)
    ax.set_ylabel("tokens per solved task")
    ax.set_title("Cost per solved task (computed + generated tokens)")
    for x, t, m in zip(xs, tokens, modes):
        ax.text(
            x,
            t,
            f"{t:,.0f}" if summaries[m].tokens_per_solved else "none\nsolved",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax = axes[2]
    bottom = [0] * len(modes)
    colors = plt.get_cmap("tab20")
    from .bfcl.report import ERROR_TITLES

    titles = {**ERROR_TITLES, **FAILURE_TITLES}
    for i, label in enumerate(dict.fromkeys([*FAILURES, *ERROR_TITLES])):
        counts = [summaries[m].failures.get(label, 0) for m in modes]
        if not any(counts):
            continue
        ax.bar(xs, counts, bottom=bottom, label=titles[label], color=colors(i % 20))
        bottom = [b + c for b, c in zip(bottom, counts)]
    _mode_ticks(ax, xs, modes)
    ax.set_ylabel("failed episodes")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Failure taxonomy")
    if any(bottom):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write_report(out_dir: str | Path) -> Path:
    """Write ``report.md`` (and ``report.png`` when matplotlib is installed) for a run directory."""
    out = Path(out_dir)
    meta, records = load_run(out)
    modes = _modes(meta, records)
    note = write_chart(summarize(records, modes), out / "report.png", records=latest(records))
    meta = dict(meta)
    if note:
        meta["chart_note"] = note
    text = render_markdown(meta, records, chart=None if note else "report.png")
    path = out / "report.md"
    path.write_text(text, encoding="utf-8")
    return path
