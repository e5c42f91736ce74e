"""ChatAsTextBackend against a scripted /v1/chat/completions."""

from __future__ import annotations

import pytest

from textagent.backends.base import Backend, Usage
from textagent.backends.chat import ChatAsTextBackend
from textagent.errors import (
    BackendHTTPError,
    BackendResponseError,
    BackendTimeout,
    ModeNotSupported,
)

PATH = "/v1/chat/completions"
MESSAGES = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "What's 2+2?"},
]
REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": 'TOOL: add ARGS: {"a": 2, "b": 2}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 30, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 16}},
}


def backend(srv, **kw):
    kw.setdefault("backoff", 0)
    return ChatAsTextBackend(srv.url, **kw)


def delta(content=None, finish=None, **extra):
    d = {} if content is None else {"content": content}
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": finish}], **extra}


def test_is_a_backend():
    assert isinstance(ChatAsTextBackend("http://x"), Backend)
    assert ChatAsTextBackend("http://x/v1/chat/completions").url == "http://x/v1"


def test_request_body_has_messages_and_no_tools(fake_server):
    fake_server.json(PATH, REPLY)
    c = backend(fake_server, model="m", api_key="k").complete(
        "rendered prompt (ignored)", stop=["\nOBSERVATION:"], max_tokens=128, messages=MESSAGES, seed=1
    )
    req = fake_server.requests[0]
    assert req.path == PATH
    assert req.json == {
        "model": "m",
        "max_tokens": 128,
        "stop": ["\nOBSERVATION:"],
        "temperature": 0.0,
        "seed": 1,
        "messages": MESSAGES,
        "stream": False,
    }
    assert "tools" not in req.json and "prompt" not in req.json
    assert req.headers["authorization"] == "Bearer k"
    assert c.text == REPLY["choices"][0]["message"]["content"]
    assert c.finish_reason == "stop"
    assert c.usage == Usage(30, 14, 16, 12)
    assert c.message == REPLY["choices"][0]["message"]


@pytest.mark.parametrize("messages", [None, [], "hi", [{"content": "no role"}], ["x"]])
def test_messages_are_required(fake_server, messages):
    options = {} if messages is None else {"messages": messages}
    with pytest.raises(TypeError, match="messages"):
        backend(fake_server).complete("p", stop=[], max_tokens=5, **options)
    assert fake_server.requests == []


def test_null_and_list_content(fake_server):
    fake_server.json(PATH, {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]})
    fake_server.json(
        PATH,
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    }
                }
            ]
        },
    )
    b = backend(fake_server)
    assert b.complete("p", stop=[], max_tokens=5, messages=MESSAGES).text == ""
    assert b.complete("p", stop=[], max_tokens=5, messages=MESSAGES).text == "ab"


def test_missing_message(fake_server):
    fake_server.json(PATH, {"choices": [{"text": "completion-style"}]})
    with pytest.raises(BackendResponseError, match="without a message"):
        backend(fake_server).complete("p", stop=[], max_tokens=5, messages=MESSAGES)


def test_grammar(fake_server):
    with pytest.raises(ModeNotSupported):
        backend(fake_server).complete("p", stop=[], max_tokens=5, messages=MESSAGES, grammar="root ::= x")
    fake_server.json(PATH, REPLY)
    backend(fake_server, grammar_field="grammar").complete("p", stop=[], max_tokens=5, messages=MESSAGES, grammar="g")
    assert fake_server.bodies()[0]["grammar"] == "g"


def test_streaming(fake_server):
    fake_server.sse(
        PATH,
        [
            {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]},
            delta("ANSWER"),
            ": keep-alive",
            delta(": 4"),
            delta(None, "stop"),
            {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}},
            "data: [DONE]",
        ],
    )
    c = backend(fake_server, stream=True).complete("p", stop=[], max_tokens=5, messages=MESSAGES)
    assert c.text == "ANSWER: 4" and c.finish_reason == "stop"
    assert c.usage == Usage(prompt_tokens=7, completion_tokens=2)
    assert fake_server.bodies()[0]["stream"] is True


def test_streaming_early_stop(fake_server):
    fake_server.sse(PATH, [delta("TOOL: a ARGS: {}\n"), delta("OBSERVATION: x"), delta("y"), delta(None, "stop")])
    c = backend(fake_server).complete(
        "p", stop=[], max_tokens=5, messages=MESSAGES, on_text=lambda t: "OBSERVATION:" in t
    )
    assert c.finish_reason == "early_stop" and c.text.endswith("OBSERVATION: x")


def test_stream_cut_off_and_error(fake_server):
    fake_server.sse(PATH, [delta("a"), b'data: {"choi'], cut=True)
    fake_server.sse(PATH, [delta("a"), {"error": {"code": 500, "message": "kaput"}}])
    b = backend(fake_server, stream=True)
    with pytest.raises(BackendResponseError, match="cut off"):
        b.complete("p", stop=[], max_tokens=5, messages=MESSAGES)
    with pytest.raises(BackendHTTPError, match="kaput"):
        b.complete("p", stop=[], max_tokens=5, messages=MESSAGES)


# -- native chat() ---------------------------------------------------------------------------
TOOLS = [
    {
        "type": "function",
        "function": {"name": "add", "description": "Add", "parameters": {"type": "object", "properties": {}}},
    }
]


def test_chat_with_tools_returns_raw_message(fake_server):
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    fake_server.json(
        PATH, {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": REPLY["usage"]}
    )
    c = backend(fake_server, model="m").chat(MESSAGES, tools=TOOLS, max_tokens=64, parallel_tool_calls=False)
    assert c.message == message and c.text == "" and c.finish_reason == "stop"
    body = fake_server.bodies()[0]
    assert body["tools"] == TOOLS and body["tool_choice"] == "auto"
    assert body["max_tokens"] == 64 and body["stream"] is False and body["parallel_tool_calls"] is False
    assert body["model"] == "m" and "stop" not in body


def test_chat_without_tools(fake_server):
    fake_server.json(PATH, REPLY)
    c = backend(fake_server).chat(MESSAGES, max_tokens=8, stop=["X"], temperature=0.5, seed=9)
    body = fake_server.bodies()[0]
    assert "tools" not in body and "tool_choice" not in body
    assert body["stop"] == ["X"] and body["temperature"] == 0.5 and body["seed"] == 9
    assert c.text == REPLY["choices"][0]["message"]["content"]


def test_chat_bad_tool_calls(fake_server):
    fake_server.json(PATH, {"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": "oops"}}]})
    with pytest.raises(BackendResponseError, match="tool_calls"):
        backend(fake_server).chat(MESSAGES, tools=TOOLS, max_tokens=8)


def test_chat_requires_max_tokens():
    with pytest.raises(TypeError):
        ChatAsTextBackend("http://x").chat(MESSAGES)  # type: ignore[call-arg]


# -- faults ----------------------------------------------------------------------------------


def test_http_errors_and_retries(fake_server):
    fake_server.add(PATH, status=502, body="bad gateway")
    fake_server.json(PATH, REPLY)
    fake_server.add(
        PATH, status=400, json={"error": {"code": 400, "message": "messages too long", "type": "invalid_request_error"}}
    )
    b = backend(fake_server)
    assert b.complete("p", stop=[], max_tokens=5, messages=MESSAGES).retries == 1
    with pytest.raises(BackendHTTPError, match="messages too long") as info:
        b.complete("p", stop=[], max_tokens=5, messages=MESSAGES)
    assert info.value.status == 400 and info.value.retries == 0


def test_timeout_malformed_empty(fake_server):
    fake_server.json(PATH, REPLY, delay=2)
    fake_server.add(PATH, body="{")
    fake_server.add(PATH, body="   ")
    with pytest.raises(BackendTimeout):
        backend(fake_server, timeout=0.2).complete("p", stop=[], max_tokens=5, messages=MESSAGES)
    b = backend(fake_server)
    with pytest.raises(BackendResponseError, match="malformed"):
        b.complete("p", stop=[], max_tokens=5, messages=MESSAGES)
    with pytest.raises(BackendResponseError, match="empty"):
        b.complete("p", stop=[], max_tokens=5, messages=MESSAGES)


def test_the_server_slot_is_forwarded_as_it_is_to_llamacpp(fake_server):
    fake_server.json(PATH, REPLY)
    fake_server.json(PATH, REPLY)
    chat = backend(fake_server)
    assert "id_slot" in chat.request_options
    chat.complete("p", stop=[], max_tokens=8, messages=MESSAGES, id_slot=2)
    chat.complete("p", stop=[], max_tokens=8, messages=MESSAGES)
    assert fake_server.requests[0].json["id_slot"] == 2 and "id_slot" not in fake_server.requests[1].json
