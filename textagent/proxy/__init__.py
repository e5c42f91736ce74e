"""``textagent proxy``: an OpenAI-compatible function-calling endpoint in front of a model server
that has none. Needs the ``proxy`` extra (starlette, uvicorn). See docs/proxy.md.

The names below are imported on first use, so that ``textagent proxy`` can say which extra is
missing instead of failing on import."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["FAILURE_HEADER", "REPAIRS_HEADER", "ProxyConfig", "ProxyServer", "Upstream", "UpstreamConfig", "create_app"]

_WHERE = {
    "ProxyConfig": "app",
    "create_app": "app",
    "FAILURE_HEADER": "app",
    "REPAIRS_HEADER": "app",
    "ProxyServer": "server",
    "Upstream": "upstream",
    "UpstreamConfig": "upstream",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
