"""bench.bfcl.loop_stats: replies repeating a failed reply and force-quits by cause, from a trace."""

from __future__ import annotations

import dataclasses
from typing import Any

from textagent.bench.bfcl.loop_stats import LoopStats, loop_stats
from textagent.bench.bfcl.multi_report import _HEADER, multi_turn_rows, render_multi_turn
from textagent.bench.records import Episode

UNKNOWN = {"name": "ResearchDocs", "args": {"q": 1}}
FAILED = [{"name": "ResearchDocs", "ok": False, "error": "unknown_tool"}]
WORKED = [{"name": "ls", "ok": True, "error": None}]


def step(raw: str, *, calls=(), outcomes=(), format_error=False, details=None) -> dict[str, Any]:
    return {
        "type": "step",
        "raw": raw,
        "calls": list(calls),
        "outcomes": list(outcomes),
        "format_error": format_error,
        "details": details or {},
    }


def record(*questions: list[dict[str, Any]], force_quit: bool = False) -> Episode:
    trace: list[dict[str, Any]] = []
    for steps in questions:
        trace += [{"type": "start"}, *steps, {"type": "result", "answer": None}]
    return Episode.from_record(
        {
            "task": "multi_turn_base_0",
            "kind": "multi_turn_base",
            "mode": "text",
            "repeat": 0,
            "success": False,
            "stop_reason": "max_steps" if force_quit else "answer",
            "steps": sum(len(q) for q in questions),
            "seconds": 1.0,
            "usage": {},
            "trace": trace,
            "multi_turn": {"turns": len(questions), "turns_right": 0, "force_quit": force_quit},
        }
    )


def test_a_model_stuck_on_one_unknown_tool_repeats_after_every_failure():
    stuck = [step("TOOL: ResearchDocs ARGS: {}", calls=[UNKNOWN], outcomes=FAILED) for _ in range(4)]
    assert loop_stats(record(stuck, force_quit=True)) == LoopStats(3, 3, "repeating")


def test_the_same_calls_in_other_words_are_a_repeat_and_a_new_mistake_is_not():
    replies = [
        step("TOOL: ResearchDocs ARGS: {}", calls=[UNKNOWN], outcomes=FAILED),
        step("Thought: again\nTOOL: ResearchDocs ARGS: {}", calls=[UNKNOWN], outcomes=FAILED),
        step("TOOL: ls ARGS: {", format_error=True),
        step("ANSWER: done"),
    ]
    assert loop_stats(record(replies)) == LoopStats(3, 1, None)


def test_repeats_are_counted_within_a_question_only():
    first = [step("TOOL: x", format_error=True)]
    second = [
        step("TOOL: ls ARGS: {}", calls=[{"name": "ls", "args": {}}], outcomes=WORKED),
        step("TOOL: x", format_error=True),
    ]
    assert loop_stats(record(first, second)).repeating == 0


def test_force_quit_causes():
    calling = [step("TOOL: ls ARGS: {}", calls=[{"name": "ls", "args": {}}], outcomes=WORKED)] * 3
    failing = [*calling, step("TOOL: y ARGS: {", format_error=True)]
    assert loop_stats(record(calling, force_quit=True)).force_quit == "calling"
    assert loop_stats(record(failing, force_quit=True)).force_quit == "failing"


def test_an_answer_sent_back_is_a_failed_reply():
    replies = [
        step("ANSWER: x", details={"sent_back": {"check": "retry", "text": "Say it again.", "found": []}}),
        step("ANSWER: x"),
    ]
    assert loop_stats(record(replies)) == LoopStats(1, 1, None)


def test_the_report_shows_repeats_and_force_quits_by_cause():
    stuck = [step("TOOL: ResearchDocs ARGS: {}", calls=[UNKNOWN], outcomes=FAILED) for _ in range(3)]
    (row,) = multi_turn_rows([record(stuck, force_quit=True)], ["text"])
    assert row[_HEADER.index("force-quit")] == "1/1 (repeating 1)"
    assert row[_HEADER.index("replies after a failed one: repeating a failure")] == "2/2"


def test_rewound_replies_are_counted_and_the_report_says_so_only_when_there_are_some():
    calls = [{"name": "ls", "args": {}}]
    rewound = {"retry": {"repeats_results": True, "rewound": True}}
    replies = [
        step("TOOL: ls ARGS: {}", calls=calls, outcomes=WORKED),
        step("TOOL: ls ARGS: {}", calls=calls, outcomes=WORKED, details=rewound),
        step("TOOL: ls ARGS: {}", calls=calls, outcomes=WORKED, details=rewound),
        step("ANSWER: done"),
    ]
    assert loop_stats(record(replies)).rewound == 2
    other = dataclasses.replace(record([step("ANSWER: done")]), task="multi_turn_base_1")
    said = render_multi_turn([record(replies), other], ["text"])
    assert "kept out of the conversation as repeats (`--retry rewind`): text 2 (in 1 of 2 items)" in said
    assert "kept out of the conversation" not in render_multi_turn([record(replies[:1])], ["text"])


def test_answers_sent_back_after_reported_errors_are_counted_and_said_only_when_there_are_some():
    calls = [{"name": "cat", "args": {"file_name": "a.txt"}}]
    sent = {"retry": {"after_error": True}, "sent_back": {"check": "retry", "text": "You answered right after"}}
    replies = [
        step("TOOL: cat ARGS: {}", calls=calls, outcomes=WORKED),
        step("ANSWER: no such file", details=sent),
        step("ANSWER: no such file"),
    ]
    assert loop_stats(record(replies)).after_error == 1
    assert loop_stats(record(replies)).rewound == 0
    other = dataclasses.replace(record([step("ANSWER: done")]), task="multi_turn_base_1")
    said = render_multi_turn([record(replies), other], ["text"])
    assert "sent back after calls whose results reported an error (`--retry errors`): text 1 (in 1 of 2 items)" in said
    assert "kept out of the conversation" not in said
    assert "reported an error" not in render_multi_turn([record(replies[:1])], ["text"])
