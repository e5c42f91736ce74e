"""backends.connect: one factory, one rule for every API's options."""

from __future__ import annotations

import pytest

from textagent.backends import (
    ChatAsTextBackend,
    LlamaCppBackend,
    OllamaBackend,
    OpenAICompletionsBackend,
    api_capabilities,
    connect,
)
from textagent.errors import TextagentError
from textagent.modes import mode_needs


@pytest.mark.parametrize(
    "api, chat, kind",
    [
        ("llamacpp", False, LlamaCppBackend),
        ("llamacpp", True, ChatAsTextBackend),
        ("completions", False, OpenAICompletionsBackend),
        ("completions", True, ChatAsTextBackend),
        ("chat", False, ChatAsTextBackend),
        ("chat", True, ChatAsTextBackend),
        ("ollama", False, OllamaBackend),
        ("ollama", True, OllamaBackend),  # no chat endpoint: the mode that needs one refuses it
    ],
)
def test_connect_builds_the_backend_of_the_api(api, chat, kind):
    backend = connect(api, "http://h:1", model="m", api_key="k", timeout=7, chat=chat)
    assert type(backend) is kind
    assert backend.http.api_key == "k" and backend.http.timeout[1] == 7
    assert getattr(backend, "model", "m") == "m"


def test_the_grammar_field_reaches_the_openai_backends():
    assert connect("completions", "http://h:1", grammar_field="grammar").capabilities.grammar
    assert connect("chat", "http://h:1", grammar_field="guided_grammar").grammar_field == "guided_grammar"
    assert not connect("completions", "http://h:1").capabilities.grammar


def test_ollama_needs_a_model_and_an_unknown_api_is_named():
    with pytest.raises(TextagentError, match="needs a model"):
        connect("ollama", "http://h:1")
    with pytest.raises(TextagentError, match="unknown API 'vllm'"):
        connect("vllm", "http://h:1")


def test_http_options_pass_through():
    assert connect("llamacpp", "http://h:1", retries=0).http.retries == 0


def test_what_an_api_offers_meets_what_a_mode_needs():
    assert api_capabilities("llamacpp").grammar and api_capabilities("llamacpp").chat
    assert not api_capabilities("ollama").chat and not api_capabilities("ollama").grammar
    assert not api_capabilities("completions").grammar and api_capabilities("completions", grammar_field="g").grammar
    assert mode_needs("text") == mode_needs("text").__class__()
    assert mode_needs("constrained").grammar and not mode_needs("constrained").chat
    assert mode_needs("native").tools and mode_needs("native+fallback").chat
