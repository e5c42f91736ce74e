"""The runner: JSONL per episode, traces, concurrency over slots, resume after an interruption,
the baseline loop and the CLI against a scripted llama.cpp server."""

from __future__ import annotations

import _thread
import gzip
import json
import os
import signal
import sys
import threading
import time

import pytest

from textagent.backends.scripted import ScriptedBackend
from textagent.bench import backends as B
from textagent.bench import cli
from textagent.bench import runner as R
from textagent.bench.reference import ReferenceBackend
from textagent.bench.tasks import load_tasks
from textagent.errors import BackendConnectionError
from textagent.trace import json_line

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from httpfake import FakeServer, closed_port_url


def _records(path):
    """The records of a run's episodes (each read once, as the report reads them), as dicts."""
    return [e.to_record() for e in R.load_episodes(path)]


def _recs(outcome):
    return [e.to_record() for e in outcome.episodes]


SUITE = load_tasks()
BY_ID = {t.id: t for t in SUITE}
SOME = [BY_ID[i] for i in ("single-calc-mul", "chain-calc-seed", "notool-capital-france", "parallel-weather-two")]


def reference_factory(tasks, calls=None):
    backend = ReferenceBackend(tasks)

    def backend_for(mode, slot):
        if calls is not None:
            calls.append((mode, slot, threading.current_thread().name))
        return backend, "chatml"

    return backend_for


def test_run_bench_writes_one_json_line_per_episode_and_its_trace(tmp_path):
    calls = []
    outcome = R.run_bench(
        SOME,
        ["text", "baseline"],
        tmp_path,
        workers=[B.Slot("u", 0), B.Slot("u", 1)],
        backend_for=reference_factory(SOME, calls),
        progress=False,
    )
    assert not outcome.interrupted and outcome.skipped == 0 and len(_recs(outcome)) == 8
    records = _records(tmp_path)
    assert len(records) == 8
    for r in records:
        assert {
            "task",
            "mode",
            "success",
            "stop_reason",
            "steps",
            "seconds",
            "usage",
            "format_errors",
            "recovered",
            "native_decode_failures",
            "tool_errors",
            "failure",
            "trace",
        } <= set(r)
        assert r["trace"][0]["type"] == "start" and r["trace"][-1]["type"] == "result"
        assert "trace_file" not in r  # the trace lives in the record only
        assert r["slot"] in (0, 1)
    text = {r["task"]: r for r in records if r["mode"] == "text"}
    assert all(r["success"] for r in text.values())
    # the seed-style loop runs one call per reply: the parallel task's second call never happens
    base = {r["task"]: r for r in records if r["mode"] == "baseline"}
    assert not base["parallel-weather-two"]["success"] and base["single-calc-mul"]["success"]
    assert {slot.slot for _, slot, _ in calls} == {0, 1}
    assert not (tmp_path / "traces").exists()


def test_resume_after_interruption_keeps_finished_episodes(tmp_path):
    # a process started in the background by a non-interactive shell ignores SIGINT, and then
    # interrupt_main() does nothing: give this test Python's own Ctrl-C handler
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _resume_after_interruption(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _resume_after_interruption(tmp_path):
    tasks = SUITE[:6]
    reference = ReferenceBackend(tasks)
    finished = []

    class Interrupting:
        def complete(self, prompt, **kw):
            if len(finished) >= 3:  # Ctrl-C after three episodes, while a request is open
                _thread.interrupt_main()
                time.sleep(3)  # time for the main thread to take the interrupt, also on a loaded machine
                raise BackendConnectionError("connection dropped")
            return reference.complete(prompt, **kw)

    def backend_for(mode, slot):
        return Interrupting(), "chatml"

    orig = R.run_episode

    def counting(*a, **kw):
        record = orig(*a, **kw)
        finished.append(record)
        return record

    R.run_episode = counting
    try:
        first = R.run_bench(
            tasks, ["text"], tmp_path, workers=[B.Slot("u", 0)], backend_for=backend_for, progress=False
        )
    except KeyboardInterrupt:  # delivered after run_bench returned: still a clean stop
        first = None
    finally:
        R.run_episode = orig
    kept = _records(tmp_path)
    if first is not None:
        assert first.interrupted
    assert 3 <= len(kept) < 6 and all(r["success"] for r in kept)
    second = R.run_bench(
        tasks, ["text"], tmp_path, workers=[B.Slot("u", 0)], backend_for=reference_factory(tasks), progress=False
    )
    assert not second.interrupted and second.skipped == len(kept)
    done = _records(tmp_path)
    assert sorted(r["task"] for r in done) == sorted(t.id for t in tasks)
    assert all(r["success"] for r in done)


def test_an_older_runs_plain_file_is_read_and_resumed_in_its_own_form(tmp_path):
    """A run written before the episodes were compressed: its cut line is skipped and run again,
    its backend errors are retried, and its new episodes go on in the same plain file."""
    tasks = SUITE[:2]
    good = R.run_episode(tasks[0], "text", ReferenceBackend(tasks)).to_record()
    error = R.run_episode(tasks[1], "text", ScriptedBackend([])).to_record()
    assert error["stop_reason"] == "backend_error"
    with open(tmp_path / R.PLAIN_EPISODES_FILE, "w") as f:
        f.write(json.dumps(good) + "\n" + json.dumps(error) + "\n" + '{"task": "cut off mid-wri')
    outcome = R.run_bench(
        tasks, ["text"], tmp_path, workers=[B.Slot("u", None)], backend_for=reference_factory(tasks), progress=False
    )
    assert outcome.skipped == 1 and [r["task"] for r in _recs(outcome)] == [tasks[1].id]
    assert not (tmp_path / R.EPISODES_FILE).exists()
    lines = (tmp_path / R.PLAIN_EPISODES_FILE).read_text().splitlines()
    assert lines[2] == '{"task": "cut off mid-wri' and json.loads(lines[-1])["success"]
    from textagent.bench.metrics import latest

    assert all(e.success for e in latest(R.load_episodes(tmp_path)))


def test_a_harness_failure_is_recorded_not_raised(tmp_path):
    def broken(mode, slot):
        raise RuntimeError("no template")

    outcome = R.run_bench(SUITE[:1], ["text"], tmp_path, workers=[B.Slot("u", 0)], backend_for=broken, progress=False)
    (record,) = _recs(outcome)
    assert record["failure"] == "backend_error" and "no template" in record["error"]


# -- the command line ------------------------------------------------------------------------------


def test_cli_runs_against_a_llama_cpp_server_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeServer() as srv:
        srv.json("/props", {"total_slots": 1, "model_path": "/m/tiny.gguf"}, repeat=True)
        srv.json("/health", {"status": "ok"}, repeat=True)
        for text in (
            'TOOL: calculate ARGS: {"expression": "17 * 24"}',
            "ANSWER: 408",
            'TOOL: calculate ARGS: {"expression": "17 * 24"}',
            "ANSWER: 408",
        ):
            srv.json(
                "/completion",
                {
                    "content": text,
                    "stop_type": "eos",
                    "tokens_evaluated": 600,
                    "tokens_predicted": 12,
                    "timings": {"prompt_n": 50, "cache_n": 550},
                },
            )
        argv = [
            "--modes",
            "text,baseline",
            "--endpoint",
            srv.url,
            "--chat-format",
            "chatml",
            "--only",
            "single-calc-mul",
            "--concurrency",
            "3",
            "--out",
            str(out),
            "--no-progress",
        ]
        assert cli.main(argv) == 0
        bodies = srv.bodies("/completion")
        assert len(bodies) == 4 and all(b["id_slot"] == 0 for b in bodies)  # 3 asked, the server has 1 slot
        err = capsys.readouterr().err
        assert "has 1 slots" in err
        meta = json.loads((out / "run.json").read_text())
        assert meta["model"] == "tiny.gguf" and meta["modes"] == ["text", "baseline"] and meta["finished"]
        report = (out / "report.md").read_text()
        assert "| metric | text | baseline |" in report
        # the same command again, without --resume: refused, nothing sent, nothing lost
        assert cli.main(argv) == 2
        assert "holds 2 episodes of an earlier run" in capsys.readouterr().err
        assert len(srv.bodies("/completion")) == 4 and len(_records(out)) == 2
        # with --resume: nothing left to do
        assert cli.main([*argv, "--resume"]) == 0
        assert len(srv.bodies("/completion")) == 4
        assert "resumed; 2 episodes were already done" in capsys.readouterr().err
        # other settings would make episodes that cannot be compared: refused
        assert cli.main([*argv, "--resume", "--reply-tokens", "64"]) == 2
        assert "reply_tokens: 256 -> 64" in capsys.readouterr().err
        # --resume with another mode adds it to the run: modes, commands and the plan are merged
        srv.json(
            "/completion",
            {
                "content": 'TOOL: calculate ARGS: {"expression": "17 * 24"}',
                "stop_type": "eos",
                "tokens_evaluated": 600,
                "tokens_predicted": 12,
            },
        )
        srv.json(
            "/completion",
            {"content": "ANSWER: 408", "stop_type": "eos", "tokens_evaluated": 600, "tokens_predicted": 12},
        )
        more = [a if a != "text,baseline" else "constrained" for a in argv]
        assert cli.main([*more, "--resume"]) == 0
        meta = json.loads((out / "run.json").read_text())
        assert meta["modes"] == ["text", "baseline", "constrained"] and meta["planned"] == 3
        assert len(meta["commands"]) == 3 and len(meta["resumed"]) == 2
        report = (out / "report.md").read_text()
        assert "| metric | text | baseline | constrained |" in report and "**commands**" in report
    assert cli.main(["--compare", str(out), str(out)]) == 0
    assert "No task changed outcome" in capsys.readouterr().out


def test_cli_usage_errors(tmp_path, capsys):
    assert cli.main([]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
    assert cli.main(["--out", str(tmp_path), "--modes", "text,bogus", "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "unknown mode bogus; choose from text," in capsys.readouterr().err
    bad = tmp_path / "t.jsonl"
    bad.write_text("{nope\n")
    assert cli.main(["--tasks", str(bad), "--out", str(tmp_path), "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert cli.main(["--only", "nope", "--out", str(tmp_path), "--endpoint", "http://127.0.0.1:9"]) == 2
    assert cli.main(["--compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert cli.main(["--help"]) == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5", "warm"])
def test_a_temperature_that_is_no_finite_number_from_0_is_a_usage_error(tmp_path, capsys, value):
    """As ``run --temperature`` (_argtypes.non_negative): never a request body that is no JSON."""
    out = tmp_path / "run"
    assert cli.main(["--out", str(out), "--endpoint", "http://127.0.0.1:9", f"--temperature={value}"]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("textagent bench: error: argument --temperature: ") and value in err[-1]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--concurrency", "0"], "--concurrency and --repeat must be at least 1"),
        (["--repeat", "0"], "--concurrency and --repeat must be at least 1"),
        (["--api", "ollama"], "--api ollama needs --model"),
        (["--api", "completions"], "the embedded server speaks llamacpp; pass --endpoint"),
        (["--first-reply", "--endpoint", "http://127.0.0.1:9"], "--first-reply is for BFCL tasks"),
    ],
)
def test_cli_refuses_what_cannot_run_before_making_anything(tmp_path, capsys, monkeypatch, argv, said):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    out = tmp_path / "run"
    assert cli.main(["--out", str(out), "--modes", "text", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("textagent bench: ") and said in err
    assert not out.exists()


def test_cli_refuses_a_dead_endpoint_before_running_any_episode(tmp_path, capsys):
    with FakeServer() as srv:
        srv.json("/health", {"error": {"code": 500, "message": "kaput"}}, status=500)
        argv = [
            "--modes",
            "text",
            "--endpoint",
            srv.url,
            "--chat-format",
            "chatml",
            "--only",
            "single-calc-mul",
            "--out",
            str(tmp_path / "a"),
            "--no-progress",
        ]
        assert cli.main(argv) == 7
        assert [r.path for r in srv.requests] == ["/health"]
    err = capsys.readouterr().err
    assert "is not healthy" in err and "kaput" in err
    assert cli.main([*argv[:3], closed_port_url(), *argv[4:]]) == 7
    assert "is not answering" in capsys.readouterr().err
    assert not (tmp_path / "a" / R.EPISODES_FILE).exists()


def test_cli_runs_on_ollama(tmp_path, capsys, monkeypatch):
    with FakeServer() as srv:
        srv.json("/api/version", {"version": "0.5.0"})
        for text in ('TOOL: calculate ARGS: {"expression": "17 * 24"}', "ANSWER: 408"):
            srv.json(
                "/api/generate",
                {"response": text, "done": True, "done_reason": "stop", "prompt_eval_count": 50, "eval_count": 9},
            )
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{srv.port}")
        argv = [
            "--modes",
            "text",
            "--api",
            "ollama",
            "--model",
            "qwen2.5-coder:0.5b",
            "--only",
            "single-calc-mul",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ]
        assert cli.main(argv) == 0
        bodies = srv.bodies("/api/generate")
        assert len(bodies) == 2 and bodies[0]["model"] == "qwen2.5-coder:0.5b" and "id_slot" not in bodies[0]
    assert cli.main([*argv[:4], *argv[6:]]) == 2
    assert "--api ollama needs --model" in capsys.readouterr().err


def test_cli_check_suite(tmp_path, capsys):
    assert cli.main(["--check-suite"]) == 0
    assert f"{len(SUITE)}/{len(SUITE)} tasks" in capsys.readouterr().out
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "x",
                "question": "2+2?",
                "tools": ["calculate"],
                "check": {"type": "numeric", "value": 4},
                "reference": ["ANSWER: 5"],
            }
        )
        + "\n"
        + json.dumps({"id": "y", "question": "3?", "tools": [], "check": {"type": "answered"}})
        + "\n"
    )
    assert cli.main(["--check-suite", "--tasks", str(path)]) == 1
    text = capsys.readouterr().out
    assert "x: FAILED (wrong_answer)" in text and "y: no reference" in text


def test_mixed_order_takes_the_kinds_in_turn():
    mixed = cli.mix_kinds(SUITE)
    assert sorted(t.id for t in mixed) == sorted(t.id for t in SUITE)
    kinds = {t.kind for t in SUITE}
    assert {t.kind for t in mixed[: len(kinds)]} == kinds


def test_sigterm_ends_the_run_like_ctrl_c():
    import signal as _signal

    before = _signal.getsignal(_signal.SIGTERM)
    with cli._sigterm_as_interrupt():
        assert _signal.getsignal(_signal.SIGTERM) is not before
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), _signal.SIGTERM)
            time.sleep(1)
    assert _signal.getsignal(_signal.SIGTERM) is before  # the handler it found is back


def test_the_mode_that_goes_first_turns_with_each_task():
    from textagent.bench.runner import _turned

    modes = ["text", "constrained", "baseline"]
    assert [_turned(modes, i)[0] for i in range(4)] == ["text", "constrained", "baseline", "text"]
    assert sorted(_turned(modes, 2)) == sorted(modes) and _turned([], 3) == []


def test_a_tasks_modes_run_one_after_another_on_one_slot(tmp_path):
    def backend_for(mode, slot):
        time.sleep(0.05)  # both workers busy at once: the old queue split a task's modes between them
        return ReferenceBackend(SOME), "chatml"

    outcome = R.run_bench(
        SOME[:4],
        ["text", "baseline"],
        tmp_path,
        workers=[B.Slot("u", 0), B.Slot("u", 1)],
        backend_for=backend_for,
        progress=False,
    )
    by_task = {}
    for record in _recs(outcome):
        by_task.setdefault(record["task"], set()).add(record["slot"])
    assert len(by_task) == 4 and all(len(slots) == 1 for slots in by_task.values())


def test_a_record_cut_inside_a_character_is_skipped_and_run_again(tmp_path, caplog):
    first = _two_episodes(tmp_path)
    assert len(_recs(first)) == 2
    # as an older run wrote it, plain: a kill could cut its last line inside a character
    path = tmp_path / R.PLAIN_EPISODES_FILE
    path.write_bytes(gzip.decompress((tmp_path / R.EPISODES_FILE).read_bytes()))
    (tmp_path / R.EPISODES_FILE).unlink()
    lines = path.read_bytes().splitlines(keepends=True)
    cut = lines[1][: lines[1].index("é".encode()) + 1] if "é".encode() in lines[1] else lines[1][:-40] + b"\xc3"
    path.write_bytes(lines[0] + cut)
    with caplog.at_level("WARNING", logger="textagent.bench"):
        assert [r["task"] for r in _records(tmp_path)] == [_recs(first)[0]["task"]]
    assert "skipped a record that is not whole" in caplog.text
    again = _two_episodes(tmp_path)
    assert again.skipped == 1 and [r["task"] for r in _recs(again)] == [_recs(first)[1]["task"]]
    assert len(_records(tmp_path)) == 2


def _two_episodes(tmp_path):
    return R.run_bench(
        SOME[:2],
        ["text"],
        tmp_path,
        workers=[B.Slot("u", 0)],
        backend_for=lambda mode, slot: (ReferenceBackend(SOME), "chatml"),
        progress=False,
    )


def test_episodes_are_written_compressed_one_gzip_member_each(tmp_path):
    first = _two_episodes(tmp_path)
    data = (tmp_path / R.EPISODES_FILE).read_bytes()
    member = gzip.compress((json_line(_recs(first)[0]) + "\n").encode(), mtime=0)
    assert data.startswith(member) and gzip.decompress(data[len(member) :]).count(b"\n") == 1
    assert not (tmp_path / R.PLAIN_EPISODES_FILE).exists()
    assert [r["task"] for r in _records(tmp_path)] == [r["task"] for r in _recs(first)]


@pytest.mark.parametrize("kept", ["header", "half", "all but the trailer"])
def test_an_episode_cut_off_while_written_is_skipped_and_run_again(tmp_path, caplog, kept):
    """A kill while the last episode's gzip member is written: what it holds so far reads as a
    cut line (skipped, run again on --resume); cut only in its trailer, its line is whole."""
    first = _two_episodes(tmp_path)
    path = tmp_path / R.EPISODES_FILE
    data = path.read_bytes()
    start = len(gzip.compress((json_line(_recs(first)[0]) + "\n").encode(), mtime=0))
    cut = {"header": start + 5, "half": (start + len(data)) // 2, "all but the trailer": len(data) - 3}[kept]
    path.write_bytes(data[:cut])
    whole = kept == "all but the trailer"
    with caplog.at_level("WARNING", logger="textagent.bench"):
        assert len(_records(tmp_path)) == (2 if whole else 1)
    assert ("skipped a record that is not whole" in caplog.text) is (kept == "half")
    again = _two_episodes(tmp_path)
    assert again.skipped == (2 if whole else 1) and len(_recs(again)) == (0 if whole else 1)
    assert sorted(r["task"] for r in _records(tmp_path)) == sorted(t.id for t in SOME[:2])
    text = gzip.decompress(path.read_bytes())  # mended: every member whole again
    assert text.count(b"\n") == (2 if whole else 3 if kept == "half" else 2)


def test_cli_stopped_before_any_episode_ends_says_so_and_keeps_the_run_file(tmp_path, capsys, monkeypatch):
    with FakeServer() as srv:
        srv.json("/api/version", {"version": "0.5.0"})
        srv.json("/api/generate", {"response": "ANSWER: 408", "done": True}, delay=20)
        monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{srv.port}")
        out = tmp_path / "o"
        argv = ["--modes", "text", "--api", "ollama", "--model", "m", "--only", "single-calc-mul"]
        # SIGTERM is taken as Ctrl-C (a background process may ignore SIGINT); sent mid-request
        timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        started = time.monotonic()
        try:
            code = cli.main([*argv, "--out", str(out), "--no-progress"])
        finally:
            timer.cancel()
        assert code == 130 and time.monotonic() - started < 15  # not held by the request in flight
    err = capsys.readouterr().err
    assert "interrupted before any episode finished" in err and "no bench results" not in err
    assert (out / "run.json").exists() and not (out / R.EPISODES_FILE).exists()
