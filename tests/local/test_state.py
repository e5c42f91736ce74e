"""The server `textagent serve` started, as `textagent run` finds it: alive and healthy, or not at all."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from httpfake import FakeServer

from textagent import local


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAGENT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def served(tmp_path, port: int, pid: int, *, prefix_cache: bool = True) -> local.LocalServer:
    """A LocalServer as `textagent serve` leaves it once started (no process of its own here)."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    server = local.LocalServer(model, port=port, prefix_cache=prefix_cache, extra_args=["--mlock"])
    server.model_path, server.chat_format = model, "chatml"
    server.process = SimpleNamespace(pid=pid)  # type: ignore[assignment]
    return server


def test_a_live_healthy_server_is_found_with_what_run_needs(state_dir, tmp_path):
    with FakeServer() as srv:
        srv.json("/health", {"status": "ok"}, repeat=True)
        server = served(tmp_path, srv.port, os.getpid())
        local.write_state(server.state())
        state = local.running_server()
        assert state is not None
        assert state["url"] == srv.url and state["chat_format"] == "chatml"
        assert state["model"] == str(tmp_path / "m.gguf") and state["extra_args"] == "--mlock"
        assert state["prefix_identity"] == server.model_identity()
        local.clear_state()
        assert local.running_server() is None
        assert not (state_dir / "server.json").exists()


def test_a_server_still_loading_is_not_reused(state_dir, tmp_path):
    with FakeServer() as srv:
        srv.add("/health", status=503, json={"error": {"message": "Loading model"}}, repeat=True)
        local.write_state(served(tmp_path, srv.port, os.getpid()).state())
        assert local.running_server() is None


def test_a_dead_server_is_not_reused(state_dir, tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with FakeServer() as srv:  # something answers on its port, but the process that wrote the state is gone
        srv.json("/health", {"status": "ok"}, repeat=True)
        local.write_state(served(tmp_path, srv.port, gone.pid).state())
        assert local.running_server() is None


@pytest.mark.parametrize("text", ["", "{not json", '{"pid": "x", "url": "http://127.0.0.1:1"}', '{"url": "u"}'])
def test_a_broken_state_file_means_no_server(state_dir, text):
    state_dir.mkdir(parents=True)
    (state_dir / "server.json").write_text(text)
    assert local.running_server() is None


def test_no_state_file_means_no_server(state_dir):
    assert local.running_server() is None
    local.clear_state()  # nothing to clear is fine


def test_a_server_started_without_the_prefix_cache_gives_none(tmp_path):
    backend = SimpleNamespace(prefix_cache="untouched")
    server = served(tmp_path, 1, os.getpid(), prefix_cache=False)
    state = {"url": server.url, "prefix_identity": ""}
    assert local.served_prefix_cache(state, backend) is None
    assert backend.prefix_cache == "untouched"


def test_repack_crash_notes_are_kept_per_binary_and_cpu_and_an_unreadable_file_is_none(state_dir, tmp_path):
    from textagent.local import state

    one, two = tmp_path / "one", tmp_path / "two"
    one.write_text("a binary")
    two.write_text("another")
    assert local.repack_crashes() == [] and state.repack_crash(one) is None
    state.remember_repack_crash(one, tmp_path / "one.log")
    state.remember_repack_crash(two, tmp_path / "two.log")
    state.remember_repack_crash(one, tmp_path / "one-again.log")  # replaces its own note
    assert [n["log"] for n in local.repack_crashes()] == [str(tmp_path / "two.log"), str(tmp_path / "one-again.log")]
    assert state.repack_crash(one)["cpu"] == state.repack_crash(two)["cpu"]
    one.write_text("a binary, rebuilt")  # another size and time: another binary
    assert state.repack_crash(one) is None and state.repack_crash(two) is not None
    (state_dir / "repack-crashes.json").write_text("{not json")
    assert local.repack_crashes() == [] and state.repack_crash(two) is None
    assert local.forget_repack_crashes() == 0 and not (state_dir / "repack-crashes.json").exists()
