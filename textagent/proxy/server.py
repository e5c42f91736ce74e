"""Serving the app with uvicorn: in the foreground (``textagent proxy``) or in a thread
(``ProxyServer``, for tests and for embedding the proxy in a program)."""
from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from .app import ProxyConfig, create_app
from .upstream import Upstream

__all__ = ["ProxyServer", "uvicorn_config"]


def uvicorn_config(upstream: Upstream, config: ProxyConfig, *, host: str, port: int) -> uvicorn.Config:
    # uvicorn's own access log is replaced by the proxy's structured one
    return uvicorn.Config(create_app(upstream, config, host=host), host=host, port=port, access_log=False,
                          log_level="warning",
                          timeout_keep_alive=30, timeout_graceful_shutdown=10)


class ProxyServer:
    """The proxy on ``host:port`` (0: a free port) in a background thread; ``url`` once started.

    >>> with ProxyServer(Upstream(UpstreamConfig(endpoint="http://127.0.0.1:8080"))) as proxy:
    ...     OpenAI(base_url=proxy.url + "/v1", api_key="-")
    """

    def __init__(self, upstream: Upstream, config: ProxyConfig | None = None, *, host: str = "127.0.0.1",
                 port: int = 0):
        self.upstream, self.config = upstream, config or ProxyConfig()
        self._server = uvicorn.Server(uvicorn_config(upstream, self.config, host=host, port=port))
        self._thread = threading.Thread(target=self._server.run, name="textagent-proxy", daemon=True)
        self.url = ""

    def start(self, timeout: float = 30) -> "ProxyServer":
        self.upstream.start()
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the proxy did not start listening")
            time.sleep(0.02)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(15)
        self.upstream.stop()

    def __enter__(self) -> "ProxyServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
