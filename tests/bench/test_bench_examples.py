"""Which worked examples a bench tool set shows (textagent.bench.examples.pick_examples)."""

from __future__ import annotations

from textagent.bench.examples import EXAMPLES, pick_examples
from textagent.bench.tools import TOOL_BUILDERS
from textagent.toolkits import demo


def _tools_called(examples):
    return {name for e in examples for name, *_ in e.calls}


def test_every_example_calls_only_known_tools():
    known = set(TOOL_BUILDERS)
    for example in EXAMPLES:
        assert {name for name, *_ in example.calls} <= known, example.task


def test_a_set_without_any_example_tool_shows_none():
    assert pick_examples(["send_email", "search_web"]) == ()
    assert pick_examples([]) == ()


def test_examples_need_every_tool_they_call_and_come_after_the_direct_answers():
    shown = pick_examples(["is_prime", "word_count"])
    direct = [e for e in demo.DEMO_EXAMPLES if not e.calls]
    assert list(shown[: len(direct)]) == direct
    assert _tools_called(shown[len(direct) :]) == {"is_prime", "word_count"}
    assert all(_tools_called([e]) <= {"is_prime", "word_count"} for e in shown)


def test_the_demo_set_shows_what_textagent_run_shows():
    names = set(demo.demo_tools())
    shown = pick_examples(names)
    with_calls = [e for e in shown if e.calls]
    assert with_calls == [e for e in demo.DEMO_EXAMPLES if e.calls]
    # the bench's "13 times 7" example is held back there: it was copied into the seed scenario
    assert not any("13 times 7" in e.task for e in shown)


def test_bench_examples_join_for_tools_beyond_the_demo():
    shown = pick_examples({*demo.demo_tools(), "is_prime"})
    assert any(e.calls and e.calls[0][0] == "is_prime" for e in shown)
    assert not any("13 times 7" in e.task for e in shown)
