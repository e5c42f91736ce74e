"""Backends: where completions come from. Each HTTP backend owns one requests.Session."""
from .base import Backend, Completion, Usage
from .scripted import ScriptedBackend

__all__ = ["Backend", "Completion", "Usage", "ScriptedBackend"]
