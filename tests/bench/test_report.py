"""report.md / report.png rendering and the comparison of two runs."""

from __future__ import annotations

import builtins

import pytest
from benchruns import read_records, write_episodes

from textagent.bench import report as REP
from textagent.bench.runner import EPISODES_FILE


def test_markdown_has_the_side_by_side_table_taxonomy_and_worst_tasks(tmp_path, make_run):
    run = make_run(tmp_path / "run", broken=("bare-is-prime", "single-calc-mul"))
    meta, records = REP.load_run(run)
    text = REP.render_markdown(meta, records, chart="report.png")
    assert "| metric | text | baseline |" in text
    assert "success rate (95 % CI)" in text and "tokens per solved task" in text and "KV reuse" in text
    assert "recovery rate" in text and "native decode-failure rate" in text and "time per task" in text
    # text mode: 5/7 solved, baseline fails the bare-argument task too (not JSON) -> shown per mode
    assert "**71.4 %**" in text and "5/7" in text
    assert "| no call where one was needed | 2 |" in text
    assert "| `bare-is-prime` | bare | 0/1 | no_call |" in text
    assert "`textagent bench --report <this folder> --trace-of TASK [--modes MODE]` prints it" in text
    assert "Not run: **native**: no mode= yet" in text
    assert "**partial run**: 14 of 99 episodes" in text
    assert "The chart of success, tokens per solved task and failures by mode is `report.png` beside this file" in text
    assert "![" not in text  # a run committed keeps report.md, not the chart
    assert "Test CPU, 2 cores" in text


def test_every_solved_mode_says_so(tmp_path, make_run):
    run = make_run(tmp_path / "run", modes=("text",))
    text = REP.render_markdown(*REP.load_run(run))
    assert "Every task solved." in text and "**100.0 %**" in text


def test_write_report_draws_the_chart(tmp_path, make_run):
    pytest.importorskip("matplotlib")
    run = make_run(tmp_path / "run", broken=("bare-is-prime",))
    path = REP.write_report(run)
    assert (run / "report.png").stat().st_size > 10_000
    assert "`report.png` beside this file" in path.read_text()


def _outline(text, renderer):
    """The (possibly slanted) rectangle a text's glyphs occupy, in display coordinates."""
    import numpy as np
    from matplotlib.path import Path as MPath

    box = text.get_window_extent(renderer)
    angle = np.radians(text.get_rotation())
    if not angle:
        return MPath([(box.x0, box.y0), (box.x1, box.y0), (box.x1, box.y1), (box.x0, box.y1), (box.x0, box.y0)])
    # a slanted label: its bounding box is the slanted rectangle's; recover the rectangle
    w, h, _ = renderer.get_text_width_height_descent(text.get_text(), text.get_fontproperties(), ismath=False)
    h *= len(text.get_text().splitlines())
    c, s_ = np.cos(angle), np.sin(angle)
    # ha="right", rotation_mode="anchor": the top right corner is the highest point, and the
    # bottom right one, h * sin(angle) to its right, the rightmost
    anchor = np.array([box.x1 - h * s_, box.y1])
    corners = [(0, 0), (-w, 0), (-w, -h), (0, -h), (0, 0)]
    return MPath([anchor + (x * c - y * s_, x * s_ + y * c) for x, y in corners])  # noqa: RUF005 - numpy addition


def test_chart_labels_do_not_overlap(tmp_path, monkeypatch, make_run):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from textagent.bench.metrics import summarize

    modes = ("text", "constrained", "native", "native+fallback", "baseline", "bfcl-prompt")
    run = make_run(tmp_path / "run", broken=("bare-is-prime", "single-calc-mul"), modes=modes)
    _, records = REP.load_run(run)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    assert REP.write_chart(summarize(records, modes), tmp_path / "c.png", records) is None
    fig = figures[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:3]:
        shapes = [_outline(t, renderer) for t in ax.get_xticklabels() if t.get_text()]
        assert len(shapes) == len(modes)
        assert not any(a.intersects_path(b, filled=True) for i, a in enumerate(shapes) for b in shapes[i + 1 :]), (
            ax.get_title()
        )
    success = fig.axes[0]
    percents = [t for t in success.texts if t.get_text().endswith("%")]
    tops = [max(seg[:, 1].max() for seg in c.get_segments()) for c in success.collections]  # error bar tops
    top_of = [
        max(seg[:, 1].max() for seg in success.collections[0].get_segments() if abs(seg[0, 0] - x) < 0.01)
        for x in range(len(modes))
    ]
    assert len(percents) == len(modes) and tops
    for x, text in enumerate(percents):  # each percentage sits above its error bar
        assert text.get_position()[1] > top_of[x] and text.get_va() == "bottom"
    cost = fig.axes[1]
    labels = [t.get_window_extent(renderer) for t in cost.texts]
    assert not any(a.overlaps(b) for i, a in enumerate(labels) for b in labels[i + 1 :])


def test_write_report_without_matplotlib_says_so(tmp_path, monkeypatch, make_run):
    run = make_run(tmp_path / "run")
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    text = REP.write_report(run).read_text()
    assert not (run / "report.png").exists()
    assert "matplotlib is not installed" in text and "`report.png` beside" not in text


def test_empty_and_missing_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / EPISODES_FILE).write_text("")
    text = REP.write_report(tmp_path / "empty").read_text()
    assert "No episodes finished yet." in text
    with pytest.raises(FileNotFoundError):
        REP.load_run(tmp_path / "nothing")


def test_report_has_paired_differences_for_every_pair_of_modes(tmp_path, make_run):
    run = make_run(tmp_path / "run", modes=("text", "baseline"), meta={"modes": ["text", "baseline", "constrained"]})
    episodes = read_records(run)
    episodes += [{**r, "mode": "constrained"} for r in episodes if r["mode"] == "baseline"]
    for r in episodes:  # text loses three tasks the others solve
        if r["mode"] == "text" and r["task"] in ("bare-is-prime", "single-calc-mul", "typed-currency"):
            r["success"] = False
    write_episodes(run, episodes)
    text = REP.render_markdown(*REP.load_run(run))
    section = text.split("## Paired differences", 1)[1].split("\n## ", 1)[0]
    assert "exact McNemar p" in section
    # baseline (and so its copy) fails bare-is-prime: text loses two items to it
    assert "| text − constrained | 7 | 4 / 6 | 0 | 2 | -28.6 (" in section and "| 0.5 | noise |" in section
    assert "| text − baseline |" in section and "| baseline − constrained | 7 | 6 / 6 | 0 | 0 | +0.0" in section


def test_a_single_mode_report_has_no_paired_section(tmp_path, make_run):
    run = make_run(tmp_path / "run", modes=("text",))
    assert "Paired differences" not in REP.render_markdown(*REP.load_run(run))


def test_malformed_records_and_run_json_are_named_and_skipped_not_tracebacks(tmp_path, caplog):
    """Hardening round 4, B1: `--report` and `--resume` on records of the wrong shape."""
    import json as _json

    from textagent.bench.cli import main as bench_main

    good = {
        "task": "t1",
        "mode": "text",
        "repeat": 0,
        "success": True,
        "steps": 1,
        "seconds": 1.0,
        "usage": {"prompt_tokens": 5},
        "checks": [],
        "calls": [],
        "attempted": [],
        "trace": [],
    }
    bad = [dict(good, task="t2", repeat="x"), dict(good, task="t3", steps="many"), dict(good, task="t4", usage=[1])]
    (tmp_path / "episodes.jsonl").write_text("\n".join(_json.dumps(r) for r in [good, *bad]) + "\n")
    (tmp_path / "run.json").write_text(_json.dumps({"modes": 5}))
    assert bench_main(["--report", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "t1" in report or "1/1" in report or "100.0 %" in report
    logged = caplog.text
    assert "'repeat' must be a whole number" in logged and "'steps' must be a whole number" in logged
    assert "'usage' must be an object of numbers" in logged and "'modes' must be a list of mode names" in logged
    # --resume refuses the run.json, naming the field, before anything starts
    code = bench_main(["--out", str(tmp_path), "--resume", "--endpoint", "http://127.0.0.1:9", "--modes", "text"])
    assert code == 2


def test_trace_of_prints_an_episodes_trace_from_the_records(tmp_path, capsys, make_run):
    import json as _json

    from textagent.bench.cli import main as bench_main

    run = make_run(tmp_path / "run", broken=("bare-is-prime",))
    assert bench_main(["--report", str(run), "--trace-of", "bare-is-prime", "--modes", "text"]) == 0
    lines = [_json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines and {x["mode"] for x in lines} == {"text"} and lines[0]["type"] == "start"
    assert bench_main(["--report", str(run), "--trace-of", "no-such-task"]) == 1
    assert bench_main(["--trace-of", "bare-is-prime"]) == 2


def test_settings_line_names_the_example_style_and_an_older_run_read_as_placeholder(tmp_path, make_run):
    settings = {"reply_tokens": 256, "temperature": 0.0, "seed": 0, "max_seconds": 300}
    run = make_run(tmp_path / "a", meta={"settings": {**settings, "example_style": "concrete"}})
    assert "worked examples in the concrete style (`--example-style`)" in REP.render_markdown(*REP.load_run(run))
    old = make_run(tmp_path / "b", meta={"settings": settings})
    assert "worked examples in the placeholder style" in REP.render_markdown(*REP.load_run(old))
    assert "--example-tool" not in REP.render_markdown(*REP.load_run(old))
    closest = make_run(tmp_path / "c", meta={"settings": {**settings, "example_tool": "closest"}})
    assert "the tools closest to each question (`--example-tool closest`)" in REP.render_markdown(
        *REP.load_run(closest)
    )


def test_an_older_runs_plain_episodes_file_reads_as_a_compressed_one(tmp_path, capsys, make_run):
    """--report, --trace-of and --compare on a run written before the episodes were compressed."""
    import gzip
    import shutil

    from textagent.bench.cli import main as bench_main
    from textagent.bench.compare import compare_runs
    from textagent.bench.runner import PLAIN_EPISODES_FILE

    run = make_run(tmp_path / "run", broken=("bare-is-prime",))
    old = shutil.copytree(run, tmp_path / "old")
    (old / PLAIN_EPISODES_FILE).write_bytes(gzip.decompress((old / EPISODES_FILE).read_bytes()))
    (old / EPISODES_FILE).unlink()
    assert REP.load_run(old) == REP.load_run(run)
    assert REP.write_report(old).read_text() == REP.write_report(run).read_text()
    traces = []
    for folder in (run, old):
        assert bench_main(["--report", str(folder), "--trace-of", "bare-is-prime"]) == 0
        traces.append(capsys.readouterr().out)
    assert traces[0] == traces[1] and traces[0]
    assert "Same replies, word for word: 7 of the 7 episodes both ran." in compare_runs(run, old)
    assert REP.load_run(old / PLAIN_EPISODES_FILE) == REP.load_run(run / EPISODES_FILE)
