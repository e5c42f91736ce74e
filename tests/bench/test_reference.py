"""The suite's reference replies replayed: found by the question, one per step, and a clear error
when the conversation is not the suite's or asks past the last reply."""

from __future__ import annotations

import pytest

from textagent import prompts
from textagent.bench.reference import ReferenceBackend, check_suite
from textagent.bench.tasks import load_tasks
from textagent.errors import BackendError

SUITE = load_tasks()
TASK = next(t for t in SUITE if len(t.reference) >= 2)


def ask(backend, messages):
    return backend.complete("prompt text", stop=[], max_tokens=64, messages=messages)


def test_each_step_gets_the_next_reference_reply():
    backend = ReferenceBackend(SUITE)
    user = {"role": "user", "content": prompts.task(TASK.question)}
    assert ask(backend, [user]).text == TASK.reference[0]
    second = ask(backend, [user, {"role": "assistant", "content": TASK.reference[0]}, {"role": "user", "content": "o"}])
    assert second.text == TASK.reference[1] and second.finish_reason == "stop"


def test_a_conversation_that_is_not_the_suites_is_an_error():
    with pytest.raises(BackendError, match="no task of the suite"):
        ask(ReferenceBackend(SUITE), [{"role": "user", "content": "What is the weather on Mars?"}])


def test_a_step_past_the_last_reference_reply_is_an_error():
    user = {"role": "user", "content": prompts.task(TASK.question)}
    past = [user] + [{"role": "assistant", "content": r} for r in TASK.reference]
    with pytest.raises(BackendError, match=f"has {len(TASK.reference)} reference replies"):
        ask(ReferenceBackend(SUITE), past)


def test_check_suite_solves_every_task_with_a_reference_and_skips_the_rest():
    results = check_suite(SUITE[:6])
    assert [t.id for t, _ in results] == [t.id for t in SUITE[:6]]
    for task, record in results:
        assert (record is None) == (not task.reference)
        assert record is None or record.success, task.id
