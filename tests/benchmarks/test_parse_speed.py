"""The parser benchmark's inputs and its report (the timings themselves are not tested here)."""

from __future__ import annotations

import json

from benchmarks import parse_speed as P
from textagent import fuzz
from textagent.protocol import parse_reply


def test_mixed_text_is_valid_and_its_replies_keep_every_call_whole():
    text = P.mixed_text(20_000, seed=3)
    assert 19_000 < len(text) < 21_000
    calls = len(parse_reply(text).calls)
    assert calls > 20 and sum(len(parse_reply(piece).calls) for piece in P.chunks(text)) == calls


def test_the_baseline_reads_only_json_calls():
    assert P.baseline(P.TYPICAL) == [("get_weather", {"city": "Paris", "days": 3, "units": "metric"})]
    assert P.baseline(P.FORMS["key=value"]) == [] and P.baseline(P.FORMS["format error"]) == []


def test_the_adversarial_inputs_are_those_textagent_fuzz_checks():
    assert P.adversarial is fuzz.adversarial
    quick = fuzz.adversarial(quick=True)
    assert len({name for name, _, _ in quick}) == len(quick) and all(target for *_, target in quick[:-3])
    assert max(len(text) for _, text, _ in quick) < 3_000_000  # quick: 1 MB strings, not 10 MB


def _results(*, adversarial_s: float) -> dict:
    return {
        "python": "3.11.7",
        "typical": {"bytes": 150, "us": 40.0, "baseline_us": 4.0, "ratio": 10.0, "grammar_only_us": 300.0},
        "forms_us": {name: 50.0 for name in P.FORMS},
        "mixed_1mb": {
            "mb": 1.0,
            "calls": 9000,
            "replies": 6000,
            "one_reply_s": 0.5,
            "one_reply_mb_s": 2.0,
            "as_replies_s": 0.8,
            "as_replies_mb_s": 1.25,
            "baseline_mb_s": 40.0,
            "baseline_as_replies_mb_s": 30.0,
        },
        "growth": [{"kb": kb, "s": kb / 2000, "us_per_kb": 500.0} for kb in (16, 64, 256, 1024)],
        "growth_spread": 1.0,
        "adversarial": {"10^5 open braces in args": {"chars": 100_014, "s": adversarial_s, "outcome": "ok"}},
        "targets": {"typical <= 15x baseline": True, "adversarial < 2 s each": adversarial_s < 2},
    }


def test_main_prints_the_report_or_json_and_check_fails_on_a_missed_target(monkeypatch, capsys):
    monkeypatch.setattr(P, "run", lambda quick=False: _results(adversarial_s=0.1))
    assert P.main(["--quick", "--check"]) == 0
    out = capsys.readouterr().out
    assert "ratio 10.0x" in out and "[PASS] adversarial < 2 s each" in out and "per-KB spread 1.00x" in out
    assert P.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["typical"]["us"] == 40.0
    monkeypatch.setattr(P, "run", lambda quick=False: _results(adversarial_s=3.0))
    assert P.main(["--check"]) == 1
    assert "[FAIL] adversarial < 2 s each" in capsys.readouterr().out
