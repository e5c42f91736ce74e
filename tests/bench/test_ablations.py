"""bench/ablations.py: the feedback ablations end the run at the first reply that goes wrong and
send nothing back for it (scripted replies: no model)."""

from __future__ import annotations

from textagent.agent import Agent
from textagent.backends.scripted import ScriptedBackend
from textagent.bench.ablations import (
    FIRST_FAILURE_OPTIONS,
    NO_FEEDBACK_OPTIONS,
    FirstFailureTextMode,
    NoFeedbackTextMode,
)
from textagent.toolkits import demo

GOOD = 'TOOL: calculate ARGS: {"expression": "6*7"}'
UNKNOWN = 'TOOL: teleport ARGS: {"to": "Mars"}'


def _agent(mode, options, replies):
    backend = ScriptedBackend(replies)
    return Agent(backend, demo.demo_tools(), mode=mode, **options), backend


def test_the_first_failure_ablation_ends_at_a_failed_call_with_the_results_of_the_calls_that_ran():
    agent, _ = _agent(FirstFailureTextMode(), FIRST_FAILURE_OPTIONS, [f"{GOOD}\n{UNKNOWN}", "ANSWER: 42"])
    result = agent.run("What is 6 times 7?")
    assert result.stop_reason == "call_errors" and len(result.steps) == 1
    assert result.steps[0].observations == ["OBSERVATION (calculate): 42"]
    assert "teleport" not in result.transcript.split("OBSERVATION (calculate): 42", 1)[1]  # no word of the failure


def test_a_reply_with_only_a_failed_call_is_answered_with_nothing_and_the_next_question_follows():
    agent, backend = _agent(FirstFailureTextMode(), FIRST_FAILURE_OPTIONS, [UNKNOWN, GOOD, "ANSWER: 42"])
    assert agent.run("Go to Mars.").stop_reason == "call_errors"
    second = agent.run("What is 6 times 7?")
    assert second.stop_reason == "answer" and second.answer == "42"
    between = backend.prompts[1].split('"Mars"}', 1)[1]
    assert "OBSERVATION" not in between and "unknown tool" not in between.lower()


def test_the_first_failure_ablation_runs_on_while_calls_run_and_ends_at_a_reply_that_does_not_parse():
    agent, _ = _agent(FirstFailureTextMode(), FIRST_FAILURE_OPTIONS, [GOOD, GOOD, "ANSWER: 42"])
    assert agent.run("q").stop_reason == "answer"
    agent, backend = _agent(FirstFailureTextMode(), FIRST_FAILURE_OPTIONS, ["TOOL: ARGS: {}", "ANSWER: x"])
    result = agent.run("q")
    assert result.stop_reason == "format_errors" and len(backend.prompts) == 1


def test_the_no_feedback_ablation_answers_a_failed_call_as_text_mode_does():
    agent, backend = _agent(NoFeedbackTextMode(), NO_FEEDBACK_OPTIONS, [UNKNOWN, "ANSWER: no"])
    result = agent.run("Go to Mars.")
    assert result.stop_reason == "answer" and "unknown tool" in backend.prompts[1].lower()
