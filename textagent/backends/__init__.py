"""Backends: where completions come from. Each HTTP backend owns one requests.Session."""
from .base import Backend, Capabilities, Completion, Usage
from .chat import ChatAsTextBackend
from .http_settings import HttpSettings
from .llamacpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAICompletionsBackend
from .scripted import ScriptedBackend

__all__ = ["Backend", "Capabilities", "Completion", "HttpSettings", "Usage", "ScriptedBackend", "LlamaCppBackend",
           "OpenAICompletionsBackend", "ChatAsTextBackend", "OllamaBackend"]
