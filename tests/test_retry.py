"""What the loop does after a failed reply (textagent.retry): a repeated mistake never gets the same
words twice, a retry can be held to the grammar or sampled once, feedback never becomes the
answer; and none of it happens unless asked for."""

from __future__ import annotations

import json

import pytest
from streamkit import StreamingScripted

from textagent import Agent
from textagent.backends.base import Capabilities, Completion, Usage
from textagent.backends.scripted import ScriptedBackend
from textagent.retry import Retry, reported_error
from textagent.toolkits import demo

UNKNOWN = 'TOOL: ResearchDocs ARGS: {"query": "weather"}'
BAD_ARGS = 'TOOL: get_weather ARGS: {"town": "Paris"}'
UNREADABLE = 'TOOL: get_weather ARGS: {"city": "Paris", "city": "Paris"}'


def ask(replies, retry=None, task="What's the weather in Paris?", **kw):
    backend = ScriptedBackend(replies, **kw)
    agent = Agent(backend, demo.demo_tools(), retry=retry, max_format_errors=5)
    return agent.run(task), backend


def told(backend: ScriptedBackend, i: int) -> str:
    """What the model was told after reply ``i`` (0-based): the prompt's growth past that reply."""
    before, after = backend.prompts[i], backend.prompts[i + 1]
    return after[len(before) :]


@pytest.mark.parametrize("reply", [UNKNOWN, BAD_ARGS, UNREADABLE])
def test_without_retry_the_same_mistake_gets_the_same_words(reply):
    result, backend = ask([reply, reply, reply, "ANSWER: sunny"])
    assert result.answer == "sunny"
    assert told(backend, 0).replace(reply, "") == told(backend, 1).replace(reply, "")
    assert all("temperature" not in c and "grammar" not in c for c in backend.calls)


def test_a_repeated_unknown_tool_is_shown_the_listed_tools_closest_to_it_and_the_question():
    result, backend = ask([UNKNOWN, UNKNOWN, "ANSWER: sunny"], Retry(vary=True))
    first, second = told(backend, 0), told(backend, 1)
    assert first != second and "closest to it and to the question" in second
    listed = second.split("question:", 1)[1].split("Call one of these", 1)[0]
    assert listed.strip().splitlines()[0].startswith("- get_weather(")  # the question asks for weather
    assert result.steps[1].details["retry"]["varied"] is True
    assert "repeats_failed" not in result.steps[0].details.get("retry", {})


def test_repeated_bad_arguments_are_shown_the_parameters_with_the_wrong_one_marked():
    _, backend = ask([BAD_ARGS, BAD_ARGS, "ANSWER: sunny"], Retry(vary=True))
    second = told(backend, 1)
    assert "- city: string   <- missing, and required" in second
    assert "- town   <- not a parameter of this tool" in second
    assert "<-" not in told(backend, 0)  # the first time: the usual feedback


def test_a_repeated_unreadable_reply_is_shown_the_corrected_line():
    _, backend = ask([UNREADABLE, UNREADABLE, "ANSWER: sunny"], Retry(vary=True))
    assert "cannot be read" not in told(backend, 0)
    assert 'TOOL: get_weather ARGS: {"city": "Paris"}' in told(backend, 1).split("the call would be:")[1]


def test_a_different_failed_reply_is_not_a_repeat():
    _, backend = ask([UNKNOWN, BAD_ARGS, "ANSWER: sunny"], Retry(vary=True, temperature=0.7))
    assert "before" not in told(backend, 1)
    assert all("temperature" not in c for c in backend.calls)


def test_the_grammar_is_sent_once_and_only_after_a_failure():
    result, backend = ask([UNKNOWN, 'TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"], Retry(grammar=True))
    held = ["grammar" in c for c in backend.calls]
    assert held == [False, True, False]
    assert "get_weather" in backend.calls[1]["grammar"] and "ResearchDocs" not in backend.calls[1]["grammar"]
    assert result.steps[0].details["retry"] == {"grammar_next": True} and result.steps[1].details["retry"] == {
        "grammar": True
    }


@pytest.mark.parametrize("failed", [UNREADABLE, BAD_ARGS])
def test_a_reply_the_grammar_rules_out_is_retried_under_it(failed):
    _, backend = ask([failed, "ANSWER: sunny"], Retry(grammar=True))
    assert "grammar" in backend.calls[1]


def test_a_tools_own_error_is_not_retried_under_the_grammar():
    _, backend = ask(['TOOL: get_weather ARGS: {"city": "Atlantis"}', "ANSWER: sunny"], Retry(grammar=True))
    assert "grammar" not in backend.calls[1]


def test_no_grammar_retry_on_a_backend_that_takes_none():
    _, backend = ask([UNKNOWN, "ANSWER: sunny"], Retry(grammar=True), capabilities=Capabilities(grammar=False))
    assert all("grammar" not in c for c in backend.calls)


def test_a_word_for_word_repeat_samples_the_next_reply_once_seeded():
    _, backend = ask([UNKNOWN, UNKNOWN, UNKNOWN, "ANSWER: sunny"], Retry(temperature=0.7, seed=5))
    temperatures = [(c.get("temperature"), c.get("seed")) for c in backend.calls]
    # reply 2 repeats reply 1: reply 3 is sampled (seed 5 + step 2); reply 3 repeats too: reply 4
    assert temperatures == [(None, None), (None, None), (0.7, 7), (0.7, 8)]


def test_the_sampled_retry_leaves_the_agents_own_options_as_they_were():
    backend = ScriptedBackend([UNKNOWN, UNKNOWN, "ANSWER: a", "ANSWER: b"])
    agent = Agent(backend, demo.demo_tools(), retry=Retry(temperature=0.5), temperature=0.0, seed=1)
    agent.run("What's the weather in Paris?")
    agent.run("And in Rome?")
    assert [c["temperature"] for c in backend.calls] == [0.0, 0.0, 0.5, 0.0]
    assert agent.backend_options == {"temperature": 0.0, "seed": 1}


def test_an_answer_quoting_the_feedback_is_sent_back_once():
    quoting = "ANSWER: The call failed. Call the tool again (with corrected arguments if they were wrong)."
    result, backend = ask([UNKNOWN, quoting, "ANSWER: sunny"], Retry(vary=True))
    assert result.answer == "sunny" and result.steps[1].sent_back is not None
    assert "repeats this feedback" in told(backend, 1)
    # the same answer again is taken: the loop does not argue for ever
    result, _ = ask([UNKNOWN, quoting, quoting], Retry(vary=True))
    assert result.answer is not None and result.answer.startswith("The call failed")


def test_an_answer_quoting_feedback_is_taken_as_it_is_without_retry():
    quoting = "ANSWER: The call failed. Call the tool again (with corrected arguments if they were wrong)."
    result, _ = ask([UNKNOWN, quoting])
    assert result.answer is not None and result.steps[1].sent_back is None


def test_retry_is_checked():
    with pytest.raises(ValueError, match="temperature"):
        Retry(temperature=0)
    with pytest.raises(TypeError, match="Retry"):
        Agent(ScriptedBackend([]), demo.demo_tools(), retry={"vary": True})


def test_the_gate_asks_once_when_an_answer_comes_before_any_call_and_a_tool_is_close():
    result, backend = ask(["ANSWER: sunny, I think", "ANSWER: sunny, I think"], Retry(gate=True))
    assert result.answer == "sunny, I think" and len(backend.prompts) == 2
    asked = told(backend, 0)
    assert "without calling a tool" in asked and "- get_weather(city: string)" in asked
    assert result.steps[0].sent_back is not None and result.steps[0].details["retry"]["gated"] is True


def test_the_gate_lets_an_answer_through_after_a_call_or_where_no_tool_is_close():
    result, backend = ask(['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"], Retry(gate=True))
    assert result.answer == "sunny" and len(backend.prompts) == 2
    result, backend = ask(["ANSWER: Shakespeare"], Retry(gate=True), task="Who wrote Hamlet?")
    assert result.answer == "Shakespeare" and len(backend.prompts) == 1


def test_the_gates_second_ask_is_held_to_the_grammar_and_sampled_when_asked_for():
    _, backend = ask(["ANSWER: sunny", "ANSWER: sunny"], Retry(gate=True, grammar=True, temperature=0.4, seed=1))
    assert "grammar" not in backend.calls[0] and "grammar" in backend.calls[1]
    assert backend.calls[1]["temperature"] == 0.4 and backend.calls[1]["seed"] == 2


def test_calls_repeated_with_the_same_results_are_told_so_and_sampled_once_word_for_word():
    call = 'TOOL: get_weather ARGS: {"city": "Paris"}'
    result, backend = ask([call, call, call, "ANSWER: sunny"], Retry(vary=True, temperature=0.6, seed=0))
    assert "returned the same results" not in told(backend, 0)
    assert "returned the same results" in told(backend, 1) and "returned the same results" in told(backend, 2)
    assert [c.get("temperature") for c in backend.calls] == [None, None, 0.6, 0.6]
    assert result.steps[1].details["retry"]["repeats_results"] is True


def test_calls_repeated_with_other_results_are_no_repeat():
    def weather(city: str) -> str:
        """Weather for a city, a new reading each time.

        Args:
            city: the city
        """
        weather.n += 1
        return f"reading {weather.n}"

    weather.n = 0
    call = 'TOOL: weather ARGS: {"city": "Paris"}'
    backend = ScriptedBackend([call, call, "ANSWER: sunny"])
    Agent(backend, [weather], retry=Retry(vary=True, temperature=0.6)).run("Weather in Paris?")
    assert "returned the same results" not in backend.prompts[2]
    assert all("temperature" not in c for c in backend.calls)


@pytest.mark.parametrize("reply", [UNKNOWN, BAD_ARGS, UNREADABLE])
def test_a_repeated_failure_is_rewound_not_written_and_asked_again_sampled(reply):
    result, backend = ask([reply, reply, "ANSWER: sunny"], Retry(rewind=True, seed=3))
    assert result.answer == "sunny"
    # the repeat (reply 2) never reaches the conversation: reply 3 is asked from where reply 2 was
    assert backend.prompts[2] == backend.prompts[1] and backend.prompts[1] != backend.prompts[0]
    assert [(c.get("temperature"), c.get("seed")) for c in backend.calls] == [(None, None), (None, None), (0.7, 5)]
    rewound = result.steps[1]
    assert rewound.details["retry"]["rewound"] is True and rewound.observations == []
    assert "rewound" not in result.steps[0].details.get("retry", {})


def test_calls_returning_what_they_returned_before_are_rewound():
    call = 'TOOL: get_weather ARGS: {"city": "Paris"}'
    result, backend = ask([call, call, call, "ANSWER: sunny"], Retry(rewind=True, rewind_temperature=0.4))
    assert backend.prompts[1] == backend.prompts[2] == backend.prompts[3]
    assert result.transcript.count(call) == backend.prompts[1].count(call)  # the call and its result once
    assert [c.get("temperature") for c in backend.calls] == [None, None, 0.4, 0.4]
    assert [bool(s.details.get("retry", {}).get("rewound")) for s in result.steps] == [False, True, True, False]


def test_rewound_replies_are_steps_the_limits_count():
    backend = ScriptedBackend([UNKNOWN] * 4)
    result = Agent(backend, demo.demo_tools(), retry=Retry(rewind=True), max_steps=4, max_format_errors=9).run(
        "What's the weather in Paris?"
    )
    assert result.stop_reason == "max_steps" and len(result.steps) == 4
    assert len(set(backend.prompts[1:])) == 1  # each repeat asked again from the same place
    assert [c.get("seed") for c in backend.calls] == [None, None, 2, 3]  # a new seed each time


def test_rewind_takes_the_place_of_varied_words_for_a_repeat():
    result, backend = ask([UNKNOWN, UNKNOWN, "ANSWER: sunny"], Retry(vary=True, rewind=True))
    assert "varied" not in result.steps[1].details["retry"] and backend.prompts[2] == backend.prompts[1]


def test_rewind_is_a_part_by_name():
    assert Retry.from_parts("rewind") == Retry(rewind=True)
    assert Retry.from_parts("rewind").rewind_temperature == 0.7
    assert Retry.from_parts("rewind", temperature=0.5) == Retry(rewind=True, rewind_temperature=0.5)
    assert Retry(rewind=True).active
    with pytest.raises(ValueError, match="rewind_temperature"):
        Retry(rewind=True, rewind_temperature=0)


def test_abstain_holds_the_gates_re_ask_to_the_abstention_grammar_once():
    meant = "Thought: the closest listed tool is get_weather; it does not fit because it is a guess.\nANSWER: sunny"
    result, backend = ask(["ANSWER: sunny", meant], Retry(gate=True, abstain=True))
    assert result.answer == "sunny" and len(backend.calls) == 2
    assert "grammar" not in backend.calls[0]
    grammar = backend.calls[1]["grammar"]
    assert "abstention ::=" in grammar and '"get_weather"' in grammar
    assert result.steps[0].details["retry"]["grammar_next"] is True
    # the answer after it is taken, its abstention line kept as the reply's thought
    assert "closest listed tool is get_weather" in result.steps[1].reply.thought


def test_abstain_is_the_gates_part_and_needs_a_grammar_backend():
    assert Retry.from_parts("abstain") == Retry(gate=True, abstain=True, rewind_temperature=0.7)
    with pytest.raises(ValueError, match="gate=True"):
        Retry(abstain=True)
    # no grammar on this server: the gate alone asks again, in words
    _, backend = ask(
        ["ANSWER: sunny", "ANSWER: sunny"], Retry(gate=True, abstain=True), capabilities=Capabilities(grammar=False)
    )
    assert len(backend.calls) == 2 and all("grammar" not in c for c in backend.calls)
    # no gate question (a call came first): no abstention grammar
    _, backend = ask(['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"], Retry(gate=True, abstain=True))
    assert all("grammar" not in c for c in backend.calls)


def test_abstain_and_grammar_each_send_their_own_grammar():
    _, backend = ask([UNREADABLE, "ANSWER: sunny", "ANSWER: sunny"], Retry(gate=True, grammar=True, abstain=True))
    # after the unreadable reply: the tool set's grammar; after the gate's question: the abstention's
    assert "abstention ::=" not in backend.calls[1]["grammar"]
    assert "abstention ::=" in backend.calls[2]["grammar"]


def test_a_retry_grammar_is_built_only_when_a_retry_needs_it_and_once_a_question(monkeypatch):
    import textagent.agent as agent_module

    built = []
    real = agent_module.reply_grammar
    monkeypatch.setattr(agent_module, "reply_grammar", lambda *a, **kw: built.append(kw) or real(*a, **kw))
    ask(['TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"], Retry(grammar=True, gate=True, abstain=True))
    assert built == []  # nothing failed, nothing gated: no grammar made
    _, backend = ask([UNKNOWN, UNKNOWN, UNKNOWN, "ANSWER: sunny"], Retry(grammar=True))
    assert len(built) == 1 and sum("grammar" in c for c in backend.calls) == 3  # three retries, one grammar
    built.clear()
    _, backend = ask(["ANSWER: sunny", "ANSWER: sunny"], Retry(grammar=True, gate=True, abstain=True))
    # the gate's re-ask is held to the abstention grammar alone: the plain one is not made for it
    assert [bool(kw.get("abstain")) for kw in built] == [True] and "grammar" in backend.calls[1]


def test_a_conversation_builds_a_retry_grammar_once_for_its_tool_set_and_anew_when_tools_are_added(monkeypatch):
    import textagent.agent as agent_module
    from textagent.tools import tool

    built = []
    real = agent_module.reply_grammar
    monkeypatch.setattr(agent_module, "reply_grammar", lambda *a, **kw: built.append(a[0]) or real(*a, **kw))

    @tool
    def get_forecast(city: str, days: int) -> str:
        """The forecast for a city."""
        return "rain"

    backend = ScriptedBackend([UNKNOWN, "ANSWER: a", UNKNOWN, "ANSWER: b", UNKNOWN, "ANSWER: c"])
    agent = Agent(backend, demo.demo_tools(), retry=Retry(grammar=True))
    agent.run("q1")
    agent.run("q2")
    assert len(built) == 1 and backend.calls[1]["grammar"] == backend.calls[3]["grammar"]
    agent.add_tools(get_forecast)
    agent.run("q3")
    assert len(built) == 2 and "get_forecast" in backend.calls[5]["grammar"]


@pytest.mark.parametrize("retry", [Retry(grammar=True), Retry(gate=True, abstain=True)])
def test_a_reply_held_to_a_retry_grammar_writes_no_more_calls_than_the_loop_runs(retry):
    from gbnfkit import Grammar

    first = UNKNOWN if retry.grammar else "ANSWER: sunny"
    backend = ScriptedBackend([first, "ANSWER: sunny", "ANSWER: sunny"])
    Agent(backend, demo.demo_tools(), retry=retry, max_calls_per_reply=2).run("What's the weather in Paris?")
    held = Grammar.parse(backend.calls[1]["grammar"])
    call = 'TOOL: get_weather ARGS: {"city": "Paris"}'
    assert held.matches("\n".join([call] * 2)) and not held.matches("\n".join([call] * 3))


ODDS_BACKEND = Capabilities(grammar=True, token_probs=True)
CALL = 'TOOL: get_weather ARGS: {"city": "Paris"}'


def first(*tokens: tuple[str, float]) -> Completion:
    """The answer to the odds' question: one token, with the likeliest first tokens."""
    return Completion(text=tokens[0][0], finish_reason="length", top_tokens=tokens)


def test_odds_begin_the_first_reply_with_a_call_where_the_model_nearly_wrote_one():
    probe = first(("ANSWER", 0.6), ("TO", 0.2), ("TOOL", 0.1), ("The", 0.05))
    replies = [probe, ' get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"]
    result, backend = ask(replies, Retry(odds=0.25), capabilities=ODDS_BACKEND)
    assert result.answer == "sunny" and len(backend.calls) == 3
    asked, reply = backend.calls[0], backend.calls[1]
    assert asked["max_tokens"] == 1 and asked["token_probs"] == 10 and asked["stream"] is False
    assert "lead" not in asked and "lead" not in reply  # the lead is the mode's, never the server's
    assert backend.prompts[1] == backend.prompts[0] + "TOOL:"
    step = result.steps[0]
    assert step.raw == CALL and step.calls[0].name == "get_weather" and step.outcomes[0].ok
    assert step.details["retry"] == {"call_odds": 0.3, "lead": "TOOL:"}
    # the reply enters the conversation once, as the model's own
    assert backend.prompts[2].count("TOOL: get_weather") == backend.prompts[0].count("TOOL: get_weather") + 1


@pytest.mark.parametrize(
    "tokens",
    [
        (("ANSWER", 0.8), ("TOOL", 0.15)),  # below the threshold
        (("TOOL", 0.55), ("ANSWER", 0.4)),  # the model calls anyway: nothing to begin
        (("ANSWER", 1.0),),  # no call in sight: odds 0, recorded as such
    ],
)
def test_odds_leave_the_reply_to_the_model_below_the_threshold_and_record_them(tokens):
    result, backend = ask([first(*tokens), "ANSWER: sunny"], Retry(odds=0.25), capabilities=ODDS_BACKEND)
    assert result.answer == "sunny" and backend.prompts[1] == backend.prompts[0]
    expected = round(sum(p for t, p in tokens if t.startswith("TO")), 4)
    assert result.steps[0].details["retry"] == {"call_odds": expected}


def test_odds_ask_before_the_first_reply_of_each_question_only():
    backend = ScriptedBackend(
        [
            first(("ANSWER", 0.9), ("TOOL", 0.1)),
            CALL,
            "ANSWER: sunny",
            first(
                ("ANSWER", 1.0),
            ),
            "ANSWER: yes",
        ],
        capabilities=ODDS_BACKEND,
    )
    agent = Agent(backend, demo.demo_tools(), retry=Retry(odds=0.5))
    agent.run("What's the weather in Paris?")
    agent.run("And is it warm?")
    asked = [c for c in backend.calls if c.get("token_probs")]
    assert len(asked) == 2 and len(backend.calls) == 5


def test_odds_are_not_asked_where_they_cannot_be_had():
    # a backend without token_probs, or a mode whose replies a grammar holds
    _, backend = ask(["ANSWER: sunny"], Retry(odds=0.1))
    assert len(backend.calls) == 1 and "token_probs" not in backend.calls[0]
    backend = ScriptedBackend(["ANSWER: sunny"], capabilities=ODDS_BACKEND)
    Agent(backend, demo.demo_tools(), mode="constrained", retry=Retry(odds=0.1)).run("What's the weather in Paris?")
    assert len(backend.calls) == 1 and "token_probs" not in backend.calls[0]
    # a backend that has the capability but reports no alternatives: the reply is asked as it is
    _, backend = ask([Completion("A"), "ANSWER: sunny"], Retry(odds=0.1), capabilities=ODDS_BACKEND)
    assert len(backend.calls) == 2 and backend.prompts[1] == backend.prompts[0]


def test_odds_count_the_question_of_the_first_token_in_the_usage():
    probe = Completion("ANSWER", top_tokens=(("ANSWER", 1.0),), usage=Usage(prompt_tokens=100, completion_tokens=1))
    result, _ = ask([probe, "ANSWER: sunny"], Retry(odds=0.1), capabilities=ODDS_BACKEND)
    assert result.usage.prompt_tokens is not None and result.usage.prompt_tokens > 100


def test_a_stream_shows_a_reply_the_odds_began_from_its_lead():
    shown: list[str] = []

    backend = StreamingScripted(
        [first(("ANSWER", 0.6), ("TOOL", 0.4)), ' get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"],
        capabilities=ODDS_BACKEND,
    )
    agent = Agent(backend, demo.demo_tools(), retry=Retry(odds=0.3), stream=True, on_text=shown.append)
    assert agent.run("What's the weather in Paris?").answer == "sunny"
    assert shown[0] == CALL


def test_odds_is_a_part_with_a_threshold():
    assert Retry.from_parts("odds") == Retry(odds=0.1)
    assert Retry.from_parts("odds,vary", odds=0.4) == Retry(vary=True, odds=0.4)
    assert Retry(odds=1).active and not Retry().active
    for bad in (0, -0.1, 1.5, True, float("nan")):
        with pytest.raises(ValueError, match="odds"):
            Retry(odds=bad)


NEARLY = first(("ANSWER", 0.6), ("TOOL", 0.4))  # the odds begin the reply (threshold 0.3)
AFTER_LEAD = ' get_weather ARGS: {"city": "Paris"}'


def judged(yes: float) -> Completion:
    """The model's first token on the check, with its yes-or-no (and a token that is neither)."""
    return Completion(
        "Yes" if yes >= 0.5 else "No", top_tokens=(("Yes", yes * 0.9), ("No", (1 - yes) * 0.9), ("I", 0.1))
    )


def test_verify_begins_the_reply_only_where_the_model_stands_by_the_call_it_would_bring():
    replies = [NEARLY, AFTER_LEAD, judged(0.9), AFTER_LEAD, "ANSWER: sunny"]
    result, backend = ask(replies, Retry(odds=0.3, verify=0.8), capabilities=ODDS_BACKEND)
    assert result.answer == "sunny" and len(backend.calls) == 5
    sketch, check, reply = backend.calls[1:4]
    # the call the lead would bring is asked first, whole and not streamed, and not written
    assert backend.prompts[1] == backend.prompts[0] + "TOOL:" and sketch["stream"] is False
    assert backend.prompts[3] == backend.prompts[1] and reply.get("token_probs") is None
    # the check is a question of its own, outside the conversation, naming the question and the call
    asked = backend.prompts[2]
    assert asked.startswith("<|im_start|>system\nYou check an assistant's work.<|im_end|>")
    assert "What's the weather in Paris?" in asked and 'get_weather({"city": "Paris"})' in asked
    assert backend.prompts[0][:200] not in asked and check["max_tokens"] == 1 and check["token_probs"] == 20
    assert result.steps[0].raw == CALL and result.steps[0].details["retry"] == {
        "call_odds": 0.4,
        "lead": "TOOL:",
        "verify_odds": 0.9,
    }


@pytest.mark.parametrize(
    ("sketched", "check", "odds"),
    [
        (AFTER_LEAD, judged(0.7), 0.7),  # below the threshold
        (AFTER_LEAD, Completion("I", top_tokens=(("I", 1.0),)), None),  # neither word: no
        (' get_weather ARGS: {"city": ', None, None),  # no readable call
        (" ARGS: {}", None, None),
    ],
)
def test_verify_leaves_the_reply_to_the_model_where_it_does_not_stand_by_the_call(sketched, check, odds):
    replies = [NEARLY, sketched, *([check] if check else []), "ANSWER: sunny"]
    result, backend = ask(replies, Retry(odds=0.3, verify=0.8), capabilities=ODDS_BACKEND)
    assert result.answer == "sunny" and backend.prompts[-1] == backend.prompts[0]
    facts = result.steps[0].details["retry"]
    assert "lead" not in facts and facts.get("verify_odds") == odds


def test_verify_asks_nothing_where_the_odds_begin_nothing():
    _, backend = ask(
        [first(("ANSWER", 0.9), ("TOOL", 0.1)), "ANSWER: sunny"], Retry(odds=0.3, verify=0.8), capabilities=ODDS_BACKEND
    )
    assert len(backend.calls) == 2


def test_verify_is_a_part_with_a_threshold_beside_odds():
    assert Retry.from_parts("odds,verify") == Retry(odds=0.1, verify=0.8)
    assert Retry.from_parts("odds,verify", odds=0.05, verify=0.7) == Retry(odds=0.05, verify=0.7)
    with pytest.raises(ValueError, match="needs odds"):
        Retry.from_parts("verify")
    for bad in (0, 1.5, True, float("nan")):
        with pytest.raises(ValueError, match="verify"):
            Retry(odds=0.1, verify=bad)


def _finder(found: dict[str, str]):
    def find(path: str) -> dict:
        """Find a file by name.

        Args:
            path: the file's name
        """
        if path in found:
            return {"path": found[path]}
        return {"error": f"find: '{path}': No such file or directory"}

    return find


FIND_BAD = 'TOOL: find ARGS: {"path": "config.py"}'
FIND_GOOD = 'TOOL: find ARGS: {"path": "src/config.py"}'


def ask_finder(replies, retry=None):
    backend = ScriptedBackend(replies)
    agent = Agent(backend, [_finder({"src/config.py": "/work/src/config.py"})], retry=retry)
    return agent.run("Find config.py"), backend


def test_an_answer_right_after_a_reported_error_is_sent_back_once_naming_it():
    replies = [FIND_BAD, "ANSWER: not found", FIND_GOOD, "ANSWER: /work/src/config.py"]
    result, backend = ask_finder(replies, Retry(errors=True))
    assert result.answer == "/work/src/config.py" and len(backend.prompts) == 4
    asked = told(backend, 1)
    assert "result reports an error" in asked and "- find: find: 'config.py': No such file or directory" in asked
    assert result.steps[1].sent_back is not None and result.steps[1].details["retry"]["after_error"] is True
    # once a question: the second answer after an error is taken
    result, backend = ask_finder([FIND_BAD, "ANSWER: not found", FIND_BAD, "ANSWER: not found"], Retry(errors=True))
    assert result.answer == "not found" and len(backend.prompts) == 4


def test_an_answer_is_taken_after_results_that_report_no_error_or_without_the_part():
    result, backend = ask_finder([FIND_BAD, "ANSWER: not found"])
    assert result.answer == "not found" and len(backend.prompts) == 2
    result, backend = ask_finder([FIND_BAD, FIND_GOOD, "ANSWER: found"], Retry(errors=True))
    assert result.answer == "found" and len(backend.prompts) == 3  # the last calls' results are what count
    result, backend = ask_finder(["ANSWER: no idea"], Retry(errors=True))
    assert result.answer == "no idea" and len(backend.prompts) == 1


def test_the_re_ask_after_a_reported_error_is_held_to_the_grammar_and_sampled_when_asked_for():
    retry = Retry(errors=True, grammar=True, temperature=0.5, seed=2)
    _, backend = ask_finder([FIND_BAD, "ANSWER: not found", FIND_GOOD, "ANSWER: found"], retry)
    assert ["grammar" in c for c in backend.calls] == [False, False, True, False]
    assert [c.get("temperature") for c in backend.calls] == [None, None, 0.5, None]


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ('{"error": "No such file"}', "No such file"),
        ('{"booking_status": false, "error": "Card not registered"}', "Card not registered"),
        ('{"error": {"code": 404, "message": "gone"}}', '{"code": 404, "message": "gone"}'),
        ('  {"error": "two\\n  lines"}', "two lines"),
        ('{"error": null}', None),
        ('{"error": ""}', None),
        ('{"error": false, "ok": true}', None),
        ('{"errors": "x"}', None),
        ('["error"]', None),
        ('{"error": "cut short', None),  # cut to the observation limit
        ('the "error" was mine', None),
        ("sunny", None),
    ],
)
def test_a_result_reports_an_error_when_it_is_an_object_with_one(output, error):
    assert reported_error(output) == error


def test_a_reported_error_is_cut_in_the_re_ask():
    assert len(reported_error(json.dumps({"error": "x" * 5000})) or "") == 300


def test_errors_is_a_part_by_name():
    assert Retry.from_parts("errors") == Retry(errors=True)
    assert Retry.from_parts("grammar,rewind,errors") == Retry(grammar=True, rewind=True, errors=True)
    assert Retry(errors=True).active


CLAIM = 'ANSWER: get_weather ran with city "Paris" and reported sunny.'
LED = "TOOL: get_weather ARGS:"


def test_an_answer_claiming_a_call_that_never_ran_is_kept_out_and_the_next_reply_begun_with_that_call():
    result, backend = ask([CLAIM, ' {"city": "Paris"}', "ANSWER: sunny"], Retry(claims=True))
    assert result.answer == "sunny" and len(backend.calls) == 3
    # the claim is not written: the next reply is asked from where it was, begun with the call
    assert backend.prompts[1] == backend.prompts[0] + LED
    assert "lead" not in backend.calls[1] and "reported sunny" not in backend.prompts[2]
    claim, call = result.steps[:2]
    assert claim.details["retry"] == {"rewound": True, "claimed": "get_weather"}
    assert call.raw == LED + ' {"city": "Paris"}' and call.outcomes[0].ok
    assert call.details["retry"] == {"lead": LED}
    # the reply enters the conversation once, as the model's own
    assert backend.prompts[2].count(LED) == backend.prompts[0].count(LED) + 1


@pytest.mark.parametrize(
    ("replies", "retry", "kw"),
    [
        ([CLAIM], Retry(), {}),  # without the part
        ([CALL, CLAIM], Retry(claims=True), {}),  # the tool ran in the question
        (['ANSWER: get_stock_price ran with symbol "X" and reported 3.'], Retry(claims=True), {}),  # no listed tool
        ([CLAIM], Retry(claims=True), {"max_steps": 1}),  # no reply may follow: the answer is not lost
    ],
)
def test_a_claim_is_taken_as_the_answer_where_the_loop_may_not_act_on_it(replies, retry, kw):
    backend = ScriptedBackend(replies)
    result = Agent(backend, demo.demo_tools(), retry=retry, **kw).run("What's the weather in Paris?")
    assert result.stop_reason == "answer" and result.answer == replies[-1][len("ANSWER: ") :]
    assert len(backend.calls) == len(replies) and "claimed" not in (result.steps[-1].details.get("retry") or {})


def test_a_claim_is_kept_out_once_a_question_and_a_tool_run_in_an_earlier_question_is_no_claim():
    also = 'ANSWER: get_time ran with timezone "CET" and reported 10:00.'
    result, backend = ask([CLAIM, ' {"city": "Paris"}', also], Retry(claims=True))
    assert result.answer == also[len("ANSWER: ") :] and len(backend.calls) == 3
    backend = ScriptedBackend([CALL, "ANSWER: sunny", CLAIM])
    agent = Agent(backend, demo.demo_tools(), retry=Retry(claims=True))
    agent.run("What's the weather in Paris?")
    assert agent.run("Say again what you found.").answer == CLAIM[len("ANSWER: ") :]
    # forgotten with the conversation, kept with a checkpoint
    saved = agent.checkpoint()
    agent.reset()
    backend.replies.extend([CLAIM, ' {"city": "Paris"}', "ANSWER: sunny"])
    assert agent.run("What's the weather in Paris?").steps[0].details["retry"]["claimed"] == "get_weather"
    agent.restore(saved)
    backend.replies.append(CLAIM)
    assert agent.run("And again?").answer == CLAIM[len("ANSWER: ") :]


def test_with_verify_a_claim_is_begun_only_where_the_model_stands_by_the_call_else_asked_again_sampled():
    sketched, none = ' {"city": "Paris"}', first(("ANSWER", 1.0))  # the odds begin nothing
    retry = Retry(odds=1.0, verify=0.8, claims=True)
    result, backend = ask(
        [none, CLAIM, sketched, judged(0.9), sketched, "ANSWER: sunny"], retry, capabilities=ODDS_BACKEND
    )
    assert result.answer == "sunny" and backend.prompts[2] == backend.prompts[0] + LED  # the sketch
    assert 'get_weather({"city": "Paris"})' in backend.prompts[3]  # the check
    assert backend.prompts[4] == backend.prompts[0] + LED and result.steps[0].details["retry"]["verify_odds"] == 0.9
    result, backend = ask([none, CLAIM, sketched, judged(0.3), "ANSWER: sunny"], retry, capabilities=ODDS_BACKEND)
    assert result.answer == "sunny" and backend.prompts[4] == backend.prompts[0]
    assert backend.calls[4]["temperature"] == 0.7 and backend.calls[4]["seed"] == 1
    assert result.steps[0].details["retry"] == {
        "call_odds": 0.0,
        "rewound": True,
        "claimed": "get_weather",
        "verify_odds": 0.3,
        "sampled_next": 0.7,
    }


def test_claims_is_a_part_by_name():
    assert Retry.from_parts("claims") == Retry(claims=True)
    assert Retry(claims=True).active


@pytest.mark.parametrize("begun", [' {"city": ', ' {"town": "Paris"}'])  # does not parse; the schema refuses it
def test_a_begun_claimed_call_that_cannot_be_used_is_kept_out_too_and_the_claim_taken_after_all(begun):
    backend = ScriptedBackend([CLAIM, begun])
    agent = Agent(backend, demo.demo_tools(), retry=Retry(claims=True))
    result = agent.run("What's the weather in Paris?")
    assert result.stop_reason == "answer" and result.answer == CLAIM[len("ANSWER: ") :] and len(backend.calls) == 2
    assert [s.rewound for s in result.steps] == [True, True] and not any(o.ok for o in result.steps[1].outcomes)
    # the conversation holds the answer, not the begun reply
    assert agent.conversation.messages[-1]["content"] == CLAIM and LED not in agent.conversation.prompt[-300:]
