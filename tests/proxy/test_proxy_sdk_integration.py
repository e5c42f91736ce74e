"""The official openai SDK, unchanged, against `textagent proxy` in front of the real embedded
llama-server with Qwen2.5-Coder-0.5B. These check the protocol (tool_calls with ids and JSON
arguments that fit the schema, finish reasons, streaming deltas, tool_choice), not how clever
the tiny model is."""

from __future__ import annotations

import json

import jsonschema
import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from textagent.proxy import REPAIRS_HEADER, ProxyConfig, ProxyServer, Upstream, UpstreamConfig  # noqa: E402

pytestmark = pytest.mark.integration

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
RESULTS = {"get_weather": "sunny, 24 C", "get_time": "14:05"}


@pytest.fixture(scope="module")
def client(qwen_server):
    upstream = Upstream(UpstreamConfig(endpoint=qwen_server.url, chat_format="server", timeout=120))
    with ProxyServer(upstream) as proxy:
        assert upstream.wait(60) and upstream.state == "ready", upstream.detail
        yield openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=180)


def check_calls(calls) -> None:
    assert calls and len({c.id for c in calls}) == len(calls)
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def tool_results(calls) -> list[dict]:
    return [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]} for c in calls]


def test_a_tool_conversation_call_result_answer(client):
    messages: list = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    first = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS, temperature=0, seed=1)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    check_calls(choice.message.tool_calls)
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    messages += [choice.message, *tool_results(choice.message.tool_calls)]
    for _ in range(3):  # the model may look something else up before it answers
        reply = client.chat.completions.create(model="qwen", messages=messages, tools=TOOLS, temperature=0, seed=1)
        choice = reply.choices[0]
        if choice.finish_reason != "tool_calls":
            break
        check_calls(choice.message.tool_calls)
        messages += [choice.message, *tool_results(choice.message.tool_calls)]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    # append-only: the second turn reused the first turn's prompt from the KV cache
    assert reply.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens


def stream_turn(client, messages, **kw):
    stream = client.chat.completions.create(
        model="qwen",
        messages=messages,
        tools=TOOLS,
        temperature=0,
        seed=1,
        stream=True,
        stream_options={"include_usage": True},
        **kw,
    )
    content, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                call["name"] += (delta.function.name or "") if delta.function else ""
                call["arguments"] += (delta.function.arguments or "") if delta.function else ""
            finish = choice.finish_reason or finish
    assert usage is not None and usage.total_tokens > 0
    return content, [calls[i] for i in sorted(calls)], finish


def test_the_same_conversation_streamed(client):
    messages: list = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    content, calls, finish = stream_turn(client, messages)
    assert finish == "tool_calls" and calls
    for call in calls:
        assert call["id"].startswith("call_")
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls
            ],
        }
    )
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": RESULTS[c["name"]]} for c in calls]
    content, calls, finish = stream_turn(client, messages, tool_choice="none")
    assert finish == "stop" and not calls and content.strip()


def test_two_calls_in_one_turn(client):
    reply = client.chat.completions.create(
        model="qwen",
        tools=TOOLS,
        temperature=0,
        seed=1,
        messages=[{"role": "user", "content": "What is the weather in Paris and what is the weather in Tokyo?"}],
    )
    calls = reply.choices[0].message.tool_calls
    check_calls(calls)
    assert len(calls) == 2 and reply.choices[0].finish_reason == "tool_calls"


def test_tool_choice_forms(client):
    ask = [{"role": "user", "content": "Tell me about Paris."}]
    none = client.chat.completions.create(model="qwen", messages=ask, tools=TOOLS, tool_choice="none")
    assert none.choices[0].finish_reason == "stop" and none.choices[0].message.tool_calls is None
    assert none.choices[0].message.content.strip()
    required = client.chat.completions.create(model="qwen", messages=ask, tools=TOOLS, tool_choice="required")
    assert required.choices[0].finish_reason == "tool_calls"
    check_calls(required.choices[0].message.tool_calls)
    named = client.chat.completions.with_raw_response.create(
        model="qwen",
        messages=ask,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False,
    )
    assert named.headers[REPAIRS_HEADER] == "0"  # held to the call by the grammar
    calls = named.parse().choices[0].message.tool_calls
    check_calls(calls)
    assert [c.function.name for c in calls] == ["get_time"]


def test_the_sdk_sees_openai_errors(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="qwen", messages=[{"role": "user", "content": "hi"}], n=2)
    assert caught.value.body["param"] == "n"
    assert [m.id for m in client.models.list()] == ["textagent"]  # no --model given


def test_the_embedded_server_outlives_the_thread_that_started_it(smollm_server):
    """Without --endpoint the proxy starts llama-server in a background thread (it listens at
    once); the server must stay up after that thread's start-up work is done."""
    import time

    upstream = Upstream(UpstreamConfig(gguf=str(smollm_server.model_path), parallel=1, timeout=60))
    upstream.start()
    try:
        assert upstream.wait(120) and upstream.state == "ready", upstream.detail
        time.sleep(1.0)
        assert upstream.health()["state"] == "ready"
    finally:
        upstream.stop()


def test_constrained_mode_holds_a_model_that_ignores_the_protocol(smollm_server):
    """SmolLM2 never writes a protocol line by itself; `--mode constrained` sends the tools' grammar
    upstream, so every reply reads at once (no repair) as schema-valid calls or a clean answer."""
    upstream = Upstream(UpstreamConfig(endpoint=smollm_server.url, chat_format="server", timeout=120))
    with ProxyServer(upstream, ProxyConfig(mode="constrained", max_repairs=0)) as proxy:
        assert upstream.wait(60) and upstream.state == "ready", upstream.detail
        sdk = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=180)
        for question in ["What is the weather in Paris right now?", "What time is it in Tokyo?"]:
            raw = sdk.chat.completions.with_raw_response.create(
                model="smollm2",
                tools=TOOLS,
                temperature=0,
                seed=1,
                max_tokens=128,
                messages=[{"role": "user", "content": question}],
            )
            assert raw.headers[REPAIRS_HEADER] == "0"
            choice = raw.parse().choices[0]
            if choice.message.tool_calls:
                check_calls(choice.message.tool_calls)
                assert choice.finish_reason == "tool_calls"
            else:
                assert choice.message.content.strip() and "ANSWER:" not in choice.message.content


def test_a_completions_upstream_llama_cpps_v1_completions(qwen_server):
    """`--api completions`: the proxy speaks OpenAI /v1/completions to the upstream (here
    llama.cpp's own), writes the chat as text and reads the model's calls back."""
    upstream = Upstream(UpstreamConfig(endpoint=qwen_server.url + "/v1", api="completions", model="qwen", timeout=120))
    with ProxyServer(upstream) as proxy:
        assert upstream.wait(60) and upstream.state == "ready", upstream.detail
        sdk = openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0, timeout=180)
        reply = sdk.chat.completions.create(
            model="qwen",
            tools=TOOLS,
            temperature=0,
            seed=1,
            messages=[{"role": "user", "content": "What is the weather in Paris right now?"}],
        )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    check_calls(choice.message.tool_calls)
    assert [c.function.name for c in choice.message.tool_calls] == ["get_weather"]
    assert json.loads(choice.message.tool_calls[0].function.arguments)["city"].lower() == "paris"
    assert reply.usage.prompt_tokens > 0
