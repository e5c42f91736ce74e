"""Who may ask the proxy: what a web page could send is refused (another origin's request unless
the proxy has an API key or allows the origin; on loopback, a ``Host`` that is not a loopback name
or the proxy's own, as a DNS-rebound name would be), and the CORS answer an allowed origin gets."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ProxyError
from .exchange import Exchange, error_response

_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".").removeprefix("[").removesuffix("]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def host_of(header: str) -> str:
    """The name in a ``Host`` header (``name:port``, ``[v6]:port``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware refusing what a web page could send: another origin's request (unless the
    proxy has an API key, or the origin is allowed), and, on loopback, a ``Host`` that is neither a
    loopback name nor the proxy's own host (a DNS-rebound name)."""

    def __init__(self, app: ASGIApp, *, host: str, api_key: str | None, allowed_origins: tuple[str, ...]):
        self.app, self.api_key = app, api_key
        name = host_of(host) if host.startswith("[") else host.lower()
        self.own = None if name in _WILDCARD_HOSTS else name.rstrip(".")
        self.loopback = self.own is not None and is_loopback(self.own)
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}

    def refusal(self, headers: Headers) -> ProxyError | None:
        host = headers.get("host")
        if self.loopback and host is not None:
            name = host_of(host).rstrip(".")
            if not (is_loopback(name) or name == self.own):
                return ProxyError(
                    403,
                    f"the Host {host[:80]!r} is not this proxy's: it answers on loopback "
                    "names only (localhost, 127.0.0.1, ::1)",
                    code="host_not_allowed",
                )
        origin = headers.get("origin")
        if origin is None or self.api_key is not None or "*" in self.origins:
            return None
        if origin.rstrip("/").lower() in self.origins:
            return None
        try:
            name = (urlsplit(origin).hostname or "").rstrip(".")
        except ValueError:
            name = ""
        if name and (is_loopback(name) or name == self.own):
            return None
        return ProxyError(
            403,
            f"requests from the web origin {origin[:80]!r} are not allowed: start the proxy with "
            "--api-key, or allow the origin with --allow-origin",
            code="origin_not_allowed",
        )

    def cors_origin(self, headers: Headers) -> str | None:
        """The ``Access-Control-Allow-Origin`` a request gets: its origin when ``--allow-origin``
        names it ("*": any), else none (a browser then cannot read the answer)."""
        origin = headers.get("origin")
        if origin is None:
            return None
        if "*" in self.origins:
            return "*"
        return origin if origin.rstrip("/").lower() in self.origins else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self.refusal(headers)
        if refused is not None:
            ex = Exchange(Request(scope))
            ex.record["refused"] = refused.code
            ex.done(refused.status, None)
            await error_response(refused)(scope, receive, send)
            return
        allowed = self.cors_origin(headers)
        if scope["method"] == "OPTIONS" and headers.get("access-control-request-method"):
            # a browser's preflight: answered here, for the routes the proxy serves
            ex = Exchange(Request(scope))
            status = 204 if allowed else 403
            ex.done(status, None)
            if allowed is None:
                await error_response(
                    ProxyError(
                        403,
                        "cross-origin requests are allowed only from the origins named with --allow-origin",
                        code="origin_not_allowed",
                    )
                )(scope, receive, send)
                return
            await Response(
                status_code=204,
                headers={
                    "access-control-allow-origin": allowed,
                    "vary": "Origin",
                    "access-control-allow-methods": "GET, POST, OPTIONS",
                    "access-control-allow-headers": "authorization, content-type",
                    "access-control-max-age": "600",
                },
            )(scope, receive, send)
            return
        if allowed is None:
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (b"access-control-allow-origin", allowed.encode("latin-1")),
                        (b"vary", b"Origin"),
                    ],
                }
            await send(message)

        await self.app(scope, receive, with_cors)
