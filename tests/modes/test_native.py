"""Native mode: the server's function calling, recorded honestly, with the agent's limits."""

from __future__ import annotations

import json

import pytest

from textagent import STOP_REASONS, Agent, LlamaCppBackend, OllamaBackend
from textagent.backends.base import Capabilities, Completion, Usage
from textagent.cli import main
from textagent.errors import BackendConnectionError, ModeNotSupported
from textagent.modes.native import content_calls
from textagent.steps import Note
from textagent.toolkits import demo
from textagent.tools import tool as tool_fn
from textagent.trace import load_trace


def call(name, arguments, id=None):
    tc = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        tc["id"] = id
    return tc


def msg(content="", tool_calls=None):
    m = {"role": "assistant", "content": content}
    if tool_calls is not None:
        m["tool_calls"] = tool_calls
    return m


class FakeChat:
    """chat() returns the scripted assistant messages in order and records every request."""

    capabilities = Capabilities(chat=True)

    def __init__(self, messages):
        self.messages = list(messages)
        self.requests: list[dict] = []

    def chat(self, messages, *, tools=None, tool_choice="auto", max_tokens, **options):
        self.requests.append(
            {
                "messages": json.loads(json.dumps(messages)),
                "tools": tools,
                "tool_choice": tool_choice,
                "max_tokens": max_tokens,
                **options,
            }
        )
        if len(self.requests) > len(self.messages):
            raise BackendConnectionError("script exhausted")
        m = self.messages[len(self.requests) - 1]
        if isinstance(m, Exception):
            raise m
        return Completion(
            m.get("content") or "",
            "stop",
            usage=Usage(prompt_tokens=100, prompt_evaluated=20, prompt_cached=80, completion_tokens=10),
            message=m,
        )

    def complete(self, prompt, **kw):  # never used in native mode
        raise AssertionError("native mode must not call complete()")


def run(messages, mode="native", **kw):
    task = kw.pop("task", "What's 17 times 24, then add 100?")
    backend = FakeChat(messages)
    agent = Agent(backend, demo.demo_tools(), mode=mode, **kw)
    return agent.run(task), backend


# -- the happy path ----------------------------------------------------------------------------


def test_seed_calc_with_tool_calls():
    result, backend = run(
        [
            msg(None, [call("calculate", '{"expression": "17 * 24"}', id="c1")]),
            msg(None, [call("calculate", '{"expression": "408 + 100"}', id="c2")]),
            msg("17 × 24 = 408, plus 100 is 508."),
        ],
        temperature=0.0,
        seed=1,
    )
    assert result.ok and result.answer == "17 × 24 = 408, plus 100 is 508." and result.mode == "native"
    assert [o.output for s in result.steps for o in s.outcomes] == ["408", "508"]
    assert [s.details["native"] for s in result.steps] == ["tool_calls", "tool_calls", "content"]
    first, second = backend.requests[0], backend.requests[1]
    assert first["tools"] == demo.demo_tools().to_openai() and first["tool_choice"] == "auto"
    assert first["temperature"] == 0.0 and first["seed"] == 1
    # the reply and its results go back as an assistant message with tool_calls and tool messages
    assert second["messages"][-2]["tool_calls"][0]["id"] == "c1"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "name": "calculate", "content": "408"}
    assert second["messages"][: len(first["messages"])] == first["messages"]  # append-only
    assert result.usage.completion_tokens == 30 and result.usage.prompt_evaluated == 60
    assert result.decode_failures == 0


def test_the_conversation_starts_with_a_native_example_and_the_task():
    _, backend = run([msg("done")], task="THE TASK")
    messages = backend.requests[0]["messages"]
    assert messages[0]["role"] == "system" and "TOOL:" not in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "THE TASK"}
    assistant = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    tools = [m for m in messages if m["role"] == "tool"]
    shown = demo.demo_tools().examples_for("THE TASK")  # the examples most like the task
    assert assistant and len(tools) == sum(len(e.calls) for e in shown)
    assert [m["content"] for m in messages if m["role"] == "user"][:-1] == [e.task for e in shown]
    assert tools[0]["tool_call_id"] == assistant[0]["tool_calls"][0]["id"]
    _, backend = run([msg("done")], example=None, system_prompt="Be brief.")
    assert [m["role"] for m in backend.requests[0]["messages"]] == ["system", "user"]
    assert backend.requests[0]["messages"][0]["content"] == "Be brief."


def test_example_calls_that_do_not_wait_for_each_other_come_in_one_assistant_turn():
    _, backend = run([msg("done")], task="What time is it in Lima and in Quito?")
    messages = backend.requests[0]["messages"]
    grouped = [m for m in messages if m["role"] == "assistant" and len(m.get("tool_calls") or []) == 2]
    assert grouped, "the Sydney/New York example is shown as one turn with two tool calls"
    at = messages.index(grouped[0])
    ids = [c["id"] for c in grouped[0]["tool_calls"]]
    assert [m.get("tool_call_id") for m in messages[at + 1 : at + 3]] == ids


def test_several_calls_in_one_reply_and_missing_ids():
    result, backend = run(
        [
            msg("", [call("multiply", '{"a": 25, "b": 10}'), call("toggle_light", {"room": "kitchen", "on": False})]),
            msg("250; the light is off."),
        ]
    )
    assert next(o.output for o in result.steps[0].outcomes) == "250" and result.steps[0].outcomes[1].ok
    ids = [c.id for c in result.steps[0].calls]
    assert ids == ["call_1_1", "call_1_2"] and "tool_call_ids" not in result.steps[0].details
    sent = backend.requests[1]["messages"]
    assert [m.get("tool_call_id") for m in sent[-2:]] == ids
    assert [tc["id"] for tc in sent[-3]["tool_calls"]] == ids


# -- what native mode does wrong, recorded ------------------------------------------------------------

FENCED = '```json\n{\n  "name": "calculate",\n  "arguments": {\n    "expression": "17 * 24 + 100"\n  }\n}\n```'


@pytest.mark.parametrize(
    "content,kind,calls",
    [
        (FENCED, "fenced_json", [("calculate", {"expression": "17 * 24 + 100"})]),
        ('{"name": "get_weather", "arguments": {"city": "Paris"}}', "json", [("get_weather", {"city": "Paris"})]),
        (
            'I will call it: {"name": "multiply", "parameters": {"a": 1, "b": 2}}',
            "json",
            [("multiply", {"a": 1, "b": 2})],
        ),
        ('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', "tool_call_tag", [("get_time", {})]),
        ('[{"function": {"name": "get_time", "arguments": "{}"}}]', "json", [("get_time", "{}")]),
        ('```json\n{"city": "Paris"}\n```', "fenced_json", [("get_weather", {"city": "Paris"})]),  # bare arguments
        ('TOOL: calculate ARGS: {"expression": "1+1"}', "text_protocol", [("calculate", {"expression": "1+1"})]),
        ("TOOL: calculate ARGS: {oops", "text_protocol", []),
        ('{"name": "calculate", "arguments": {"expression": "x"…: oops"}}', "invalid_json", []),
        ("It is 508.", None, []),
        ('The result is {"total": 508}.', None, []),
        ("```python\nprint(17 * 24)\n```", None, []),
    ],
)
def test_content_that_looks_like_a_call(content, kind, calls):
    assert content_calls(content, demo.demo_tools()) == (kind, calls)


def test_a_decode_failure_is_recorded_and_not_repaired(tmp_path):
    path = tmp_path / "t.jsonl"
    result, _backend = run([msg(FENCED)], trace=path)
    step = result.steps[0]
    assert result.stop_reason == "answer" and result.answer == FENCED  # what native mode really does
    assert step.details["native"] == "content" and step.details["decode_failure"] == "fenced_json"
    assert step.details["content_calls"] == [{"name": "calculate", "arguments": {"expression": "17 * 24 + 100"}}]
    assert not step.outcomes and result.decode_failures == 1
    trace = load_trace(path)
    assert trace.complete and trace.start["mode"] == "native"
    assert trace.steps[0]["details"]["decode_failure"] == "fenced_json" and trace.result["decode_failures"] == 1


def test_native_fallback_reads_the_content_with_the_text_parser():
    result, backend = run([msg(FENCED), msg("It is 508.")], mode="native+fallback")
    first = result.steps[0]
    assert result.ok and result.answer == "It is 508." and result.mode == "native+fallback"
    assert first.details["decode_failure"] == "fenced_json" and first.details["fallback"] is True
    assert [o.output for o in first.outcomes] == ["508"]
    sent = backend.requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"] == {
        "name": "calculate",
        "arguments": '{"expression": "17 * 24 + 100"}',
    }
    assert sent[-1]["role"] == "tool" and sent[-1]["content"] == "508"
    assert result.decode_failures == 1  # still counted: the server did not decode it


def test_fallback_leaves_unreadable_content_as_the_answer():
    result, _ = run([msg("TOOL: calculate ARGS: {oops")], mode="native+fallback")
    assert result.ok and result.steps[0].details["decode_failure"] == "text_protocol"
    assert "fallback" not in result.steps[0].details


def test_arguments_that_are_not_json_become_an_error_observation():
    result, backend = run(
        [
            msg(
                "",
                [
                    call("calculate", '{"expression": "17 * 24"', id="a"),
                    call("get_time", "", id="b"),
                    call("multiply", "[1, 2]", id="c"),
                ],
            ),
            msg("sorry"),
        ]
    )
    outcomes = result.steps[0].outcomes
    assert [o.ok for o in outcomes] == [False, True, False]
    assert outcomes[0].error == "bad_arguments" and "not a JSON object" in outcomes[0].output
    assert "calculate(expression" in outcomes[0].output  # usage
    assert set(result.steps[0].details["invalid_arguments"]) == {0, 2}
    tool_messages = [m for m in backend.requests[1]["messages"] if m["role"] == "tool"][-3:]
    assert "Call the tool again" in tool_messages[0]["content"]
    assert result.ok


def test_unknown_tool_and_bad_arguments_get_the_retry_hint():
    result, backend = run([msg("", [call("calculator", '{"expression": "1"}', id="x")]), msg("ok")])
    assert result.steps[0].outcomes[0].error == "unknown_tool"
    assert "Call the tool again" in backend.requests[1]["messages"][-1]["content"]


# -- limits and stop reasons --------------------------------------------------------------------------


def test_empty_replies_are_format_errors():
    result, backend = run([msg(""), msg(""), msg("")])
    assert result.stop_reason == "format_errors" and result.format_errors == 3
    assert backend.requests[1]["messages"][-1]["role"] == "user"
    assert "empty" in backend.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "kw,reason",
    [({"max_steps": 2}, "max_steps"), ({"max_tokens": 250}, "token_budget"), ({"max_seconds": 0}, "time_limit")],
)
def test_same_limits_as_the_text_modes(kw, reason):
    forever = [msg("", [call("get_time", "{}")])] * 10
    result, _backend = run(forever, **kw)
    assert result.stop_reason == reason


def test_backend_errors_end_the_run_with_a_complete_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    result, _ = run([msg("", [call("get_time", "{}")])], trace=path)  # the second request fails
    assert result.stop_reason == "backend_error" and len(result.steps) == 1
    trace = load_trace(path)
    assert trace.complete and len(trace.steps) == 1 and trace.result["stop_reason"] in STOP_REASONS


def test_transcript_is_the_conversation_as_json_lines():
    result, _ = run([msg("", [call("get_time", "{}", id="t")]), msg("noon")])
    lines = [json.loads(line) for line in result.transcript.splitlines()]
    assert lines[-1] == {"role": "assistant", "content": "noon"} and lines[-2]["role"] == "tool"


# -- backends ------------------------------------------------------------------------------------------

CHAT = "/v1/chat/completions"


def chat_reply(message, finish="stop"):
    return {
        "choices": [{"message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 700, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 650}},
    }


def test_over_http_with_a_llamacpp_backend_on_the_same_server(fake_server):
    fake_server.json(CHAT, chat_reply(msg(None, [call("calculate", '{"expression": "17*24"}', id="q1")]), "tool_calls"))
    fake_server.json(CHAT, chat_reply(msg("408")))
    result = Agent(LlamaCppBackend(fake_server.url), demo.demo_tools(), mode="native").run("17*24?")
    assert result.ok and result.answer == "408" and result.usage.prompt_cached == 1300
    first, second = fake_server.bodies(CHAT)
    assert first["tools"] == demo.demo_tools().to_openai() and first["tool_choice"] == "auto"
    assert first["stream"] is False and first["max_tokens"] == 512
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "q1", "name": "calculate", "content": "408"}


def test_backends_without_chat_are_refused():
    with pytest.raises(ModeNotSupported, match="native.*chat"):
        Agent(OllamaBackend("http://127.0.0.1:9", model="m"), demo.demo_tools(), mode="native")


def test_cli_run_native_against_the_chat_endpoint(fake_server, capsys):
    fake_server.json(CHAT, chat_reply(msg(FENCED)))
    code = main(["run", "--endpoint", fake_server.url, "--mode", "native", "--json", "-v", "17*24+100?"])
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and summary["mode"] == "native" and summary["decode_failures"] == 1
    assert "native decode failure" in err
    assert fake_server.bodies(CHAT)[0]["tools"]  # the CLI asked the chat endpoint, with the tools
    assert not fake_server.bodies("/completion")  # ... and not the text endpoint


def test_sampling_options_and_the_server_slot_are_forwarded():
    _, backend = run([msg("done")], temperature=0.0, seed=7, id_slot=1, stream=True)
    request = backend.requests[0]
    assert (request["temperature"], request["seed"], request["id_slot"]) == (0.0, 7, 1)
    assert "stream" not in request  # completion-only options stay out of the chat request
    _, backend = run([msg("done")])
    assert "id_slot" not in backend.requests[0]


class _Picky:
    """A check for these tests: sends back the first answer once, notes every result."""

    name = "picky"

    def on_answer(self, run, answer):
        sent = any(s.sent_back for s in run.steps)
        return None if sent else run.prompts.render("empty_reply") + " (" + run.prompts.family + ")"

    def on_step(self, run, step):
        return [Note("picky", f"noted {o.name}", i) for i, o in enumerate(step.outcomes)] + [Note("picky", "step")]


def test_checks_run_in_native_mode_as_in_the_text_modes_in_native_words():
    result, backend = run(
        [msg("", [call("calculate", '{"expression": "2 + 2"}', "c1")]), msg("4"), msg("It is 4.")], checks=[_Picky()]
    )
    assert result.ok and result.answer == "It is 4." and result.sent_back("picky") == 1
    second = backend.requests[1]["messages"]
    assert second[-2] == {"role": "tool", "tool_call_id": "c1", "name": "calculate", "content": "4\nnoted calculate"}
    assert second[-1] == {"role": "user", "content": "step"}
    assert backend.requests[2]["messages"][-1] == {
        "role": "user",
        "content": "Your reply was empty. Call a tool, or reply with the final answer in words. (native)",
    }


def test_deeply_nested_tool_call_arguments_are_a_call_error_not_a_crash():
    # json.loads raises RecursionError on `[` x 10^5 (#16 item 3)
    deep = "[" * 100_000
    result, _ = run([msg(tool_calls=[call("calculate", deep)]), msg("done")])
    outcome = result.steps[0].outcomes[0]
    assert not outcome.ok and "nested too deeply" in outcome.output
    assert result.stop_reason == "answer"
    result, _ = run(
        [msg(content=json.dumps({"name": "calculate", "arguments": deep})), msg("done")], mode="native+fallback"
    )
    assert result.stop_reason == "answer"


def test_too_many_tool_calls_in_one_reply_are_refused_in_one_user_message():
    # #16 item 6: only max_calls_per_reply run; the assistant turn keeps the calls that ran, each
    # answered by its tool message, then one user message says how many were refused
    calls = [call("calculate", json.dumps({"expression": f"{i} + 1"}), id=f"c{i}") for i in range(40)]
    result, backend = run([msg(tool_calls=calls), msg("done")], max_calls_per_reply=3)
    step = result.steps[0]
    assert [o.output for o in step.outcomes] == ["1", "2", "3"] and step.details["refused_calls"] == 37
    sent = backend.requests[1]["messages"]
    assistant = next(m for m in sent if m.get("tool_calls") and m["tool_calls"][0]["id"] == "c0")
    assert [c["id"] for c in assistant["tool_calls"]] == ["c0", "c1", "c2"]
    tail = sent[sent.index(assistant) + 1 :]
    assert [m["role"] for m in tail] == ["tool", "tool", "tool", "user"] and "37" in tail[-1]["content"]


@tool_fn
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return city


def test_a_native_request_for_tools_without_examples_carries_no_invented_turns():
    backend = FakeChat([msg("Paris is a city.")])
    Agent(backend, [lookup], mode="native").run("What is Paris?")
    roles = [m["role"] for m in backend.requests[0]["messages"]]
    assert roles == ["system", "user"] and backend.requests[0]["tools"][0]["function"]["name"] == "lookup"


def test_a_native_conversation_continues_and_sends_tools_added_between_questions():
    backend = FakeChat([msg("first"), msg("", [call("lookup", '{"city": "Rome"}', "c1")]), msg("Rome.")])
    agent = Agent(backend, demo.demo_tools(), mode="native")
    agent.run("Hello?")
    agent.add_tools(lookup)
    assert agent.run("Look up Rome.").answer == "Rome."
    second = backend.requests[1]
    assert [m["content"] for m in second["messages"] if m["role"] == "user"][-2:] == ["Hello?", "Look up Rome."]
    assert "lookup" in [t["function"]["name"] for t in second["tools"]]


def test_a_native_question_ended_by_a_limit_closes_its_turn_before_the_next():
    backend = FakeChat([msg("", [call("calculate", '{"expression": "17 * 24"}', "c1")]), msg("508")])
    agent = Agent(backend, demo.demo_tools(), mode="native", max_steps=1)
    assert agent.run("What's 17 times 24?").stop_reason == "max_steps"
    assert agent.run("Now add 100 to it.").answer == "508"
    roles = [m["role"] for m in backend.requests[1]["messages"]]
    assert roles[-3:] == ["tool", "assistant", "user"], roles


def test_restore_takes_a_native_question_back():
    backend = FakeChat([msg("sunny"), msg("rainy"), msg("cloudy")])
    agent = Agent(backend, demo.demo_tools(), mode="native")
    agent.run("Weather in Paris?")
    before, mark = [dict(m) for m in agent.conversation.messages], agent.checkpoint()
    agent.run("And in Quito?")
    agent.restore(mark)
    assert agent.conversation.messages == before
    agent.run("And in Oslo?")
    sent = json.dumps(backend.requests[-1]["messages"])
    assert "Quito" not in sent and "Oslo" in sent
