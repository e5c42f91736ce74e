"""The llama-server settings benchmark: config product, arguments, prompts, burners, failure rows;
one tiny config on a real server (integration). Its figures and table: test_server_figures."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks import server_settings as ss
from benchmarks.server_figures import Config, Measurement, summarize

# llama.cpp's timings of one slot: 500 prompt tokens in 2 s, 64 generated in 3.2 s
ONE_SLOT = {
    "prompt_n": 500,
    "prompt_ms": 2000.0,
    "prompt_per_second": 250.0,
    "predicted_n": 64,
    "predicted_ms": 3200.0,
    "predicted_per_second": 20.0,
}


# -- configs and arguments ----------------------------------------------------------------------


def test_configs_are_the_product_threads_outermost():
    got = ss.configs([1, 2], [0, 50], [1, 2, 4])
    assert len(got) == 12
    assert got[0] == Config(1, 0, 1, 0) and got[1] == Config(1, 0, 2, 0) and got[-1] == Config(2, 50, 4, 0)
    assert len(set(got)) == 12
    assert len(ss.configs([2], [50], [1], [0, 256])) == 2


def test_server_args_pass_poll_always_and_cache_reuse_only_when_set():
    assert Config(2, 0, 1, 0).server_args() == ["--poll", "0"]
    assert Config(2, 50, 4, 256).server_args() == ["--poll", "50", "--cache-reuse", "256"]


def test_default_arguments_are_the_full_matrix():
    args = ss.parse_args([])
    assert (args.threads, args.poll, args.parallel, args.cache_reuse) == ([1, 2], [0, 50], [1, 2, 4], [0])
    assert args.load == [0] and args.rounds == 2 and args.out is None
    assert len(ss.configs(args.threads, args.poll, args.parallel, args.cache_reuse)) == 12


def test_comma_lists_load_out_and_rounds():
    args = ss.parse_args(
        [
            "--threads",
            "2",
            "--poll",
            "0, 50,100",
            "--parallel",
            "1,4,4",
            "--cache-reuse",
            "0,256",
            "--load",
            "0,2",
            "--rounds",
            "3",
            "--out",
            "x/t.md",
        ]
    )
    assert args.threads == [2] and args.poll == [0, 50, 100] and args.parallel == [1, 4]
    assert args.cache_reuse == [0, 256] and args.load == [0, 2] and args.rounds == 3 and args.out == Path("x/t.md")


def test_quick_is_smaller_and_explicit_options_win():
    quick = ss.parse_args(["--quick"])
    full = ss.parse_args([])
    n = lambda a: len(ss.configs(a.threads, a.poll, a.parallel, a.cache_reuse)) * a.rounds  # noqa: E731
    assert n(quick) < n(full)
    assert ss.parse_args(["--quick", "--threads", "1", "--rounds", "2"]).threads == [1]
    assert ss.parse_args(["--quick", "--rounds", "2"]).rounds == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["--threads", "0"],
        ["--threads", "a,b"],
        ["--parallel", ","],
        ["--poll", "101"],
        ["--rounds", "0"],
        ["--load", "-1"],
    ],
)
def test_bad_arguments_exit_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        ss.parse_args(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_json_path_is_beside_the_table_and_never_the_table():
    assert ss.json_path(Path("d/table.md")) == Path("d/table.json")
    assert ss.json_path(Path("d/t.json")) == Path("d/t.raw.json")


# -- prompts ------------------------------------------------------------------------------------


def test_prompts_start_with_their_nonce_and_share_no_body():
    a, b = ss.make_prompt("aaa111", 500), ss.make_prompt("bbb222", 500)
    assert a.startswith("Request aaa111.") and b.startswith("Request bbb222.")
    assert len(a.split()) > 500
    body_a, body_b = a.split("\n", 1)[1], b.split("\n", 1)[1]
    assert body_a != body_b
    assert body_a.splitlines()[0] != body_b.splitlines()[0]
    assert ss.make_prompt("aaa111", 500) == a  # deterministic per nonce


def test_main_writes_the_table_and_the_raw_json(monkeypatch, tmp_path, capsys):
    def fake_measure(config, loads, **kw):
        assert kw["rounds"] == 1 and kw["model"] is None
        return [summarize(config, load, [Measurement(5.3, [ONE_SLOT], [5.2])]) for load in loads]

    monkeypatch.setattr(ss, "measure_config", fake_measure)
    out = tmp_path / "res" / "settings.md"
    code = ss.main(
        ["--threads", "1,2", "--poll", "0", "--parallel", "1", "--load", "0,2", "--rounds", "1", "--out", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.count("| idle |") == 2 and printed.count("| loaded(2) |") == 2
    assert out.read_text().strip() == printed.strip()
    raw = json.loads((tmp_path / "res" / "settings.json").read_text())
    assert len(raw["rows"]) == 4 and raw["rows"][0]["config"] == {
        "threads": 1,
        "poll": 0,
        "parallel": 1,
        "cache_reuse": 0,
    }
    assert raw["rows"][1]["machine"] == "loaded(2)" and raw["rows"][0]["numbers"]["prompt_n"] == 500


def test_a_server_that_fails_to_start_is_a_row_not_a_crash(monkeypatch):
    from textagent import local
    from textagent.errors import LocalServerError

    stopped = []

    class Failing:
        def __init__(self, *a, **kw):
            self.kw = kw

        def start(self):
            raise LocalServerError("llama-server exited with code 1")

        def stop(self):
            stopped.append(True)

    monkeypatch.setattr(local, "LocalServer", Failing)
    rows = ss.measure_config(Config(2, 50, 2), [0, 2])
    assert [r.machine for r in rows] == ["idle", "loaded(2)"]
    assert all(not r.numbers and r.note.startswith("server failed to start: LocalServerError") for r in rows)
    assert stopped == [True]


def test_a_timeout_is_a_row_and_the_server_is_stopped(monkeypatch):
    from textagent import local

    stopped = []

    class Fake:
        def __init__(self, *a, **kw):
            self.url = "http://127.0.0.1:9"

        def start(self):
            return self

        def stop(self):
            stopped.append(True)

    monkeypatch.setattr(local, "LocalServer", Fake)
    monkeypatch.setattr(ss, "_words_for", lambda url, tokens, timeout: 10)
    monkeypatch.setattr(ss, "_completion", lambda *a, **kw: {})
    import requests

    def slow_batch(*a, **kw):
        raise requests.ReadTimeout("read timed out")

    monkeypatch.setattr(ss, "measure_batch", slow_batch)
    rows = ss.measure_config(Config(1, 0, 1), [0], timeout=7)
    assert rows[0].note == "timed out (round 1, 7 s per request)" and not rows[0].numbers
    assert stopped == [True]


# -- burners ------------------------------------------------------------------------------------


def test_burners_burn_and_are_always_killed():
    with pytest.raises(RuntimeError), ss.burners(2) as procs:
        assert len(procs) == 2 and all(p.is_alive() for p in procs)
        held = list(procs)
        raise RuntimeError("the measurement failed")
    assert not any(p.is_alive() for p in held)
    with ss.burners(0) as none:
        assert none == []


# -- a real server ------------------------------------------------------------------------------


@pytest.mark.integration
def test_one_tiny_config_on_the_real_server():
    """SmolLM2-135M, two slots, a small prompt: the row has llama.cpp's numbers."""
    from textagent.errors import LocalServerError
    from textagent.local import MODELS, find_server_binary, model_path
    from textagent.local.models import _verified

    try:
        find_server_binary()
    except LocalServerError as exc:
        _unavailable(str(exc))
    if not _verified(model_path("smollm2"), MODELS["smollm2"]):
        _unavailable("model smollm2 is not cached; run `textagent models fetch smollm2`")
    started = time.perf_counter()
    rows = ss.measure_config(
        Config(1, 0, 2),
        [0],
        model="smollm2",
        ctx_size=512,
        rounds=1,
        prompt_tokens=64,
        n_predict=4,
        timeout=60,
        startup_timeout=60,
    )
    assert len(rows) == 1 and rows[0].note == "", rows[0].note
    n = rows[0].numbers
    assert n["predicted_n"] == 8 and 2 * 48 <= n["prompt_n"] <= 2 * 80 and n["cache_n"] == 0
    assert n["prompt_tps"] > 0 and n["gen_tps"] > 0 and n["gen_tps_slot"] > 0
    assert time.perf_counter() - started < 60


def _unavailable(reason: str):
    import os

    if os.environ.get("TEXTAGENT_REQUIRE_SERVER") == "1":
        pytest.fail(f"TEXTAGENT_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(reason)
