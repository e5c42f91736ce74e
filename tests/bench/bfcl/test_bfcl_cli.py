"""``textagent bench --tasks bfcl:...``: selection by split and category, a run, its report."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from textagent.bench import cli
from textagent.bench.bfcl import data
from textagent.bench.runner import load_episodes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from httpfake import FakeServer

DOC = {
    "name": "spotify.play",
    "description": "Play.",
    "parameters": {
        "type": "dict",
        "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
        "required": ["artist", "duration"],
    },
}


@pytest.fixture
def wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in wheel: 4 parallel items (artists A0..A3) and 4 irrelevance items."""
    rows = {
        "bfcl_eval/data/BFCL_v4_parallel.json": [],
        "bfcl_eval/data/possible_answer/BFCL_v4_parallel.json": [],
        "bfcl_eval/data/BFCL_v4_irrelevance.json": [],
    }
    for i in range(4):
        question = [[{"role": "user", "content": f"Play A{i} and B{i} for 5 minutes each."}]]
        rows["bfcl_eval/data/BFCL_v4_parallel.json"].append(
            {"id": f"parallel_{i}", "question": question, "function": [DOC]}
        )
        rows["bfcl_eval/data/possible_answer/BFCL_v4_parallel.json"].append(
            {
                "id": f"parallel_{i}",
                "ground_truth": [
                    {"spotify.play": {"artist": [f"A{i}"], "duration": [5]}},
                    {"spotify.play": {"artist": [f"B{i}"], "duration": [5]}},
                ],
            }
        )
        rows["bfcl_eval/data/BFCL_v4_irrelevance.json"].append(
            {"id": f"irrelevance_{i}", "question": [[{"role": "user", "content": "What is love?"}]], "function": [DOC]}
        )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for member, lines in rows.items():
            zf.writestr(member, "\n".join(json.dumps(r) for r in lines))
    path = tmp_path / "bfcl.whl"
    path.write_bytes(buffer.getvalue())
    monkeypatch.setattr(data, "fetch_wheel", lambda **_: path)
    return path


def _args(**kw) -> argparse.Namespace:
    return cli.build_parser().parse_args([f"--{k.replace('_', '-')}={v}" for k, v in kw.items()])


def test_split_limit_per_category_and_only(wheel: Path) -> None:
    tasks = cli.load_selected(
        _args(tasks="bfcl:parallel,irrelevance", split="test", limit_per_category=1, order="file")
    )
    assert [t.id for t in tasks] == ["parallel_1", "irrelevance_1"]
    assert [t.id for t in cli.load_selected(_args(tasks="bfcl:parallel", split="dev"))] == ["parallel_0", "parallel_2"]
    assert [t.id for t in cli.load_selected(_args(tasks="bfcl:parallel", only="parallel_3"))] == ["parallel_3"]


def test_an_unknown_category_is_a_usage_error(wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert (
        cli.main(["--tasks", "bfcl:multi_turn_composite", "--out", str(tmp_path / "o"), "--endpoint", "http://x"]) == 2
    )
    err = capsys.readouterr().err
    assert "unsupported BFCL category 'multi_turn_composite'" in err
    assert "irrelevance" in err and "multi_turn_miss_param" in err  # both kinds are listed


def test_the_prefix_may_be_given_once_or_with_every_category(wheel: Path) -> None:
    once = cli.load_selected(_args(tasks="bfcl:parallel,irrelevance", order="file"))
    every = cli.load_selected(_args(tasks="bfcl:parallel, bfcl:irrelevance", order="file"))
    assert [t.id for t in every] == [t.id for t in once] and len(once) == 8


def run_bfcl(out: Path, replies: list[str], *extra: str) -> tuple[dict, int]:
    """text and bfcl-prompt on parallel_1 and irrelevance_1 against a server replying ``replies``
    in turn: ({(task, mode): record}, completions asked for)."""
    with FakeServer() as srv:
        srv.json("/props", {"total_slots": 1, "model_path": "/m/tiny.gguf"}, repeat=True)
        srv.json("/health", {"status": "ok"}, repeat=True)
        for text in replies:
            srv.json(
                "/completion", {"content": text, "stop_type": "eos", "tokens_evaluated": 100, "tokens_predicted": 10}
            )
        argv = [
            "--tasks",
            "bfcl:parallel,irrelevance",
            "--split",
            "test",
            "--limit-per-category",
            "1",
            "--order",
            "file",
            "--modes",
            "text,bfcl-prompt",
            "--endpoint",
            srv.url,
            "--chat-format",
            "chatml",
            "--out",
            str(out),
            "--no-progress",
            *extra,
        ]
        assert cli.main(argv) == 0
        completions = sum(1 for r in srv.requests if r.path == "/completion")
    return {(e.task, e.mode): e.to_record() for e in load_episodes(out)}, completions


def test_a_bfcl_run_against_a_server_reports_categories(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    replies = [
        # parallel_1, text: both calls in one reply, then the answer
        'TOOL: spotify.play ARGS: {"artist": "A1", "duration": 5}\nTOOL: spotify.play ARGS: {"artist": "B1", "duration": 5}',
        "ANSWER: playing",
        # parallel_1, bfcl-prompt: one call only
        '[spotify.play(artist="A1", duration=5)]',
        "Done.",
        # irrelevance_1, text: no call
        "ANSWER: none of the tools can answer that",
        # irrelevance_1, bfcl-prompt: prose
        "None of the functions can be used.",
    ]
    records, _ = run_bfcl(out, replies)
    assert records[("parallel_1", "text")]["success"] is True
    assert records[("parallel_1", "bfcl-prompt")]["failure"] == "wrong_count"
    assert records[("irrelevance_1", "text")]["success"] and records[("irrelevance_1", "bfcl-prompt")]["success"]
    report = (out / "report.md").read_text()
    assert "## BFCL (single-turn AST categories)" in report
    assert "| parallel | 1/1 (100%, 21%–100%) | 0/1 (0%, 0%–79%) |" in report
    meta = json.loads((out / "run.json").read_text())
    assert meta["split"] == "test" and meta["limit_per_category"] == 1


def test_first_reply_stops_every_episode_after_one_reply(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    replies = [  # one reply per episode: no answer step is asked for
        'TOOL: spotify.play ARGS: {"artist": "A1", "duration": 5}\nTOOL: spotify.play ARGS: {"artist": "B1", "duration": 5}',
        '[spotify.play(artist="A1", duration=5)]',
        # irrelevance_1: the mode that goes first turns with each task, so bfcl-prompt is asked first
        "None of the functions can be used.",
        'TOOL: spotify.play ARGS: {"artist": "love", "duration": 1}',
    ]
    records, completions = run_bfcl(out, replies, "--first-reply")
    assert completions == 4
    assert all(r["steps"] == 1 for r in records.values())
    assert records[("parallel_1", "text")]["success"] and not records[("parallel_1", "bfcl-prompt")]["success"]
    assert records[("irrelevance_1", "text")]["failure"] == "irrelevance_call"
    report = (out / "report.md").read_text()
    assert "first reply only" in report and "| with feedback | not measured | not measured |" in report
    assert "## Paired differences" in report and "| text − bfcl-prompt | 2 | 1 / 1 | 1 | 1 |" in report
    assert json.loads((out / "run.json").read_text())["settings"]["first_reply"] is True


def test_first_reply_is_refused_on_the_suite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--first-reply", "--out", str(tmp_path / "o"), "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "--first-reply is for BFCL tasks" in capsys.readouterr().err
