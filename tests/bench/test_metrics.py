"""bench/metrics.py: the Wilson interval and the per-mode summary."""

from __future__ import annotations

import math

import pytest
from suite_runs import SUITE, W, episode, read_back

from textagent.backends.base import Completion, Usage
from textagent.backends.scripted import ScriptedBackend
from textagent.bench import metrics as M
from textagent.bench.episode import run_episode
from textagent.bench.tasks import parse_task
from textagent.steps import Note

# -- Wilson interval ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        (0, 10, 0.0, 0.2775),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (46, 57, 0.6866, 0.8887),
        (1, 1, 0.2065, 1.0),
    ],
)
def test_wilson_known_values(k, n, low, high):
    lo, hi = M.wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_edges_and_symmetry():
    assert M.wilson(0, 0) == (0.0, 1.0)
    lo, hi = M.wilson(3, 20)
    lo2, hi2 = M.wilson(17, 20)
    assert lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    assert lo < 3 / 20 < hi
    with pytest.raises(ValueError):
        M.wilson(5, 4)
    # wider at 90 % than... narrower: a smaller z gives a narrower interval
    assert M.wilson(5, 10, z=1.0)[1] < M.wilson(5, 10)[1]


# -- summary ---------------------------------------------------------------------------------------


def fake(task, mode, success, *, steps=(), usage=None, seconds=1.0, kind="single", repeat=0):
    trace = [{"type": "step", "format_error": bad, "outcomes": [], "raw": ""} for bad in steps]
    return read_back(
        **{
            "task": task,
            "mode": mode,
            "repeat": repeat,
            "kind": kind,
            "success": success,
            "seconds": seconds,
            "steps": len(steps),
            "stop_reason": "answer",
            "usage": usage or {},
            "trace": trace,
            "attempted": [],
            "checks": [] if success else [{"type": "numeric", "ok": False}],
        }
    )


def test_summary_numbers():
    records = [
        fake(
            "a",
            "text",
            True,
            steps=[False, False],
            seconds=2.0,
            usage={"prompt_tokens": 1000, "prompt_evaluated": 600, "prompt_cached": 400, "completion_tokens": 40},
        ),
        fake(
            "b",
            "text",
            True,
            steps=[True, False],
            usage={"prompt_tokens": 1000, "prompt_evaluated": 200, "prompt_cached": 800, "completion_tokens": 60},
        ),
        fake(
            "c",
            "text",
            False,
            steps=[True, True, True],
            kind="chain",
            usage={"prompt_tokens": 500, "prompt_evaluated": 100, "prompt_cached": 400, "completion_tokens": 0},
        ),
        fake("a", "baseline", False, steps=[False], usage={"prompt_tokens": 300, "completion_tokens": 10}),
    ]
    s = M.summarize(records, ["text", "baseline", "native"])
    text = s["text"]
    assert (text.episodes, text.successes) == (3, 2)
    assert (text.ci_low, text.ci_high) == M.wilson(2, 3)
    assert text.mean_steps == pytest.approx(7 / 3)
    assert text.tokens_per_solved == pytest.approx((640 + 260 + 100) / 2)
    assert text.kv_reuse == pytest.approx(1600 / 2500)
    assert text.format_error_rate == pytest.approx(4 / 7)
    assert (text.first_step_errors, text.recovered, text.recovery_rate) == (2, 1, 0.5)
    assert text.decode_failure_rate is None
    assert text.seconds_per_task == pytest.approx(4 / 3)
    assert text.failures == {"unparseable": 1}
    assert text.by_kind == {"single": [2, 2], "chain": [0, 1]}
    base = s["baseline"]
    assert base.tokens_per_solved is None and base.kv_reuse is None and base.failures == {"wrong_answer": 1}
    assert s["native"].episodes == 0 and list(s) == ["text", "baseline", "native"]


def test_the_last_record_of_an_episode_wins():
    old = fake("a", "text", False)
    new = fake("a", "text", True)
    assert M.summarize([old, new])["text"].successes == 1
    assert len(M.latest([old, new, fake("a", "text", True, repeat=1)])) == 2


def test_task_scores_put_the_worst_first():
    records = [
        fake("easy", "text", True, steps=[False]),
        fake("hard", "text", False, steps=[False] * 4),
        fake("mid", "text", False, steps=[False]),
        fake("mid", "text", True, steps=[False], repeat=1),
    ]
    rows = M.task_scores(records, "text")
    assert [r["task"] for r in rows] == ["hard", "mid", "easy"]
    assert rows[1]["rate"] == 0.5 and math.isclose(rows[0]["mean_steps"], 4)


def test_episode_tokens_fall_back_to_prompt_tokens():
    assert M.episode_tokens(Usage(prompt_tokens=100, completion_tokens=5)) == 105
    assert M.episode_tokens(Usage(prompt_tokens=100, prompt_evaluated=10, completion_tokens=5)) == 15
    assert M.episode_tokens(Usage()) == 0


def test_usage_from_a_scripted_completion_reaches_the_record():
    usage = Usage(prompt_tokens=700, prompt_evaluated=700, prompt_cached=0, completion_tokens=12)
    record = run_episode(
        SUITE["single-weather-berlin"],
        "text",
        ScriptedBackend(
            [Completion(W % "Berlin", "stop", usage=usage), Completion("ANSWER: 4 °C", "stop", usage=usage)]
        ),
        chat_format="chatml",
    )
    assert record.usage == Usage(prompt_tokens=1400, prompt_evaluated=1400, prompt_cached=0, completion_tokens=24)
    assert read_back(**record.to_record()).usage == record.usage  # typed in the record and read back
    assert parse_task({"id": "x", "question": "q", "tools": [], "check": {"type": "answered"}}).checks


class _Cold:
    name = "cold"

    def on_answer(self, run, answer):
        return None if run.sent_back_by(self.name) else "Say it again."

    def on_step(self, run, step):
        return [Note("cold", "noted")]


def test_answers_sent_back_and_check_notes_are_counted(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "benchchecks", types.SimpleNamespace(Cold=_Cold))
    record = episode(
        "single-weather-berlin",
        [W % "Berlin", "ANSWER: It is 40 °C.", "ANSWER: It is 4 °C."],
        checks="benchchecks:Cold",
    )
    assert record.success and (record.facts.sent_back, record.facts.check_notes) == (1, 1)
    plain = episode("single-weather-berlin", [W % "Berlin", "ANSWER: It is 4 °C."])
    assert (plain.facts.sent_back, plain.facts.check_notes) == (0, 0)


def test_step_one_evaluation_and_throughput_per_endpoint():
    from textagent.bench.metrics import summarize, throughput

    def record(mode, endpoint, end, seconds, evaluated, generated):
        step = {"type": "step", "usage": {"prompt_tokens": 1000, "prompt_evaluated": evaluated}}
        return read_back(
            **{
                "task": f"t{end}",
                "mode": mode,
                "repeat": 0,
                "success": True,
                "endpoint": endpoint,
                "time": end,
                "seconds": seconds,
                "trace": [step],
                "usage": {"prompt_tokens": 1000, "prompt_evaluated": evaluated, "completion_tokens": generated},
            }
        )

    records = [
        record("text", "http://a", 100.0, 10.0, 400, 50),
        record("text", "http://a", 130.0, 20.0, 100, 30),
        record("text", "http://b", 120.0, 60.0, 600, 120),
    ]
    s = summarize(records)["text"]
    assert (s.first_prompt, s.first_evaluated) == (1000, 1100 / 3)
    speeds = throughput(records)
    assert speeds["http://a"]["wall_seconds"] == 40.0 and speeds["http://a"]["episodes_per_minute"] == 3.0
    assert speeds["http://a"]["prompt_tokens_per_second"] == 500 / 40 and speeds["http://b"]["episodes"] == 1
    assert speeds["http://b"]["generated_tokens_per_second"] == 2.0
