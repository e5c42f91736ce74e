"""bench/bfcl/habits.py: what first replies did with the tools, per category and mode, counted on
episodes the runner made (and on the same episodes read back from their records)."""

from __future__ import annotations

from textagent import ScriptedBackend
from textagent.backends.base import Capabilities, Completion
from textagent.bench.bfcl.data import BfclItem
from textagent.bench.bfcl.habits import duplicated_shape, habits_by_category, render_habits
from textagent.bench.bfcl.report import render_bfcl
from textagent.bench.bfcl.tasks import item_task
from textagent.bench.episode import Settings, run_episode
from textagent.bench.records import Episode

WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "dict",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"],
    },
}
ONE = ({"get_weather": {"city": ["Paris"], "unit": ["", "celsius"]}},)
TWO = (*ONE, {"get_weather": {"city": ["Tokyo"], "unit": ["", "celsius"]}})
PARIS = 'TOOL: get_weather ARGS: {"city": "Paris"}'
PARIS_F = 'TOOL: get_weather ARGS: {"city": "Paris", "unit": "fahrenheit"}'
PARIS_C = 'TOOL: get_weather ARGS: {"city": "Paris", "unit": "celsius"}'
TOKYO = 'TOOL: get_weather ARGS: {"city": "Tokyo"}'


def _episode(
    category: str, truth, *replies: str | Completion, mode: str = "text", functions=(WEATHER,), retry: str = "none"
) -> Episode:
    item = BfclItem(f"{category}_1", category, 1, ({"role": "user", "content": "Weather?"},), functions, truth)
    backend = ScriptedBackend(list(replies), capabilities=Capabilities(grammar=True, token_probs=True))
    return run_episode(item_task(item), mode, backend, settings=Settings(retry=retry, retry_odds=0.2, retry_verify=0.8))


def _odds(tool: float) -> Completion:
    """The server's answer to the odds' question: a call's first token at ``tool``."""
    return Completion("ANSWER", top_tokens=(("ANSWER", 1 - tool), ("TOOL", tool)))


def _read_back(episode: Episode) -> Episode:
    return Episode.from_record(episode.to_record())


def test_the_same_tool_twice_where_one_call_is_asked_is_the_pair_shape() -> None:
    twice = _episode("simple_python", ONE, f"{PARIS_F}\n{PARIS_C}", "ANSWER: mild")
    assert duplicated_shape(twice) and duplicated_shape(_read_back(twice))


def test_calls_the_item_asks_for_are_not_the_pair_shape() -> None:
    # two calls of one tool where the item asks for two (parallel), or one right call
    assert not duplicated_shape(_episode("parallel", TWO, f"{PARIS}\n{TOKYO}", "ANSWER: both mild"))
    assert not duplicated_shape(_episode("simple_python", ONE, PARIS, "ANSWER: mild"))
    # too few calls of one tool is a wrong count, not the example's shape
    assert not duplicated_shape(_episode("parallel", TWO, PARIS, "ANSWER: mild"))


def test_two_different_tools_where_one_is_asked_are_not_the_pair_shape() -> None:
    forecast = {**WEATHER, "name": "get_forecast"}
    reply = f'{PARIS}\nTOOL: get_forecast ARGS: {{"city": "Paris"}}'
    episode = _episode("multiple", ONE, reply, "ANSWER: mild", functions=(WEATHER, forecast))
    assert episode.bfcl is not None and episode.bfcl.first.error_type == "wrong_count"
    assert not duplicated_shape(episode)


def test_each_habit_is_counted_in_its_category_and_mode() -> None:
    episodes = [
        # a tool fits; answered from memory, claiming the call in the status answer's form
        _episode("simple_python", ONE, 'ANSWER: get_weather ran with city "Paris"; it reported sun.'),
        _episode("simple_python", ONE, f"{PARIS_F}\n{PARIS_C}", "ANSWER: mild"),
        _episode("simple_python", ONE, PARIS, 'ANSWER: get_weather ran with city "Paris" and reported sun.'),
        _episode("irrelevance", None, "ANSWER: no listed tool tells the time."),
        _episode("irrelevance", None, PARIS, "ANSWER: sunny"),
        _episode("simple_python", ONE, "[]", mode="bfcl-prompt"),  # BFCL's prompt: an empty list
    ]
    table = habits_by_category([_read_back(e) for e in episodes], ["text", "bfcl-prompt"])
    simple, irrelevance = table["simple_python"]["text"], table["irrelevance"]["text"]
    assert (simple.items, simple.skipped, simple.claims, simple.duplicated) == (3, 1, 1, 1)
    assert (irrelevance.items, irrelevance.irrelevance_right, irrelevance.irrelevance_items) == (2, 1, 2)
    assert irrelevance.skipped == 0  # no call is the right answer there
    assert table["simple_python"]["bfcl-prompt"].skipped == 1


def test_the_section_shows_each_category_and_the_total() -> None:
    episodes = [
        _episode("simple_python", ONE, "ANSWER: sunny"),
        _episode("irrelevance", None, "ANSWER: no tool fits"),
    ]
    section = render_habits(episodes, ["text"])
    assert "| simple_python | 1 / 0 / 0 |" in section
    assert "| irrelevance | 0 / 0 / 0 / 1 of 1 |" in section
    assert "| **all** | 1 / 0 / 0 / 1 of 1 |" in section
    assert section in render_bfcl(episodes, ["text"])
    assert render_habits([], ["text"]) == ""


def test_the_gate_table_counts_the_answers_asked_again_and_the_calls_after_them() -> None:
    called = _episode("simple_python", ONE, "ANSWER: sunny", PARIS, "ANSWER: mild", retry="gate")
    kept = _episode("simple_python", ONE, "ANSWER: sunny", "ANSWER: sunny, I am sure", retry="gate")
    right = _episode("simple_python", ONE, PARIS, "ANSWER: mild", retry="gate")  # a call first: no gate
    table = habits_by_category([_read_back(e) for e in (called, kept, right)], ["text"])
    assert (table["simple_python"]["text"].gated, table["simple_python"]["text"].gated_then_called) == (2, 1)
    section = render_habits([called, kept, right], ["text"])
    assert "| category: called after the gate | text |" in section and "| **all** | 1 of 2 |" in section
    # without the gate on, no such table
    assert "after the gate" not in render_habits([_episode("simple_python", ONE, "ANSWER: sunny")], ["text"])


def test_the_claims_table_counts_the_answers_kept_out_and_the_claimed_calls_after_them() -> None:
    claim = 'ANSWER: get_weather ran with city "Paris" and reported sunny.'
    called = _episode("simple_python", ONE, claim, ' {"city": "Paris"}', "ANSWER: mild", retry="claims")
    unlisted = _episode("simple_python", ONE, "ANSWER: get_forecast ran with x 1 and reported rain.", retry="claims")
    table = habits_by_category([_read_back(e) for e in (called, unlisted)], ["text"])
    text = table["simple_python"]["text"]
    assert (text.claim_taken, text.claim_called, text.claims) == (1, 1, 1)  # the unlisted claim is the answer
    section = render_habits([called, unlisted], ["text"])
    assert "| category: claimed tool called after | text |" in section and "| **all** | 1 of 1 |" in section
    assert "claimed tool" not in render_habits([unlisted], ["text"])


def test_the_odds_tables_count_the_replies_begun_and_the_odds_at_first_answers() -> None:
    begun_right = _episode(
        "simple_python", ONE, _odds(0.3), ' get_weather ARGS: {"city": "Paris"}', "ANSWER: mild", retry="odds"
    )
    skipped = _episode("simple_python", ONE, _odds(0.1), "ANSWER: sunny", retry="odds")
    meant = _episode("irrelevance", None, _odds(0.06), "ANSWER: no listed tool tells the time.", retry="odds")
    begun_wrong = _episode(
        "irrelevance", None, _odds(0.45), ' get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny", retry="odds"
    )
    episodes = [_read_back(e) for e in (begun_right, skipped, meant, begun_wrong)]
    table = habits_by_category(episodes, ["text"])
    simple, irrelevance = table["simple_python"]["text"], table["irrelevance"]["text"]
    assert (simple.probed, simple.led, simple.led_right, simple.skip_odds) == (2, 1, 1, [0.1])
    assert (irrelevance.probed, irrelevance.led, irrelevance.led_right, irrelevance.meant_odds) == (2, 1, 0, [0.06])
    section = render_habits(episodes, ["text"])
    assert "| **all** | 2 / 4, 1 |" in section
    assert "| **all** | 1 / 1 / 0 / 0 of 1 \\| 1 / 0 / 0 / 0 of 1 |" in section
    assert "| category: skipped at 0.05 / 0.1 / 0.2 / 0.3 \\| meant at 0.05 / 0.1 / 0.2 / 0.3 | text |" in section
    # without the odds on, no such tables
    assert "`--retry odds`" not in render_habits([_episode("simple_python", ONE, "ANSWER: sunny")], ["text"])


def test_the_odds_table_counts_the_replies_the_check_kept_and_those_it_checked() -> None:
    after = ' get_weather ARGS: {"city": "Paris"}'

    def judged(yes: float) -> Completion:
        return Completion("yes", top_tokens=(("yes", yes), ("no", 1 - yes)))

    kept = _episode("simple_python", ONE, _odds(0.3), after, judged(0.9), after, "ANSWER: mild", retry="odds,verify")
    dropped = _episode(
        "irrelevance", None, _odds(0.3), after, judged(0.4), "ANSWER: no tool tells the time.", retry="odds,verify"
    )
    episodes = [_read_back(e) for e in (kept, dropped)]
    table = habits_by_category(episodes, ["text"])
    assert (table["simple_python"]["text"].checked, table["simple_python"]["text"].led) == (1, 1)
    assert (table["irrelevance"]["text"].checked, table["irrelevance"]["text"].led) == (1, 0)
    assert episodes[1].bfcl is not None and episodes[1].bfcl.first.valid  # the model's own abstention, kept
    assert "| **all** | 1 / 2, 1; checked 2 |" in render_habits(episodes, ["text"])
