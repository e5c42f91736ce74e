"""Paired differences: exact McNemar, Newcombe's paired interval, pairing records and runs."""

from __future__ import annotations

import math
import random

import pytest

from textagent.bench import paired as P
from textagent.bench.records import Episode


def test_exact_mcnemar_matches_the_binomial_test_by_hand():
    # 1 won, 10 lost: 2 * (C(11,0) + C(11,1)) / 2**11
    assert P.mcnemar_exact(1, 10) == pytest.approx(24 / 2048)
    assert P.mcnemar_exact(10, 1) == P.mcnemar_exact(1, 10)
    # 8 won, 6 lost: no difference
    assert P.mcnemar_exact(8, 6) == pytest.approx(2 * sum(math.comb(14, i) for i in range(7)) / 2**14)
    assert P.mcnemar_exact(0, 0) == 1.0 and P.mcnemar_exact(5, 5) == 1.0
    assert P.mcnemar_exact(0, 5) == pytest.approx(2 / 32)
    assert P.mcnemar_exact(0, 6) < 0.05 < P.mcnemar_exact(0, 5)


def test_newcombe_interval_holds_the_difference_and_mirrors():
    low, high = P.newcombe_interval(20, 8, 3, 19)
    assert low < (8 - 3) / 50 < high and low >= -1 and high <= 1
    m_low, m_high = P.newcombe_interval(20, 3, 8, 19)
    assert (m_low, m_high) == pytest.approx((-high, -low))
    # more items, same proportions: narrower
    w_low, w_high = P.newcombe_interval(200, 80, 30, 190)
    assert w_high - w_low < high - low
    # all concordant: the difference is 0 and the interval is small but not empty
    z_low, z_high = P.newcombe_interval(30, 0, 0, 20)
    assert z_low < 0 < z_high and z_high - z_low < 0.2
    assert P.newcombe_interval(0, 0, 0, 0) == (-1.0, 1.0)


def test_newcombe_interval_covers_about_95_percent():
    rng = random.Random(7)
    # correlated pairs: P(both)=.4, P(A only)=.15, P(B only)=.05, P(neither)=.4 -> true difference .10
    cells, truth, trials, hits = [0.4, 0.15, 0.05, 0.4], 0.10, 2000, 0
    for _ in range(trials):
        counts = [0, 0, 0, 0]
        for _ in range(60):
            counts[rng.choices(range(4), cells)[0]] += 1
        low, high = P.newcombe_interval(*counts)
        hits += low <= truth <= high
    assert 0.93 <= hits / trials <= 0.975


def record(task, mode, ok, repeat=0):
    return Episode(task, "single", "dev", mode, repeat, success=ok)


def test_pair_counts_only_the_items_both_modes_ran():
    records = [
        record("a", "text", True),
        record("a", "constrained", False),
        record("b", "text", True),
        record("b", "constrained", True),
        record("c", "text", False),
        record("c", "constrained", True),
        record("d", "text", False),
        record("d", "constrained", False),
        record("e", "text", True),
    ]  # constrained did not run e
    p = P.pair(records, "text", "constrained")
    assert (p.items, p.both, p.wins, p.losses, p.neither) == (4, 1, 1, 1, 1)
    assert p.right_a == 2 and p.right_b == 2 and p.difference == 0 and not p.real
    assert p.to_dict()["p_value"] == 1.0


def test_a_resumed_episode_counts_once_with_its_latest_result():
    records = [record("a", "text", False), record("a", "text", True), record("a", "baseline", False)]
    p = P.pair(records, "text", "baseline")
    assert (p.items, p.wins, p.losses) == (1, 1, 0)


def test_a_large_one_sided_difference_is_real():
    records = [r for i in range(12) for r in (record(f"t{i}", "text", True), record(f"t{i}", "constrained", i == 0))]
    p = P.pair(records, "text", "constrained")
    assert (p.wins, p.losses) == (11, 0) and p.real and p.p_value < 0.001
    low, high = p.interval
    assert 0 < low < p.difference < high
    cells = P.row(p)
    assert cells[0] == "text − constrained" and cells[3:5] == ["11", "0"] and cells[-1] == "**real**"


def test_mode_pairs_put_the_external_baseline_and_the_two_text_modes_first():
    pairs = P.mode_pairs(["text", "constrained", "native+fallback", "bfcl-prompt"])
    assert pairs[:4] == [
        ("text", "bfcl-prompt"),
        ("constrained", "bfcl-prompt"),
        ("native+fallback", "bfcl-prompt"),
        ("text", "constrained"),
    ]
    assert len(pairs) == 6 and len(set(pairs)) == 6
    assert P.mode_pairs(["text"]) == []
