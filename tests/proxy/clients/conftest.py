"""The real-model fixture of the client tests: the proxy in front of the embedded llama-server
with Qwen2.5-Coder-0.5B (tests/conftest.py's qwen_server), for the tests marked integration."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def real_proxy(qwen_server):
    from textagent.proxy import ProxyServer, Upstream, UpstreamConfig

    upstream = Upstream(UpstreamConfig(endpoint=qwen_server.url, chat_format="server", timeout=120))
    with ProxyServer(upstream) as proxy:
        assert upstream.wait(60) and upstream.state == "ready", upstream.detail
        yield proxy
