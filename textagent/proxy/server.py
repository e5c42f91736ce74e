"""Serving the app with uvicorn: in the foreground (``textagent proxy``) or in a thread
(``ProxyServer``, for tests and for embedding the proxy in a program)."""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import ProxyConfig, create_app
from .upstream import Upstream

__all__ = ["ProxyServer", "uvicorn_config"]


class _HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for a request's headers: a client that trickles them
    (a byte every few seconds, slowloris) is cut off after ``header_timeout`` seconds instead of
    holding a connection for ever. The clock starts with the connection, and again with the first
    byte after each response; it stops once the request line and headers have arrived."""

    header_timeout = 10.0

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._header_timer: Any = None
        self._arm()

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._waiting_for_headers() and not self.transport.is_closing():
            self.transport.close()


def uvicorn_config(upstream: Upstream, config: ProxyConfig, *, host: str, port: int) -> uvicorn.Config:
    protocol = type("HeaderDeadline", (_HeaderDeadline,), {"header_timeout": config.header_timeout})
    # uvicorn's own access log is replaced by the proxy's structured one
    return uvicorn.Config(
        create_app(upstream, config, host=host),
        host=host,
        port=port,
        access_log=False,
        log_level="warning",
        http=protocol,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=10,
    )


class ProxyServer:
    """The proxy on ``host:port`` (0: a free port) in a background thread; ``url`` once started.

    >>> with ProxyServer(Upstream(UpstreamConfig(endpoint="http://127.0.0.1:8080"))) as proxy:
    ...     OpenAI(base_url=proxy.url + "/v1", api_key="-")
    """

    def __init__(
        self, upstream: Upstream, config: ProxyConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ):
        self.upstream, self.config = upstream, config or ProxyConfig()
        self._server = uvicorn.Server(uvicorn_config(upstream, self.config, host=host, port=port))
        self._thread = threading.Thread(target=self._server.run, name="textagent-proxy", daemon=True)
        self.url = ""

    def start(self, timeout: float = 30) -> ProxyServer:
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

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
