"""The prefix cache on the real llama-server: a fixed prefix saved, then restored by another
cache object (another process) into a fresh server, and the replies at temperature 0 the
same with and without it."""

from __future__ import annotations

import pytest

from textagent import Agent
from textagent.backends import LlamaCppBackend
from textagent.toolkits import demo

pytestmark = pytest.mark.integration

QUESTION = "What's 17 times 24, then add 100?"


def _run(backend, server):
    agent = Agent(backend, demo.demo_tools(), chat_format=server.chat_format, max_steps=6)
    result = agent.run(QUESTION)
    return [s.raw for s in result.steps], result


def test_replies_are_the_same_restored_saved_or_evaluated(tmp_path, monkeypatch, start_server):
    monkeypatch.setenv("TEXTAGENT_PREFIX_DIR", str(tmp_path))
    server = start_server("qwen2.5-coder-0.5b", ctx_size=4096)
    try:
        plain, _ = _run(LlamaCppBackend(server.url), server)

        backend = LlamaCppBackend(server.url)
        cache = server.prefix_cache(backend)
        saved, result = _run(backend, server)
        assert cache.timing.saved == 1 and len(list(tmp_path.glob("*.bin"))) == 1
        assert result.time_spent()["prefix"] > 0
    finally:
        server.stop()

    # a new server and a new cache object: what another `textagent run` finds
    server = start_server("qwen2.5-coder-0.5b", ctx_size=4096)
    try:
        backend = LlamaCppBackend(server.url)
        cache = server.prefix_cache(backend)
        restored, result = _run(backend, server)
        assert cache.timing.restored == 1 and cache.timing.saved == 0 and cache.timing.tokens_restored > 1000
        # the prefix was not evaluated: only the question's tokens were
        assert result.steps[0].usage.prompt_evaluated < 100
    finally:
        server.stop()
    assert saved == plain and restored == plain
