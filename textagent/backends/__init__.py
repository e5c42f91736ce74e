"""Backends: where completions come from. Each HTTP backend owns one requests.Session;
``connect(api, url, ...)`` builds the one an endpoint needs."""

from ._deadline import request_deadline
from .base import Backend, Capabilities, Completion, Usage
from .chat import ChatAsTextBackend
from .factory import APIS, api_capabilities, connect
from .http_settings import HttpSettings
from .llamacpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAICompletionsBackend
from .scripted import ScriptedBackend

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
