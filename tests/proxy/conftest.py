"""Fixtures of the proxy tests: a scripted upstream and a proxy in front of it."""
from __future__ import annotations

import pytest
from httpfake import FakeServer


@pytest.fixture
def upstream():
    with FakeServer() as srv:
        srv.json("/health", {"status": "ok"}, repeat=True)
        yield srv


@pytest.fixture
def proxy(upstream):
    from proxykit import start

    server = start(upstream, max_repairs=2)
    yield server
    server.stop()
