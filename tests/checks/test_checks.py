"""The checks one by one, on hand-made runs: what each sends back or notes, in both wordings."""
import pytest

from textagent import checks, prompts
from textagent.checks import ItemsCheck, NumbersCheck, RepeatedCalls, RunView
from textagent.checks.items import Unlooked
from textagent.steps import SentBack, Step
from textagent.tools import ToolOutcome, ToolSet

TEXT, NATIVE = prompts.for_family("text"), prompts.for_family("native")


def _tools():
    def get_weather(city: str) -> str:
        """Weather."""
        return city

    def toggle_light(room: str, on: bool) -> str:
        """Light."""
        return room

    return ToolSet([get_weather, toggle_light])


def _step(index, *outcomes, sent_back=None):
    step = Step(index, "")
    step.outcomes = [ToolOutcome(name, args, ok, output, None if ok else "tool_error", 0.0)
                     for name, args, output, ok in outcomes]
    step.sent_back = sent_back
    return step


def _view(task, steps, family=TEXT, examples=()):
    return RunView(task, tuple(steps), _tools(), tuple(examples), family)


def test_numbers_sends_back_once_and_only_after_a_call():
    check = NumbersCheck()
    assert check.on_answer(_view("Weather in Lisbon?", []), "It is 27 °C.") is None   # no call: not second-guessed
    looked = _step(1, ("get_weather", {"city": "Lisbon"}, "22 °C, sunny", True))
    sent = check.on_answer(_view("Weather in Lisbon?", [looked]), "It is 27 °C.")
    assert sent == SentBack("numbers", "Your ANSWER gives 27, but no OBSERVATION shows that. Call the tool for each "
                                       "value you have not looked up yet, then write the ANSWER from the results.",
                            ("27",))
    again = _step(2, sent_back=sent)
    assert check.on_answer(_view("Weather in Lisbon?", [looked, again]), "It is 27 °C.") is None
    assert check.on_answer(_view("Weather in Lisbon?", [looked]), "It is 22 °C.") is None


def test_numbers_names_what_came_from_the_examples_in_the_native_wording():
    worked = prompts.Worked("Weather in Rome?", [("get_weather", {"city": "Rome"}, "9 °C")], "9 °C in Rome.")
    looked = _step(1, ("get_weather", {"city": "Oslo"}, "22 °C", True))
    sent = NumbersCheck().on_answer(_view("Oslo?", [looked], NATIVE, [worked]), "27 and 9")
    assert sent.text == ("Your answer gives 27 and 9, but no tool result shows that: 9 comes from the worked examples, "
                         "not from this task. Call the tool for each value you have not looked up yet, then answer "
                         "from the results.")


TASK = "Turn off the lights in the living room, the hallway and the bathroom."
ITEMS = (Unlooked("hallway", "toggle_light", {"room": "hallway", "on": False}, "living room"),
         Unlooked("bathroom", "toggle_light", {"room": "bathroom", "on": False}, "living room"))


def test_items_sends_back_the_calls_to_make():
    first = _step(1, ("toggle_light", {"room": "living room", "on": False}, "ok", True))
    sent = ItemsCheck().on_answer(_view(TASK, [first]), "The living room, hallway and bathroom lights are off.")
    assert sent.check == "items" and sent.found == ITEMS
    assert sent.text == (
        "Your ANSWER speaks of hallway and bathroom, but no OBSERVATION covers them: no tool was called for them. "
        'Call toggle_light with {"room": "hallway", "on": false} and toggle_light with {"room": "bathroom", '
        '"on": false}, then write the ANSWER from the results.')


def test_items_reminds_once_when_the_last_missing_call_is_made():
    check = ItemsCheck()
    first = _step(1, ("toggle_light", {"room": "living room", "on": False}, "ok", True))
    bounced = _step(2, sent_back=SentBack("items", "...", ITEMS))
    one = _step(3, ("toggle_light", {"room": "hallway", "on": False}, "ok", True))
    assert check.on_step(_view(TASK, [first, bounced, one]), one) == ()   # bathroom still missing
    two = _step(4, ("toggle_light", {"room": "bathroom", "on": False}, "ok", True))
    (note,) = check.on_step(_view(TASK, [first, bounced, one, two], NATIVE), two)
    assert note.source == "items" and note.outcome is None
    assert note.text == ("That was the last missing call: living room, hallway and bathroom all have their results "
                         "above. Now answer from them.")
    three = _step(5, ("toggle_light", {"room": "bathroom", "on": True}, "ok", True))
    assert check.on_step(_view(TASK, [first, bounced, one, two, three]), three) == ()   # reminded already


def test_repeats_notes_the_repeated_result_only():
    check = RepeatedCalls()
    first = _step(1, ("get_weather", {"city": "Oslo"}, "9", True))
    second = _step(2, ("get_weather", {"city": "Oslo"}, "9", True), ("get_weather", {"city": "Rome"}, "20", True))
    notes = check.on_step(_view("Oslo?", [first, second]), second)
    assert [(n.source, n.outcome) for n in notes] == [("repeats", 0)]
    assert notes[0].text == TEXT.render("repeated_call") and "ANSWER" in notes[0].text
    native = check.on_step(_view("Oslo?", [first, second], NATIVE), second)
    assert native[0].text == NATIVE.render("repeated_call") and "ANSWER" not in native[0].text


def test_repeats_names_the_other_tools_when_a_failing_call_is_repeated():
    failed = ("get_weather", {"city": "?"}, "ERROR: no such city", False)
    first, second = _step(1, failed), _step(2, failed)
    (note,) = RepeatedCalls().on_step(_view("x", [first, second]), second)
    assert note.text.endswith("first call toggle_light to get what this call needs.")


def test_a_failed_call_that_now_works_is_not_a_repeat():
    first = _step(1, ("get_weather", {"city": "Oslo"}, "ERROR: busy", False))
    second = _step(2, ("get_weather", {"city": "Oslo"}, "9", True))
    assert RepeatedCalls().on_step(_view("x", [first, second]), second) == []


def test_checks_by_name():
    assert checks.from_names("none") == [] and checks.from_names("") == []
    assert [c.name for c in checks.from_names("small-model")] == ["items", "numbers", "repeats"]
    assert [c.name for c in checks.from_names("repeats, numbers")] == ["repeats", "numbers"]
    with pytest.raises(ValueError, match="unknown check 'grammar'"):
        checks.from_names("grammar")
    assert [c.name for c in checks.as_checks(checks.small_model())] == ["items", "numbers", "repeats"]
    with pytest.raises(TypeError):
        checks.as_checks([object()])
