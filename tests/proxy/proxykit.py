"""Shared by the proxy tests: a proxy in front of a scripted llama.cpp upstream (tests/httpfake.py)."""

from __future__ import annotations

import pytest
from httpfake import FakeServer

from textagent.proxy import ProxyConfig, ProxyServer, Upstream, UpstreamConfig

#: The chat-completions tool most proxy tests offer, and the question that calls it.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]
#: A tool with a closed schema of two strings, for the tests of calls and repairs.
GREP = {
    "type": "function",
    "function": {
        "name": "grep",
        "description": "Search a file for a pattern.",
        "parameters": {
            "type": "object",
            "properties": {"file_name": {"type": "string"}, "pattern": {"type": "string"}},
            "required": ["file_name", "pattern"],
            "additionalProperties": False,
        },
    },
}


def said(text: str, stop_type: str = "eos") -> dict:
    """A llama.cpp /completion answer with the given text."""
    return {
        "content": text,
        "stop_type": stop_type,
        "tokens_evaluated": 100,
        "tokens_predicted": 12,
        "timings": {"prompt_n": 40, "cache_n": 60, "predicted_n": 12},
    }


def start(srv: FakeServer, *, endpoint: str | None = None, **config) -> ProxyServer:
    """A proxy in front of ``srv`` (or ``endpoint``), started and ready; ``config`` is ProxyConfig's."""
    up = Upstream(
        UpstreamConfig(
            endpoint=endpoint or srv.url,
            chat_format="chatml",
            parallel=config.pop("parallel", 1),
            slots=config.pop("slots", ()),
            timeout=config.pop("timeout", 5),
            slot_wait=config.pop("slot_wait", 600),
        )
    )
    proxy = ProxyServer(up, ProxyConfig(**config)).start()
    assert up.wait(10) and up.state == "ready", up.detail
    return proxy


@pytest.fixture
def upstream():
    """A scripted llama.cpp upstream that answers /health."""
    with FakeServer() as srv:
        srv.json("/health", {"status": "ok"}, repeat=True)
        yield srv


@pytest.fixture
def proxy(upstream):
    """A proxy (two repairs) in front of ``upstream``."""
    server = start(upstream, max_repairs=2)
    yield server
    server.stop()
