"""Every backend declares what it can do: grammar, chat (native function calling), streaming."""

from __future__ import annotations

import dataclasses

import pytest

import textagent.backends as backends
from textagent.backends import (
    Capabilities,
    ChatAsTextBackend,
    LlamaCppBackend,
    OllamaBackend,
    OpenAICompletionsBackend,
    ScriptedBackend,
)
from textagent.errors import ModeNotSupported


def test_capabilities_are_a_frozen_dataclass_exported_by_the_package():
    assert backends.Capabilities is Capabilities and "Capabilities" in backends.__all__
    caps = Capabilities()
    assert (caps.grammar, caps.chat, caps.streaming) == (False, False, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.grammar = True  # type: ignore[misc]


@pytest.mark.parametrize(
    "backend, caps",
    [
        (LlamaCppBackend("http://h:1"), Capabilities(grammar=True, chat=True, streaming=True)),
        (OpenAICompletionsBackend("http://h:1"), Capabilities(grammar=False, chat=False, streaming=True)),
        (OpenAICompletionsBackend("http://h:1", grammar_field="grammar"), Capabilities(grammar=True, streaming=True)),
        (ChatAsTextBackend("http://h:1"), Capabilities(grammar=False, chat=True, streaming=True)),
        (
            ChatAsTextBackend("http://h:1", grammar_field="grammar"),
            Capabilities(grammar=True, chat=True, streaming=True),
        ),
        (OllamaBackend("http://h:1", model="m"), Capabilities(grammar=False, chat=False, streaming=True)),
        (ScriptedBackend([]), Capabilities(grammar=True)),
    ],
)
def test_each_backend_declares_what_it_supports(backend, caps):
    assert backend.capabilities == caps


def test_chat_is_declared_where_native_calls_can_go():
    # chat(): the chat backend itself; llama.cpp: native mode reaches the server's chat endpoint
    assert callable(getattr(ChatAsTextBackend("http://h:1"), "chat", None))
    for backend in (OpenAICompletionsBackend("http://h:1"), OllamaBackend("http://h:1", model="m")):
        assert not backend.capabilities.chat and not hasattr(backend, "chat")


@pytest.mark.parametrize(
    "backend",
    [
        OpenAICompletionsBackend("http://127.0.0.1:9", retries=0),
        ChatAsTextBackend("http://127.0.0.1:9", retries=0),
        OllamaBackend("http://127.0.0.1:9", model="m", retries=0),
    ],
)
def test_a_backend_without_grammar_refuses_one_before_sending(backend):
    assert not backend.capabilities.grammar
    with pytest.raises(ModeNotSupported):
        backend.complete(
            "p", stop=[], max_tokens=5, grammar='root ::= "x"', messages=[{"role": "user", "content": "p"}]
        )


def test_a_scripted_backend_can_stand_in_for_other_capabilities():
    caps = Capabilities(chat=True)
    assert ScriptedBackend(["x"], capabilities=caps).capabilities is caps
