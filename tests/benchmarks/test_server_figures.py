"""The figures of the llama-server settings benchmark: rates from llama.cpp's timings, phases of
staggered slots, the median over rounds, the table."""

from __future__ import annotations

import pytest

from benchmarks import server_figures as sf
from benchmarks.server_figures import Config, Measurement, Row


def timing(prompt_n=500, prompt_ms=2000.0, predicted_n=64, predicted_ms=3200.0, cache_n=0):
    return {
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_second": prompt_n / prompt_ms * 1000,
        "predicted_n": predicted_n,
        "predicted_ms": predicted_ms,
        "predicted_per_second": predicted_n / predicted_ms * 1000,
        "cache_n": cache_n,
    }


# -- aggregation --------------------------------------------------------------------------------


def test_one_slot_rates_are_llama_cpp_s_own():
    m = Measurement(5.3, [timing(500, 2000, 64, 3200)], [5.25])
    row = sf.aggregate(m)
    assert row["prompt_tps"] == pytest.approx(250.0)
    assert row["gen_tps"] == pytest.approx(20.0)
    assert row["gen_tps_slot"] == pytest.approx(20.0)
    assert row["prompt_n"] == 500 and row["predicted_n"] == 64 and row["wall_s"] == 5.3


def test_slots_together_sum_tokens_over_the_shared_span():
    # two slots evaluated in the same steps, replies read at the same moment
    m = Measurement(6.0, [timing(500, 3000, 64, 2000), timing(480, 3000, 64, 2000)], [5.0, 5.0])
    row = sf.aggregate(m)
    assert row["prompt_tps"] == pytest.approx(980 / 3.0)
    assert row["gen_tps"] == pytest.approx(128 / 2.0)
    assert row["gen_tps_slot"] == pytest.approx(32.0)


def test_staggered_slots_count_the_overlap_in_both_phases():
    # slot 0: prompt 0..1, generation 1..4; slot 1: prompt 1..2, generation 2..5
    m = Measurement(5.0, [timing(500, 1000, 64, 3000), timing(500, 1000, 64, 3000)], [4.0, 5.0])
    assert sf.phase_spans(m) == pytest.approx((2.0, 4.0))
    row = sf.aggregate(m)
    assert row["prompt_tps"] == pytest.approx(1000 / 2.0) and row["gen_tps"] == pytest.approx(128 / 4.0)


def test_without_reply_times_the_longest_phases_are_used():
    m = Measurement(6.0, [timing(500, 3000, 64, 2000), timing(500, 2500, 64, 1600)])
    assert sf.phase_spans(m) == pytest.approx((3.0, 2.0))


def test_row_is_the_median_over_rounds():
    rounds = [
        Measurement(w, [timing(500, p, 64, g)], [w]) for w, p, g in ((5, 2000, 3200), (9, 4000, 6400), (6, 2500, 3200))
    ]
    row = sf.summarize(Config(2, 50, 1), 0, rounds)
    assert row.numbers["prompt_tps"] == pytest.approx(200.0)
    assert row.numbers["gen_tps"] == pytest.approx(20.0)
    assert row.numbers["wall_s"] == 6
    assert len(row.rounds) == 3 and row.machine == "idle"
    assert sf.summarize(Config(2, 50, 1), 3, []).numbers == {}
    assert sf.summarize(Config(2, 50, 1), 3, []).machine == "loaded(3)"


# -- the table ----------------------------------------------------------------------------------


def test_table_has_a_row_per_config_and_machine_and_failures_say_so():
    ok = sf.summarize(Config(2, 50, 2, 0), 0, [Measurement(6.0, [timing(), timing()], [5.2, 5.2])])
    loaded = sf.summarize(Config(2, 50, 2, 0), 2, [Measurement(9.0, [timing(), timing()], [8.0, 8.0])])
    failed = Row(Config(1, 0, 4, 256), 2, note="server failed to start: LocalServerError: boom | x\ny")
    table = sf.render_table([ok, loaded, failed])
    lines = table.splitlines()
    assert lines[0] == (
        "| machine | threads | poll | parallel | cache-reuse | prompt tok/s | gen tok/s | "
        "gen tok/s per slot | batch s | note |"
    )
    assert len(lines) == 5
    assert all(line.count("|") == len(sf.COLUMNS) + 1 for line in lines)
    assert lines[2].startswith("| idle | 2 | 50 | 2 | 0 | 500.0 | 40.0 | 20.0 | 6.0 |")
    assert lines[3].startswith("| loaded(2) | 2 | 50 | 2 | 0 |")
    assert lines[4].startswith("| loaded(2) | 1 | 0 | 4 | 256 | — | — | — | — | server failed to start")
