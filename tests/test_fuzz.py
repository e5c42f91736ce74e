"""The fuzz campaign: a short real run (CI's), and that it finds and shrinks a planted bug."""

from __future__ import annotations

import random
import re

from textagent import fuzz
from textagent.protocol import ParseError


def test_short_campaign_finds_nothing_and_counts_every_source():
    # the 2 s CPU limit per adversarial input is the campaign's figure on an idle machine; here
    # the bound is generous (a shared 2-core machine), backtracking would take minutes
    campaign = fuzz.run_campaign(examples=3000, seed=1, slow_seconds=10)
    assert campaign.ok, campaign.report()
    assert campaign.total >= 3000
    for source in ("adversarial", "noisy", "near-miss", "garbage", "text", "bytes", "args", "mutation"):
        assert campaign.examples[source] > 0, source
    assert campaign.adversarial_max_seconds < 10  # backtracking would take minutes; loaded machines seconds
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


def test_a_planted_bug_in_the_argument_layer_or_the_grammar_generator_is_reported(monkeypatch):
    from textagent.tools import Tool

    real_bind = Tool.bind

    def bind(self, args):
        if isinstance(args, dict) and len(args) >= 2:
            raise KeyError("planted")
        return real_bind(self, args)

    monkeypatch.setattr(Tool, "bind", bind)
    campaign = fuzz.Campaign()
    fuzz._args_phase(campaign, 200, float("inf"), 0)
    [failure] = campaign.failures
    assert failure.source == "args" and "KeyError" in failure.message and ".bind(" in failure.reproducer

    monkeypatch.setattr(fuzz, "gbnf_problems", lambda grammar: ["planted"])
    campaign = fuzz.Campaign()
    fuzz._gbnf_phase(campaign, 5, float("inf"), 0)
    assert [(f.source, f.message) for f in campaign.failures] == [("gbnf", "planted")]


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


def test_seconds_is_a_deadline_and_the_count_is_printed():
    # #16 item 8: `--seconds 5` never ended (hypothesis phases got 10^10 examples, the adversarial
    # phase had no deadline). The bound is loose: a correctness bound, not a benchmark.
    import subprocess
    import sys
    import time

    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "textagent", "fuzz", "--seconds", "2", "--seed", "1"],
            capture_output=True,
            text=True,
            timeout=40,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("textagent fuzz --seconds 2 was still running after 40 s") from None
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert elapsed < 2 + 10, f"took {elapsed:.1f} s"
    assert re.search(r"examples: [0-9,]+ in [0-9.]+ s", proc.stdout), proc.stdout


def test_run_campaign_keeps_its_deadline_in_process():
    import time

    started = time.monotonic()
    campaign = fuzz.run_campaign(seconds=1.5, seed=2, slow_seconds=10)
    assert time.monotonic() - started < 1.5 + 10
    assert campaign.ok and campaign.total > 0 and campaign.seconds < 1.5 + 10


def test_an_adversarial_input_slower_than_the_limit_is_a_failure():
    campaign = fuzz.run_campaign(seconds=1.0, seed=2, slow_seconds=1e-9)
    assert not campaign.ok
    assert any(f.source == "adversarial" and "took" in f.message for f in campaign.failures), campaign.report()
    assert "(limit 1e-09 s)" in campaign.report()


def test_without_hypothesis_fuzz_says_so_in_one_line(monkeypatch, capsys):
    # #16 item 9: a normal install has no hypothesis (it is the `fuzz` extra)
    import sys

    monkeypatch.setitem(sys.modules, "hypothesis", None)  # `import hypothesis` raises ImportError
    assert fuzz.main(["--seconds", "1"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "hypothesis" in err and "pip install 'textagent[fuzz]'" in err


def test_the_corpus_ships_inside_the_package_and_the_fuzz_extra_exists():
    from pathlib import Path

    import tomllib

    import textagent

    package = Path(textagent.__file__).resolve().parent
    assert fuzz.DEFAULT_CORPUS.resolve().parent == package
    files = sorted(fuzz.DEFAULT_CORPUS.glob("*.txt"))
    assert len(files) >= 20
    assert len(fuzz.load_corpus()) == len(files)  # the corpus itself, not the fallback seeds
    assert not (package.parent / "tests" / "corpus").exists()  # one copy only
    project = tomllib.loads((package.parent / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("hypothesis") for dep in project["optional-dependencies"]["fuzz"])
