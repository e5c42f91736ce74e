"""The fuzz campaign: a short real run (CI's), and that it finds and shrinks a planted bug."""
from __future__ import annotations

import random

from textagent import fuzz
from textagent.protocol import ParseError


def test_short_campaign_finds_nothing_and_counts_every_source():
    campaign = fuzz.run_campaign(examples=3000, seed=1)
    assert campaign.ok, campaign.report()
    assert campaign.total >= 3000
    for source in ("adversarial", "noisy", "near-miss", "garbage", "text", "bytes", "args", "mutation"):
        assert campaign.examples[source] > 0, source
    assert campaign.adversarial_max_seconds < 2.0
    assert "examples: " in campaign.report()


def test_mutation_is_deterministic_per_seed_and_changes_text():
    corpus = fuzz.load_corpus()
    a = [fuzz.mutate(corpus[0], random.Random(5), corpus) for _ in range(1)]
    b = [fuzz.mutate(corpus[0], random.Random(5), corpus) for _ in range(1)]
    assert a == b
    outs = {fuzz.mutate(corpus[0], random.Random(s), corpus) for s in range(50)}
    assert len(outs) > 40


def test_minimize_shrinks_to_the_culprit():
    text = "line one\nline two has BOOM inside\nline three\n" * 5
    small = fuzz.minimize(text, lambda t: "BOOM" in t)
    assert small == "BOOM"


def test_a_planted_crash_is_reported_with_a_small_reproducer(monkeypatch, tmp_path):
    real = fuzz.parse_reply

    def buggy(text, tools=None, **kw):
        if "ARGS: {" in text:
            raise KeyError("planted")
        return real(text, tools, **kw)

    monkeypatch.setattr(fuzz, "parse_reply", buggy)
    (tmp_path / "r.txt").write_text('TOOL: f ARGS: {"a": [1, 2]}\nsome prose around it\n')
    campaign = fuzz.run_campaign(examples=400, seed=3, corpus_dirs=[tmp_path], adversarial=False)
    assert not campaign.ok
    assert all("KeyError" in f.message and "ARGS: {" in f.reproducer for f in campaign.failures)
    # hypothesis shrinks its example; the mutation phase's delta debugging shrinks to the culprit
    assert all(len(f.reproducer) <= 80 for f in campaign.failures)
    assert any(f.reproducer == "ARGS: {" for f in campaign.failures if f.source == "mutation")


def test_check_accepts_parse_errors_with_positions_inside():
    assert fuzz.check("TOOL: ARGS: {") is None
    assert fuzz.check("plain prose") is None
    try:
        fuzz.parse_reply("TOOL: calculate ARGS: [1]")
    except ParseError as err:
        assert err.line == 1


def test_gbnf_checker_and_phase():
    from textagent.gbnf import reply_grammar
    from textagent.toolkits.demo import demo_tools

    assert fuzz.gbnf_problems(reply_grammar(demo_tools())) == []
    assert fuzz.gbnf_problems('root ::= item "x"') == ["rule item used but not defined"]
    assert fuzz.gbnf_problems('root ::= [a-z]{2,3} "]" # a comment\nroot ::= "a"') == ["rule root defined 2 times"]
    assert fuzz.gbnf_problems('item ::= "a"') == ["no root rule"]
    campaign = fuzz.Campaign()
    fuzz._gbnf_phase(campaign, 25, float("inf"), 0)
    assert campaign.ok and campaign.examples["gbnf"] == 25
