"""Shared fixtures. The real llama-server fixtures skip locally when the server binary or a
model is missing; with TEXTAGENT_REQUIRE_SERVER=1 (set by .ci/run) a missing piece fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from textagent.errors import LocalServerError

if str(Path(__file__).resolve().parent) not in sys.path:  # test helpers: httpfake, gbnfkit
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from httpfake import FakeServer, closed_port_url

REQUIRE_SERVER = os.environ.get("TEXTAGENT_REQUIRE_SERVER") == "1"


def _as_failure(report) -> None:
    """Under TEXTAGENT_REQUIRE_SERVER=1 (CI) a skip is a failure: everything a test needs is
    installed there, so a skipped test is one that silently stopped running."""
    if REQUIRE_SERVER and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under TEXTAGENT_REQUIRE_SERVER=1, where nothing may skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _as_failure(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _as_failure(outcome.get_result())


def _unavailable(reason: str):
    if REQUIRE_SERVER:
        pytest.fail(f"TEXTAGENT_REQUIRE_SERVER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _start(model: str, **kw):
    from textagent.local import MODELS, LocalServer, find_server_binary, model_path
    from textagent.local.models import _verified

    try:
        find_server_binary()
    except LocalServerError as exc:
        _unavailable(str(exc))
    if not _verified(model_path(model), MODELS[model]):
        _unavailable(f"model {model} is not cached; run `textagent models fetch {model}`")
    return LocalServer(model, **kw).start()


@pytest.fixture
def start_server():
    """Start a llama-server of the test's own: ``start_server(model, **LocalServer options)``
    (skips, or fails under TEXTAGENT_REQUIRE_SERVER=1, when the binary or model is missing)."""
    return _start


@pytest.fixture(scope="session")
def qwen_server():
    """The smaller model: llama-server with Qwen2.5-Coder-0.5B-Instruct."""
    server = _start("qwen2.5-coder-0.5b")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def qwen15_server():
    """The embedded default: llama-server with Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)."""
    server = _start("qwen2.5-coder-1.5b")
    yield server
    server.stop()


@pytest.fixture(params=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def seed_server(request):
    """Each shipped Qwen model in turn (the seed scenarios run on both)."""
    return request.getfixturevalue(
        {"qwen2.5-coder-0.5b": "qwen_server", "qwen2.5-coder-1.5b": "qwen15_server"}[request.param]
    )


@pytest.fixture(scope="session")
def smollm_server():
    """SmolLM2-135M: a real model that ignores the protocol."""
    server = _start("smollm2", ctx_size=4096)
    yield server
    server.stop()


@pytest.fixture
def own_smollm_server():
    """A SmolLM2 llama-server of the test's own, for tests that kill it."""
    server = _start("smollm2", ctx_size=2048)
    yield server
    server.stop()


@pytest.fixture
def demo_lights():
    """The demo toolkit's lights as the seeds expect them: the kitchen light on; reset after."""
    from textagent.toolkits import demo

    demo.reset_lights()
    demo.toggle_light("kitchen", True)
    yield demo.lights
    demo.reset_lights()


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
