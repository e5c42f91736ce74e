"""The bench's modes and backends: which modes an API can run, and the backend each mode gets."""

from __future__ import annotations

from textagent.bench.backends import BackendFactory, Slot, mode_availability


def test_mode_availability():
    ok, missing = mode_availability(["text", "baseline", "bogus"])
    assert ok == ["text", "baseline"] and "unknown mode" in missing["bogus"]
    ok, missing = mode_availability(["text", "constrained", "native", "native+fallback"])
    assert ok == ["text", "constrained", "native", "native+fallback"] and not missing
    # the mode says what it needs, the API what it offers (one rule with `textagent run`)
    ok, missing = mode_availability(["constrained", "native"], api="completions")
    assert ok == ["native"] and "llama.cpp" in missing["constrained"]
    ok, missing = mode_availability(["text", "constrained", "native"], api="ollama")
    assert ok == ["text"] and "grammar" in missing["constrained"] and "chat" in missing["native"]


def test_backend_per_mode():
    from textagent.backends import ChatAsTextBackend, LlamaCppBackend, OpenAICompletionsBackend

    def backend(mode: str, api: str = "llamacpp"):
        return BackendFactory(api=api, chat_format="chatml")(mode, Slot("http://h:1"))[0]

    assert isinstance(backend("text"), LlamaCppBackend)
    assert isinstance(backend("constrained"), LlamaCppBackend)
    assert isinstance(backend("native"), ChatAsTextBackend)
    assert isinstance(backend("text", api="completions"), OpenAICompletionsBackend)
    assert isinstance(backend("baseline", api="chat"), ChatAsTextBackend)


def test_the_factory_gives_each_worker_its_own_backend_and_refuses_a_proxy_it_did_not_start():
    import pytest

    from textagent.errors import BackendError

    factory = BackendFactory(chat_format="chatml")
    one, fmt = factory("text", Slot("http://h:1", 0))
    again, _ = factory("text", Slot("http://h:1", 0))
    other, _ = factory("text", Slot("http://h:1", 1))
    assert one is again and one is not other and fmt.name == "chatml"
    with pytest.raises(BackendError, match="no textagent proxy was started"):
        factory("proxy", Slot("http://h:1", 0))
