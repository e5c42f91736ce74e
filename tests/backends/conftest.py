from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from httpfake import FakeServer, closed_port_url  # noqa: E402


@pytest.fixture
def fake_server():
    """A scripted HTTP server on 127.0.0.1 (see tests/httpfake.py); stopped after the test."""
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dead_url() -> str:
    """A URL where nothing listens: connecting is refused."""
    return closed_port_url()
