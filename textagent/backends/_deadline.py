"""A run's deadline for the requests made inside it (Agent's ``max_seconds``): their connect and
read timeouts are cut to the time left, and bodies and streams are read no longer than that."""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

from ..errors import BackendTimeout, RunTimeLimit

__all__ = ["request_deadline"]

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("textagent_request_deadline", default=None)


@contextlib.contextmanager
def request_deadline(deadline: float | None) -> Iterator[None]:
    """Requests made inside the block end by ``deadline`` (a ``time.monotonic()`` value; None:
    no deadline): their timeouts are cut to the time left and bodies and streams are read no
    longer than that. Past it they raise RunTimeLimit (a BackendTimeout)."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left() -> float | None:
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def _timed_out(message: str, url: str, retries: int, *, time_limit: bool = False) -> BackendTimeout:
    """RunTimeLimit when it is the run's deadline (``time_limit``), else the server's silence."""
    return (RunTimeLimit if time_limit else BackendTimeout)(message, url=url, retries=retries)
