from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from httpfake import FakeServer  # noqa: E402

from textagent.toolkits import demo  # noqa: E402


@pytest.fixture
def fake_server():
    """A scripted HTTP server on 127.0.0.1 (see tests/httpfake.py); stopped after the test."""
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _lights():
    demo.reset_lights()
    yield
    demo.reset_lights()
