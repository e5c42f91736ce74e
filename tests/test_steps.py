"""steps: the counts of a run are defined once, on Step and Result, and read the same from a live
run and from its trace read back (what the bench's metrics do)."""

from __future__ import annotations

import json

import pytest

from textagent import Agent, ScriptedBackend
from textagent.backends.base import Capabilities, Completion
from textagent.bench.records import Episode
from textagent.steps import Note, SentBack, Step
from textagent.toolkits.demo import demo_tools

COUNTS = (
    "format_errors",
    "first_step_format_error",
    "recovered",
    "decode_failures",
    "unrescued_decode_failures",
    "tool_errors",
    "check_notes",
    "hallucinated",
)


class Chat(ScriptedBackend):
    """Assistant messages in order, through chat()."""

    def __init__(self, messages):
        super().__init__(["-"] * len(messages), capabilities=Capabilities(chat=True))
        self.messages = list(messages)

    def chat(self, messages, **kw):
        message = self.messages.pop(0)
        return Completion(message.get("content") or "", finish_reason="stop", message=message)


class Grounded:
    """Sends back an answer that no result holds; notes every step with results."""

    name = "grounded"

    def on_answer(self, run, answer):
        held = {o.output for s in run.steps for o in s.outcomes if o.ok}
        return None if answer in held else SentBack(self.name, "no result holds that", (answer,))

    def on_step(self, run, step):
        return [Note(self.name, "checked", 0)] if step.outcomes else []


def fenced(expression):
    return {
        "role": "assistant",
        "content": '```json\n{"name": "calculate", "arguments": {"expression": "%s"}}\n```' % expression,
    }


RUNS = {
    "text: a bad first reply, a tool error, a hallucinated result, a sent-back answer": (
        "text",
        [
            'TOOL: calculate ARGS: {"expression": ',
            'TOOL: calculate ARGS: {"expression": "1/0"}',
            'TOOL: calculate ARGS: {"expression": "2+2"}\nOBSERVATION: 4\nANSWER: 4',
            "ANSWER: 5",
            "ANSWER: 4",
        ],
    ),
    "native: a call the server did not decode": ("native", [fenced("2+2")]),
    "native+fallback: the same call, rescued": ("native+fallback", [fenced("2+2"), {"content": "4"}]),
}


@pytest.mark.parametrize("name", RUNS)
def test_counts_of_a_live_run_and_of_its_trace_agree(name, tmp_path):
    mode, replies = RUNS[name]
    backend = Chat(replies) if mode.startswith("native") else ScriptedBackend(replies, honour_stop=False)
    checks = [Grounded()] if mode == "text" else []
    result = Agent(backend, demo_tools(), mode=mode, checks=checks, trace=tmp_path / "t.jsonl").run("2+2?")
    records = [json.loads(json.dumps(s.to_record())) for s in result.steps]
    again = Episode.from_record({"task": "t", "mode": mode, "trace": records}).result
    assert {c: getattr(again, c) for c in COUNTS} == {c: getattr(result, c) for c in COUNTS}
    assert again.sent_back() == result.sent_back()
    if mode == "text":
        assert result.format_errors == 1 and result.recovered and result.tool_errors == 1
        assert result.hallucinated and result.sent_back() == 1 and result.check_notes == 2
    else:
        assert result.decode_failures == 1
        assert result.unrescued_decode_failures == (1 if mode == "native" else 0)


def test_a_reply_cut_at_the_observation_stop_word_with_no_call_is_a_hallucination():
    cut = Step(1, "I think it is 4.", stop_word="\nOBSERVATION:")
    assert cut.hallucinated and Step.from_record(cut.to_record()).hallucinated
    assert not Step(1, "ANSWER: 4", stop_word="\nTOOL:").hallucinated


def test_notes_and_sent_back_answers_come_back_from_a_record():
    step = Step(
        2,
        "ANSWER: 9",
        notes=[Note("refused_calls", "two calls refused"), Note("grounded", "9 is in no result", 0)],
        sent_back=SentBack("grounded", "look again", (9,)),
        refused_calls=2,
    )
    again = Step.from_record(json.loads(json.dumps(step.to_record())))
    assert (again.notes, again.sent_back, again.refused_calls) == (step.notes, step.sent_back, 2)
    assert again.details == step.details and again.extra == {}


def test_a_step_record_without_details_is_no_decode_failure():
    episode = Episode.from_record(
        {"task": "t", "mode": "native", "trace": [{"type": "step", "step": 1, "raw": '{"name": "x"}'}]}
    )
    assert episode.facts.native_decode_failures == 0 and episode.facts.steps == 1


def test_retry_facts_are_typed_on_the_step_and_round_trip_through_the_record():
    from textagent.steps import RetryFacts

    step = Step(2, "TOOL: x ARGS: {}", retry=RetryFacts(temperature=0.7, seed=3, rewound=True, sampled_next=0.7))
    record = step.to_record()
    assert record["details"]["retry"] == {"temperature": 0.7, "seed": 3, "rewound": True, "sampled_next": 0.7}
    back = Step.from_record(record)
    assert back.retry == step.retry and back.rewound and back.details == step.details and "retry" not in back.extra
    # an older or newer trace's keys this version does not know are left out, not an error
    record["details"]["retry"]["someday"] = 1
    assert Step.from_record(record).retry == step.retry
    assert Step(1, "").details == {} and not Step(1, "").rewound


def test_a_step_records_usage_reads_back_whatever_counts_it_holds():
    from textagent.backends.base import Usage

    record = {"step": 1, "raw": "ANSWER: 4", "answer": "4", "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    assert Step.from_record(record).usage == Usage(prompt_tokens=9, completion_tokens=3)
    # a count a later version adds, or one written as null or a string, does not lose the step
    odd = {**record, "usage": {"prompt_tokens": 9, "draft_tokens": 4, "completion_tokens": None, "prompt_cached": "x"}}
    assert Step.from_record(odd).usage == Usage(prompt_tokens=9)
    assert Step.from_record({**record, "usage": None}).usage == Usage()


def test_a_step_has_a_failed_call_when_any_of_its_calls_failed_and_so_does_its_record():
    from textagent.tools.execution import ToolOutcome

    ran = ToolOutcome("add", {"a": 1}, True, "2")
    unknown = ToolOutcome("ad", {}, False, "unknown tool", "unknown_tool")
    assert not Step(1, "ANSWER: 2").call_failed and not Step(1, "x", outcomes=[ran]).call_failed
    mixed = Step(1, "x", outcomes=[ran, unknown])
    assert mixed.call_failed and Step.from_record(json.loads(json.dumps(mixed.to_record()))).call_failed
