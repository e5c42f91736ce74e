"""``textagent proxy``: an OpenAI-compatible function-calling endpoint in front of a model server
that has none. Needs the ``proxy`` extra (starlette, uvicorn). See docs/proxy.md."""
from __future__ import annotations

from .app import REPAIRS_HEADER, ProxyConfig, create_app
from .server import ProxyServer
from .upstream import Upstream, UpstreamConfig

__all__ = ["ProxyConfig", "ProxyServer", "Upstream", "UpstreamConfig", "create_app", "REPAIRS_HEADER"]
