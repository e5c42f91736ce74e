"""Committed runs report the same numbers: two runs of docs/bench (BFCL single-turn and
multi-turn) are read back from their episodes.jsonl.gz (Episode.from_record, once a record) and
reported again; every cell of their committed report's tables of numbers (the modes side by side,
the failure classes, BFCL's categories, views and failures, the multi-turn rows) is the same in
the report made now."""

from __future__ import annotations

import pathlib

import pytest

from textagent.bench.report import load_run, render_markdown

RUNS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "bench"
# the tables whose first column is one of these hold the numbers (the others are words or pairs)
NUMBERS = ("metric", "category", "view", "failure", "failure class", "kind")


def _cells(markdown: str) -> dict[tuple[str, ...], str]:
    """{(table's first header, row, mode, column): cell} of the tables of numbers (a row is named by
    its first cell, and by its mode when a column says)."""
    cells: dict[tuple[str, ...], str] = {}
    header: list[str] | None = None
    for line in [*markdown.splitlines(), ""]:
        if not line.startswith("|"):
            header = None
            continue
        row = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = row
        elif not set(line) <= set("|-: ") and header[0] in NUMBERS:
            mode = row[1] if header[1:2] == ["mode"] else ""
            for column, cell in zip(header[1:], row[1:]):
                cells[(header[0], row[0], mode, column)] = cell
    return cells


@pytest.mark.parametrize(
    "run, shown",
    [
        ("2026-12-05-bfcl-1.5b-status-closest", "BFCL (single-turn AST categories)"),
        ("2026-12-05-bfcl-mt-1.5b-status-closest", "BFCL multi-turn"),
    ],
)
def test_a_committed_run_reports_the_numbers_of_its_committed_report(run, shown):
    folder = RUNS / run
    committed = _cells((folder / "report.md").read_text(encoding="utf-8"))
    meta, episodes = load_run(folder)
    made = render_markdown(meta, episodes)
    assert f"## {shown}" in made and episodes and all(e.runs for e in episodes)
    now = _cells(made)
    shared = committed.keys() & now.keys()
    # columns added since (the multi-turn loop's) are new; no cell of the committed report is lost,
    # and a cell says what it said, a detail added since in brackets aside (force-quits by cause)
    assert len(shared) == len(committed) > 20
    differ = {k: (committed[k], now[k]) for k in shared if not now[k].startswith(committed[k])}
    assert not differ
    assert all(now[k] == committed[k] or now[k].startswith(committed[k] + " (") for k in shared)
