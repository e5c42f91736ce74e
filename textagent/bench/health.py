"""Is an endpoint alive? Asked once per endpoint before a bench run sends episodes to it.

llama.cpp answers ``GET /health`` (a server still loading its model is waited for); other
APIs get the cheapest request they have: ``GET /v1/models`` (OpenAI-compatible) or
``GET /api/version`` (Ollama). Any answer but a server error or a refused key means alive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import BackendConnectionError, BackendError, BackendHTTPError, BackendTimeout

__all__ = ["DeadEndpoint", "check_endpoint"]

log = logging.getLogger(__name__)

_PROBES = {"completions": "/models", "chat": "/models", "ollama": "/api/version"}


class DeadEndpoint(BackendError):
    """The endpoint does not answer, answers with a server error, or refuses the key."""


def check_endpoint(
    url: str,
    api: str,
    *,
    api_key: str | None = None,
    timeout: float = 10.0,
    load_timeout: float = 300.0,
    on_wait: Callable[[str], Any] | None = None,
) -> None:
    """Raise DeadEndpoint, saying what is wrong and what to do, unless ``url`` answers."""
    from ..backends import connect

    spec = (min(timeout, 5.0), timeout)
    try:
        if api == "llamacpp":
            server = connect("llamacpp", url, api_key=api_key, timeout=spec, retries=0)
            try:
                server.health()
            except BackendHTTPError as exc:
                if exc.status != 503:
                    raise
                server.wait_healthy(load_timeout, on_wait)  # loading the model
            return
        # the probe asks no model: any name will do for Ollama; the key goes to OpenAI-style servers only
        backend = (
            connect("ollama", url, model="-", timeout=spec, retries=0)
            if api == "ollama"
            else connect("completions", url, api_key=api_key, timeout=spec, retries=0)
        )
        backend.probe(_PROBES[api])
    except BackendHTTPError as exc:
        if exc.status in (401, 403):
            raise DeadEndpoint(
                f"{url} refused the API key (HTTP {exc.status}); pass --api-key or set $OPENAI_API_KEY", url=url
            ) from exc
        if exc.status >= 500:
            raise DeadEndpoint(f"{url} is not healthy: {exc}", url=url) from exc
        log.info("%s answered the health probe with HTTP %d: alive", url, exc.status)
    except (BackendConnectionError, BackendTimeout) as exc:
        raise DeadEndpoint(
            f"{url} is not answering ({exc}); start the server or fix --endpoint/--api", url=url
        ) from exc
