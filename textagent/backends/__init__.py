"""Backends: where completions come from. Each HTTP backend owns one requests.Session."""
from .base import Backend, Completion, Usage
from .chat import ChatAsTextBackend
from .llamacpp import LlamaCppBackend
from .ollama import OllamaBackend
from .openai import OpenAICompletionsBackend
from .scripted import ScriptedBackend

__all__ = ["Backend", "Completion", "Usage", "ScriptedBackend", "LlamaCppBackend", "OpenAICompletionsBackend",
           "ChatAsTextBackend", "OllamaBackend"]
