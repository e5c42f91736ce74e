"""Is an endpoint alive? Asked once per endpoint before a bench run sends episodes to it.

The probe is the Endpoint's (:meth:`~textagent.endpoint.Endpoint.check`): llama.cpp answers
``GET /health`` (a server still loading its model is waited for); other APIs get the cheapest
request they have. Any answer but a server error or a refused key means alive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..endpoint import DeadEndpoint, Endpoint

__all__ = ["DeadEndpoint", "check_endpoint"]


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
    Endpoint(url, api=api, api_key=api_key).check(timeout=timeout, load_timeout=load_timeout, on_wait=on_wait)
