"""Fixtures of the proxy tests: a scripted upstream and a proxy in front of it."""
from __future__ import annotations

import pytest


@pytest.fixture
def upstream():
    from proxykit import scripted_upstream

    with scripted_upstream() as srv:
        yield srv


@pytest.fixture
def proxy(upstream):
    from proxykit import start

    server = start(upstream, max_repairs=2)
    yield server
    server.stop()
