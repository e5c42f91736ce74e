"""How an HTTP backend talks to its server, in one object shared by every HTTP backend.

    backend = LlamaCppBackend(url, http=HttpSettings(timeout=(5, 600), retries=0, api_key="k"))

The backends still take these settings as keyword arguments (``LlamaCppBackend(url,
timeout=600)``); given beside ``http=...`` they replace the matching fields of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import requests

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "MAX_RESPONSE_BYTES",
    "HttpSettings",
    "TimeoutSpec",
    "normalize_timeout",
]

TimeoutSpec = Union[float, "tuple[float, float]"]

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 300.0
DEFAULT_TIMEOUT: tuple[float, float] = (DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF = 0.25  # seconds; doubles on every retry
MAX_RESPONSE_BYTES = 8 * 1024 * 1024

ACCEPT = "application/json, text/event-stream, application/x-ndjson"


def normalize_timeout(timeout: TimeoutSpec | None) -> tuple[float, float]:
    """``(connect, read)`` seconds from a float (used for both) or a pair; None = the default."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool):
        raise TypeError("timeout must be seconds (float) or a (connect, read) pair, not a bool")
    if isinstance(timeout, (int, float)):
        pair = (float(timeout), float(timeout))
    elif isinstance(timeout, (tuple, list)) and len(timeout) == 2:
        pair = (float(timeout[0]), float(timeout[1]))
    else:
        raise TypeError(f"timeout must be seconds (float) or a (connect, read) pair, got {timeout!r}")
    if not all(t > 0 for t in pair):
        raise ValueError(f"timeouts must be positive, got {timeout!r}")
    return pair


@dataclass(frozen=True)
class HttpSettings:
    """The HTTP settings of a backend; checked and normalised when made.

    ``timeout``: seconds (connect and read) or a ``(connect, read)`` pair; None or left out:
    (5, 300). Stored as the pair. The read timeout is the longest silence tolerated: the wait
    for the response headers (a non-streaming completion sends them only when generation is
    over) and, when streaming, the gap between two events (keep-alive comments are not events).
    Every request has one; inside ``request_deadline`` (what Agent does for ``max_seconds``)
    it is cut to the time left.
    ``retries``: how many times a request is repeated after a connection error or a
    502/503/504 (default 2), with ``backoff * 2**n`` seconds between attempts.
    ``api_key``: sent as a Bearer token. ``headers``: extra request headers (they win over
    the ``Accept`` and ``Authorization`` headers textagent sets).
    ``session``: a ``requests.Session`` to use (not closed by the backend's ``close()``); by
    default each backend creates and owns one.
    ``max_response_bytes``: larger bodies / streams are refused with BackendResponseError.
    """

    timeout: TimeoutSpec | None = DEFAULT_TIMEOUT  # stored as the (connect, read) pair
    retries: int = DEFAULT_RETRIES
    backoff: float = DEFAULT_BACKOFF
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    session: requests.Session | None = field(default=None, compare=False)
    max_response_bytes: int = MAX_RESPONSE_BYTES

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "timeout", normalize_timeout(self.timeout))
        retries = self.retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a non-negative int, got {retries!r}")
        if self.backoff < 0:
            raise ValueError(f"backoff must be >= 0, got {self.backoff!r}")
        set_(self, "backoff", float(self.backoff))
        if self.max_response_bytes <= 0:
            raise ValueError("max_response_bytes must be positive")
        set_(self, "max_response_bytes", int(self.max_response_bytes))
        set_(self, "headers", dict(self.headers or {}))

    @classmethod
    def merged(
        cls, http: HttpSettings | None = None, /, *, caller: str = "HttpSettings.merged()", **options: Any
    ) -> HttpSettings:
        """``http`` (default: the defaults) with the given fields replaced; a field given as
        None is left as it is (None meant "the default" for every one of them). An unknown
        name raises TypeError naming ``caller``."""
        unknown = sorted(set(options) - _FIELDS)
        if unknown:
            raise TypeError(f"{caller} got an unexpected keyword argument {unknown[0]!r}")
        changes = {name: value for name, value in options.items() if value is not None}
        if http is None:
            return cls(**changes)
        return dataclasses.replace(http, **changes) if changes else http

    def replace(self, **changes: Any) -> HttpSettings:
        """A copy with ``changes`` (checked like the original)."""
        return dataclasses.replace(self, **changes)

    def request_headers(self) -> dict[str, str]:
        """The headers every request sends: Accept, Authorization (with an api_key), ``headers``."""
        out = {"Accept": ACCEPT}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        out.update(self.headers)
        return out


_FIELDS = frozenset(f.name for f in dataclasses.fields(HttpSettings))
