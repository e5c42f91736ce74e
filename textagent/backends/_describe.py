"""Short descriptions for the backends' error messages: excerpts, URL paths, sizes, and the
cause of a ``requests`` / ``urllib3`` failure in a few words."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator

import requests
import urllib3.exceptions

__all__ = [
    "BODY_EXCERPT_CHARS",
    "MESSAGE_EXCERPT_CHARS",
    "excerpt",
    "failure_reason",
    "size_text",
    "unreachable",
    "url_path",
]

BODY_EXCERPT_CHARS = 2000  # kept in BackendHTTPError.body
MESSAGE_EXCERPT_CHARS = 300  # quoted in exception messages


def excerpt(text: str, limit: int = MESSAGE_EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def size_text(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def url_path(url: str) -> str:
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (``__cause__``, urllib3's ``reason``, wrapped args)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        nxt = cur.__cause__ or cur.__context__
        if nxt is None and isinstance(getattr(cur, "reason", None), BaseException):
            nxt = cur.reason  # type: ignore[attr-defined]
        if nxt is None:
            nxt = next((a for a in cur.args if isinstance(a, BaseException)), None)
        cur = nxt


def unreachable(exc: BaseException) -> bool:
    """True when no connection could be made at all (refused, DNS, connect timeout)."""
    return any(
        isinstance(
            e,
            (
                ConnectionRefusedError,
                socket.gaierror,
                requests.exceptions.ConnectTimeout,
                urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ConnectTimeoutError,
            ),
        )
        for e in _causes(exc)
    )


def failure_reason(exc: BaseException | None) -> str:
    """A short cause for a requests/urllib3 exception, e.g. 'connection refused'."""
    if exc is None:
        return "unknown error"
    for cur in _causes(exc):
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(cur, socket.gaierror):
            return "host name not found"
        if isinstance(cur, requests.exceptions.ConnectTimeout) or (
            isinstance(cur, urllib3.exceptions.ConnectTimeoutError)
            and not isinstance(cur, urllib3.exceptions.NewConnectionError)
        ):
            return "connect timeout: nothing answered"
        if isinstance(cur, http.client.RemoteDisconnected):
            return "the server closed the connection without answering"
    text = str(exc)
    return excerpt(text, 200) if text else type(exc).__name__
