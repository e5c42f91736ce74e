"""Every backend declares what it can do: grammar, chat (native function calling), streaming,
and what its server offers besides completions (health, slots, template, slot pinning, prefix
cache, sampling fields, the first token's alternatives)."""

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
from textagent.backends.base import OPENAI_SAMPLING, capabilities_of
from textagent.errors import ModeNotSupported

LLAMA = Capabilities(
    grammar=True,
    chat=True,
    streaming=True,
    health=True,
    slots=True,
    template=True,
    slot_pinning=True,
    prefix_cache=True,
    sampling=OPENAI_SAMPLING,
    token_probs=True,
)
OLLAMA_SAMPLING = frozenset({"top_p", "frequency_penalty", "presence_penalty"})


def test_capabilities_are_a_frozen_dataclass_exported_by_the_package():
    assert backends.Capabilities is Capabilities and "Capabilities" in backends.__all__
    caps = Capabilities()
    assert (caps.grammar, caps.chat, caps.streaming) == (False, False, False)
    assert not (caps.health or caps.slots or caps.template or caps.slot_pinning or caps.prefix_cache or caps.sampling)
    assert not caps.token_probs
    with pytest.raises(dataclasses.FrozenInstanceError):
        caps.grammar = True  # type: ignore[misc]


@pytest.mark.parametrize(
    "backend, caps",
    [
        (LlamaCppBackend("http://h:1"), LLAMA),
        (
            OpenAICompletionsBackend("http://h:1"),
            Capabilities(streaming=True, sampling=OPENAI_SAMPLING, token_probs=True),
        ),
        (
            OpenAICompletionsBackend("http://h:1", grammar_field="grammar"),
            Capabilities(grammar=True, streaming=True, sampling=OPENAI_SAMPLING, token_probs=True),
        ),
        (ChatAsTextBackend("http://h:1"), Capabilities(chat=True, streaming=True, sampling=OPENAI_SAMPLING)),
        (
            ChatAsTextBackend("http://h:1", grammar_field="grammar"),
            Capabilities(grammar=True, chat=True, streaming=True, sampling=OPENAI_SAMPLING),
        ),
        (OllamaBackend("http://h:1", model="m"), Capabilities(streaming=True, sampling=OLLAMA_SAMPLING)),
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


def test_what_a_server_offers_is_declared_with_the_calls_behind_it():
    # a declared capability comes with its calls (ServerBackend); one not declared need not
    llama = LlamaCppBackend("http://h:1")
    for name in ("health", "wait_healthy", "props", "apply_template", "sampling_params", "probe"):
        assert callable(getattr(llama, name))
    for backend in (OpenAICompletionsBackend("http://h:1"), OllamaBackend("http://h:1", model="m")):
        caps = backend.capabilities
        assert not (caps.health or caps.slots or caps.template or caps.slot_pinning or caps.prefix_cache)
        assert not any(hasattr(backend, name) for name in ("health", "props", "apply_template"))


def test_sampling_fields_are_written_as_each_api_takes_them():
    fields = {"top_p": 0.5, "logit_bias": {"15": -100}}
    assert OpenAICompletionsBackend("http://h:1").sampling_params(fields) == fields
    assert LlamaCppBackend("http://h:1").sampling_params(fields) == {"top_p": 0.5, "logit_bias": [[15, -100]]}
    assert fields == {"top_p": 0.5, "logit_bias": {"15": -100}}  # the caller's dict is left as it was


def test_a_backend_that_declares_nothing_can_do_nothing_beyond_completions():
    class Plain:
        def complete(self, prompt, *, stop, max_tokens, **options):
            raise NotImplementedError

    assert capabilities_of(Plain()) == Capabilities()
    assert capabilities_of(LlamaCppBackend("http://h:1")) == LLAMA


def test_the_factory_knows_an_api_s_capabilities_before_a_backend_is_made():
    assert backends.api_capabilities("llamacpp") == LLAMA
    assert backends.api_capabilities("ollama") == OllamaBackend("http://h:1", model="m").capabilities
    assert backends.api_capabilities("completions").sampling == OPENAI_SAMPLING
