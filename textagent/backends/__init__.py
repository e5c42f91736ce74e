"""Backends: where completions come from. Each HTTP backend owns one requests.Session;
``connect(api, url, ...)`` builds the one an endpoint needs.

Names load on first use (PEP 562), so that the command line can read the tables here (``APIS``)
without importing ``requests`` and every backend before it has parsed its arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from .. import _lazy

_LAZY = {
    "request_deadline": "._deadline",
    **dict.fromkeys(["Backend", "Capabilities", "Completion", "Usage"], ".base"),
    "ChatAsTextBackend": ".chat",
    **dict.fromkeys(["APIS", "api_capabilities", "connect"], ".factory"),
    "HttpSettings": ".http_settings",
    "LlamaCppBackend": ".llamacpp",
    "OllamaBackend": ".ollama",
    "OpenAICompletionsBackend": ".openai",
    "ScriptedBackend": ".scripted",
}

__all__ = [
    "APIS",
    "Backend",
    "Capabilities",
    "ChatAsTextBackend",
    "Completion",
    "HttpSettings",
    "LlamaCppBackend",
    "OllamaBackend",
    "OpenAICompletionsBackend",
    "ScriptedBackend",
    "Usage",
    "api_capabilities",
    "connect",
    "request_deadline",
]

if _TYPE_CHECKING:
    from ._deadline import request_deadline
    from .base import Backend, Capabilities, Completion, Usage
    from .chat import ChatAsTextBackend
    from .factory import APIS, api_capabilities, connect
    from .http_settings import HttpSettings
    from .llamacpp import LlamaCppBackend
    from .ollama import OllamaBackend
    from .openai import OpenAICompletionsBackend
    from .scripted import ScriptedBackend


def __getattr__(name: str) -> _Any:
    return _lazy.load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
