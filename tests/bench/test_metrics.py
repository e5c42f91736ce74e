"""Interval math, the failure taxonomy (one scripted episode per class) and the per-mode summary."""

from __future__ import annotations

import math

import pytest

from textagent.backends.base import Completion, Usage
from textagent.backends.scripted import ScriptedBackend
from textagent.bench import metrics as M
from textagent.bench.episode import Settings, run_episode
from textagent.bench.records import Episode
from textagent.bench.tasks import load_tasks, parse_task
from textagent.prompts import EXAMPLE_STYLES, placeholder_examples
from textagent.steps import Note

SUITE = {t.id: t for t in load_tasks()}


def read_back(**fields):
    """An Episode read from a record of these fields (a task, text mode and an answer unless given)."""
    return Episode.from_record({"task": "t", "mode": "text", "stop_reason": "answer", **fields})


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


# -- taxonomy: one real (scripted) episode per class -------------------------------------------


def episode(task_id, replies, *, mode="text", honour_stop=True, **settings):
    backend = ScriptedBackend(replies, honour_stop=honour_stop)
    return run_episode(SUITE[task_id], mode, backend, chat_format="chatml", settings=Settings(**settings))


W = 'TOOL: get_weather ARGS: {"city": "%s"}'


@pytest.mark.parametrize(
    "task_id, replies, expected",
    [
        ("single-weather-berlin", [W % "Berlin", "ANSWER: It is 4 °C."], None),
        ("notool-capital-france", [W % "Paris", "ANSWER: Paris"], "call_not_needed"),
        (
            "single-weather-berlin",
            ["Let me look it up.\nOBSERVATION: Berlin is 20 °C", "x"],
            "hallucinated_observation",
        ),
        ("single-weather-berlin", [W % "Berlin", W % "Berlin", "ANSWER: 3 degrees", "ANSWER: 3 degrees"], "loop"),
        ("single-weather-berlin", ['TOOL: get_weather ARGS: {"city": "Berlin"'] * 3, "unparseable"),
        ("single-weather-berlin", [W % "Paris", W % "London"], "budget"),
        ("single-calc-mul", ["ANSWER: 408"], "no_call"),
        ("distract-divide", ['TOOL: search_web ARGS: {"query": "48/6"}', "ANSWER: 8", "ANSWER: 8"], "wrong_tool"),
        ("single-weather-lisbon", [W % "Paris", "ANSWER: rain in Lisbon"], "invalid_args"),
        ("single-weather-berlin", [W % "Berlin", "ANSWER: It is 40 °C.", "ANSWER: It is 40 °C."], "wrong_answer"),
        ("single-weather-berlin", [], "backend_error"),
    ],
)
def test_each_failure_class(task_id, replies, expected):
    live = episode(task_id, replies, max_steps=2 if expected == "budget" else None)
    record = live.to_record()
    assert record["failure"] == expected, (record["stop_reason"], record["checks"], record["trace"][1:3])
    assert M.classify(live) == expected == M.classify(Episode.from_record(record))  # live and read back alike
    assert (expected is None) == record["success"]


def test_hallucination_when_the_server_ignores_stop():
    record = episode(
        "single-weather-berlin", ["I know this.\nOBSERVATION (get_weather): 30 °C\nANSWER: 30"], honour_stop=False
    ).to_record()
    steps = [s for s in record["trace"] if s["type"] == "step"]
    assert steps[0]["dropped"] and record["failure"] == "hallucinated_observation"


def test_retrying_after_a_tool_error_is_not_a_loop():
    call = 'TOOL: get_stock_price ARGS: {"symbol": "ACME"}'
    record = episode("recover-stock-acme", [call, call, "ANSWER: 123.45 USD"]).to_record()
    assert record["success"] and not record["loop"] and record["tool_errors"] == 1


def test_recovery_after_a_first_step_format_error():
    record = episode(
        "single-weather-berlin", ['TOOL: get_weather ARGS: {"city": ', W % "Berlin", "ANSWER: 4 °C"]
    ).to_record()
    assert record["success"]
    assert record["first_step_format_error"] and record["recovered"] and record["format_errors"] == 1
    baseline = episode(
        "single-weather-berlin", ['TOOL: get_weather ARGS: {"city": ', W % "Berlin"], mode="baseline"
    ).to_record()
    assert baseline["stop_reason"] == "format_errors" and not baseline["recovered"]
    assert baseline["failure"] == "unparseable"


def test_native_decode_failures_from_the_agents_details():
    rec = {
        "task": "t",
        "mode": "native",
        "success": False,
        "stop_reason": "answer",
        "needs_tools": True,
        "attempted": [],
        "trace": [
            {
                "type": "step",
                "raw": '{"name": "calculate", "arguments": {}}',
                "outcomes": [],
                "details": {"native": "content", "decode_failure": "json"},
            },
            {"type": "step", "raw": "", "outcomes": [], "details": {"native": "tool_calls"}},
        ],
    }
    assert Episode.from_record(rec).facts.native_decode_failures == 1
    assert M.classify(Episode.from_record(rec)) == "unparseable"
    rescued = {
        **rec,
        "trace": [{**rec["trace"][0], "details": {"native": "content", "decode_failure": "json", "fallback": True}}],
    }
    again = Episode.from_record(rescued)
    assert again.facts.native_decode_failures == 1 and M.classify(again) == "no_call"


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
    assert M.episode_tokens({"prompt_tokens": 100, "completion_tokens": 5}) == 105
    assert M.episode_tokens({"prompt_tokens": 100, "prompt_evaluated": 10, "completion_tokens": 5}) == 15
    assert M.episode_tokens(None) == 0


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
    assert record.usage["prompt_tokens"] == 1400 and record.usage["completion_tokens"] == 24
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


def test_answers_copying_a_placeholder_example_are_counted():
    """Issue 41: the form of the placeholder examples' answers, copied into real answers."""
    from textagent.bench.metrics import copied_example

    for copied in (
        "math_factorial returned: 120",
        "CalculateTax returned: (what CalculateTax returned).",
        "The field is (what magnetic_field.calculate returned).",
        "restaurant.search and flight.search returned a result each.",
        "f returned a result for each.",
        "The result is 17.",
        "The answers are 42 and 17.",
        "get_weather reported success with the value 42.",
        "f reported 42 for x 1, and 17 for x 2.",
        "The movies playing are: (list of movie titles).",
        "The field is (calculate_electric_field returned).",
        "The area is: (calculate the area using Heron's formula)",
        "The name of the python file in the current directory is: (name of the python file).",
        "The roots are (the roots of the quadratic equation).",
        "The birthdate is (the birthdate returned by scientist_info.get_birthdate).",
        "No tool is needed for that.",  # the direct example's tail as the whole answer
    ):
        assert copied_example(copied), copied
    for fine in ("The factorial of 5 is 120.", "It returned to Paris.", "The search returned 3 results.", None, ""):
        assert not copied_example(fine), fine
    for fine in (
        "The result is 420.",
        "Between 42 and 170.",
        "The result is 42 metres.",
        "It is 18 °C in Paris (the warmest day of the week so far).",
        "The file is deploy.py (the only Python file there).",
        "The molecule (the one with id DNA123) is ATGC.",
        "The settings are (number: integer, formatted: boolean).",
        "Paris is in France; no tool is needed for that.",
        "The sensor reported 42.5 degrees.",
        "The server reported success.",
    ):
        assert not copied_example(fine), fine


def test_answers_repeating_the_feedback_are_counted():
    """Answers seen in bench runs: the model wrote the feedback it had been sent as its answer."""
    from textagent.bench.metrics import repeated_feedback

    for parroted in (
        "The call failed. Call the tool again (with corrected arguments if they were wrong); answer only from "
        "a call that worked.",
        "board_game_search returned an error. Call the tool again (with corrected arguments if they were wrong)",
        "format error: Your reply was cut off at the length limit in the middle of line 14, so none of it was run.",
        "ERROR: unknown tool `calculate_prime_factors`.\nThe call did not run. Call the tool\n again with corrected "
        "arguments.",
    ):
        assert repeated_feedback(parroted), parroted
    for fine in ("The call to the weather service worked: 18 °C.", "Call me again tomorrow.", None, ""):
        assert not repeated_feedback(fine), fine


def test_the_feedback_sentences_come_from_every_feedback_template():
    """The sentences are read from the templates, so a reworded feedback is still counted."""
    from textagent import prompts
    from textagent.bench.metrics import _FEEDBACK_TEMPLATES, feedback_sentences

    sentences = feedback_sentences()
    for family, name in _FEEDBACK_TEMPLATES:
        text = " ".join(prompts.for_family(family).template(name).template.split()).lower()
        assert any(sentence in text for sentence in sentences), (family, name)


def test_a_status_answer_is_copied_only_when_the_tool_it_names_did_not_run():
    """The status style's answer says what ran: the truth after that call, a copied claim without it."""
    from textagent.bench.metrics import called_tools, copied_example

    answer = 'get_weather ran with city "Paris" and reported success.'
    record = read_back(answer=answer, calls=[{"name": "get_weather", "args": {"city": "Paris"}}])
    assert not copied_example(answer, called_tools(record))
    assert copied_example(answer, called_tools(read_back(calls=[]))) and copied_example(answer, {"clock"})
    assert copied_example("f ran for x 1, and for x 2; both reported success.", set())
    assert copied_example(answer)  # nothing known of the calls: counted
    # the claim in other words of what the tool reported counts too
    claim = 'sports.most_points ran with league "NBA"; it reported the record for the most points.'
    assert copied_example(claim, set()) and not copied_example(claim, {"sports.most_points"})
    for fine in ("It ran with no trouble.", "The backup reported success.", "The job ran for 2 hours."):
        assert not copied_example(fine, set()), fine
    # a function-named claim with no word of a report (BFCL test, the 1.5B); every name it claims
    # must have run
    for claim, ran in (
        ('maps.route_times ran with route "Paris to Rome"; it returned the estimated time.', {"maps.shortest_path"}),
        ('get_snow_report ran with location "Boston", and get_weather with location "Oslo".', set()),
        ('get_weather ran with city "Oslo", and get_snow_report ran with location "Oslo".', {"get_weather"}),
    ):
        assert copied_example(claim, ran) and not copied_example(claim, ran | {"maps.route_times", "get_snow_report"})
    assert not copied_example("The script deploy ran for a minute.", set())


@pytest.mark.parametrize("style", EXAMPLE_STYLES)
def test_every_answer_of_the_made_up_examples_counts_as_copied(style):
    """The check follows the templates: each answer a placeholder example shows, in each style,
    is what the report counts when a model writes it as its own."""
    from textagent.bench.metrics import copied_example
    from textagent.tools import tool

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return city

    @tool
    def clock(zone: str) -> str:
        """The time in a zone."""
        return zone

    examples = placeholder_examples([weather, clock], style)
    answers = [w.answer for w in examples if w.calls]
    assert len(answers) == 3
    for answer in answers:
        assert copied_example(answer), answer


def test_skipped_calls_count_items_that_needed_one():
    from textagent.bench.metrics import skipped_call

    assert skipped_call(read_back(kind="simple_python", bfcl={"first": {"error_type": "no_call"}}))
    assert not skipped_call(read_back(kind="irrelevance", bfcl={"first": {"error_type": "no_call"}}))
    assert not skipped_call(read_back(kind="simple_python", bfcl={"first": {"error_type": "wrong_value"}}))
    assert skipped_call(read_back(needs_tools=True, attempted=[])) and not skipped_call(
        read_back(needs_tools=True, attempted=["f"])
    )
    assert not skipped_call(read_back(needs_tools=True, attempted=[], stop_reason="backend_error"))


def test_a_claimed_call_is_one_the_answer_says_ran_and_the_episode_did_not():
    from textagent.bench.metrics import claimed_call

    status = 'get_weather ran with city "Paris" and reported sun.'
    assert claimed_call(status, set()) and claimed_call(status, {"get_time"})
    assert not claimed_call(status, {"get_weather"})
    assert claimed_call('maps.route_times ran with route "A"; it returned 3 hours', {"get_weather"})
    # a placeholder copy is no claim; "ran for" without a function-like name is no claim either
    assert not claimed_call("The result is (what get_weather returned).", set())
    assert not claimed_call("The job ran for 2 hours.", set()) and not claimed_call(None, set())
