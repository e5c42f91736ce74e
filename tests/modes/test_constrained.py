"""Constrained mode: the text protocol under the tool set's GBNF grammar."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from textagent import Agent, ChatAsTextBackend, LlamaCppBackend, OllamaBackend, OpenAICompletionsBackend
from textagent.backends.base import Capabilities
from textagent.backends.scripted import ScriptedBackend
from textagent.cli import main
from textagent.errors import ModeNotSupported
from textagent.gbnf import reply_grammar
from textagent.modes import ConstrainedMode
from textagent.toolkits import demo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gbnfkit import Grammar

CALC = 'TOOL: calculate ARGS: {"expression": "17 * 24"}'


def test_the_grammar_goes_with_every_request_and_observation_is_no_stop_string():
    backend = ScriptedBackend([CALC, "ANSWER: 408"])
    agent = Agent(backend, demo.demo_tools(), mode="constrained", temperature=0.0)
    result = agent.run("17 times 24?")
    assert result.ok and result.answer == "408" and result.mode == "constrained"
    grammar = reply_grammar(demo.demo_tools())
    assert [c["grammar"] for c in backend.calls] == [grammar, grammar]
    assert all("OBSERVATION" not in c["stop"] and "<|im_end|>" in c["stop"] for c in backend.calls)
    assert backend.calls[0]["temperature"] == 0.0
    assert backend.prompts[1].startswith(backend.prompts[0] + CALC)  # append-only, as in text mode


def test_the_same_prompt_as_text_mode():
    text = ScriptedBackend(["ANSWER: x"])
    constrained = ScriptedBackend(["ANSWER: x"])
    Agent(text, demo.demo_tools()).run("q")
    Agent(constrained, demo.demo_tools(), mode="constrained").run("q")
    assert text.prompts == constrained.prompts


def test_configured_mode_object():
    backend = ScriptedBackend(["ANSWER: x"])
    Agent(backend, demo.demo_tools(), mode=ConstrainedMode(max_thoughts=0, max_calls=1)).run("q")
    grammar = Grammar.parse(backend.calls[0]["grammar"])
    assert grammar.matches(CALC) and not grammar.matches(CALC + "\n" + CALC)
    assert not grammar.matches("Thought: x\n" + CALC)


def test_a_reply_cut_short_is_still_fed_back():
    backend = ScriptedBackend(['TOOL: calculate ARGS: {"expression": "17', CALC, "ANSWER: 408"])
    result = Agent(backend, demo.demo_tools(), mode="constrained").run("q")
    assert result.ok and result.format_errors == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda url: OllamaBackend(url, model="m"),
        lambda url: OpenAICompletionsBackend(url),
        lambda url: ChatAsTextBackend(url),
    ],
    ids=["ollama", "completions", "chat"],
)
def test_backends_without_a_grammar_are_refused_when_the_agent_is_built(make):
    with pytest.raises(ModeNotSupported, match="constrained.*grammar"):
        Agent(make("http://127.0.0.1:9"), demo.demo_tools(), mode="constrained")


def test_backends_that_say_they_cannot_are_refused():
    with pytest.raises(ModeNotSupported):
        Agent(ScriptedBackend([], capabilities=Capabilities(grammar=False)), demo.demo_tools(), mode="constrained")


def test_openai_backends_with_a_grammar_field_send_it(fake_server):
    fake_server.json(
        "/v1/completions",
        {
            "choices": [{"text": "ANSWER: ok", "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        },
    )
    backend = OpenAICompletionsBackend(fake_server.url, grammar_field="grammar")
    assert Agent(backend, demo.demo_tools(), mode="constrained").run("q").answer == "ok"
    assert fake_server.bodies("/v1/completions")[0]["grammar"] == reply_grammar(demo.demo_tools())


def test_llamacpp_request_carries_the_grammar(fake_server):
    fake_server.json(
        "/completion",
        {
            "content": CALC,
            "stop_type": "eos",
            "tokens_predicted": 12,
            "tokens_evaluated": 400,
            "timings": {"prompt_n": 400, "predicted_n": 12},
        },
    )
    fake_server.json(
        "/completion",
        {
            "content": "ANSWER: 408",
            "stop_type": "eos",
            "tokens_predicted": 4,
            "tokens_evaluated": 430,
            "timings": {"prompt_n": 30, "predicted_n": 4},
        },
    )
    result = Agent(LlamaCppBackend(fake_server.url), demo.demo_tools(), mode="constrained").run("q")
    assert result.ok and result.usage.completion_tokens == 16 and result.usage.prompt_evaluated == 430
    body = fake_server.bodies("/completion")[0]
    assert body["grammar"] == reply_grammar(demo.demo_tools()) and "OBSERVATION" not in body["stop"]


def test_cli_grammar_prints_the_grammar(capsys):
    assert main(["grammar"]) == 0
    assert capsys.readouterr().out == reply_grammar(demo.demo_tools())
    assert main(["grammar", "--tools", "calculate,get_time", "--max-calls", "1", "--max-thoughts", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("root ::= (calls | answer)\ncalls ::= call calls-end?\n") and "multiply" not in out
    Grammar.parse(out)


def test_cli_refuses_constrained_mode_on_ollama(capsys):
    code = main(
        ["run", "--endpoint", "http://127.0.0.1:9", "--api", "ollama", "--model", "m", "--mode", "constrained", "q"]
    )
    assert code == 1 and "needs a backend that sends a GBNF grammar" in capsys.readouterr().err
