"""The agent's modes: how the model is asked for a reply and how the reply is read.

Agent(backend, tools, mode="text")             # the text protocol (default)
Agent(backend, tools, mode="constrained")      # the text protocol under a GBNF grammar
Agent(backend, tools, mode="native")           # the server's function calling
Agent(backend, tools, mode="native+fallback")  # ... reading calls left in the content
Agent(backend, tools, mode=ConstrainedMode(max_calls=1))   # a configured mode object
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Conversation, FormatError, Mode, ModeContext, Needs, RunsTools, fixed_part, needs_of
from .constrained import ConstrainedMode
from .native import NativeMode
from .text import EarlyStop, TextExchange, TextMode

__all__ = [
    "MODES",
    "ConstrainedMode",
    "Conversation",
    "EarlyStop",
    "FormatError",
    "Mode",
    "ModeContext",
    "NativeMode",
    "Needs",
    "RunsTools",
    "TextExchange",
    "TextMode",
    "fixed_part",
    "get_mode",
    "mode_needs",
]

#: Mode names and what builds them.
MODES: dict[str, Callable[[], Mode]] = {
    "text": TextMode,
    "constrained": ConstrainedMode,
    "native": NativeMode,
    "native+fallback": lambda: NativeMode(fallback=True),
}


def get_mode(mode: Any) -> Mode:
    """A fresh mode object for a name in MODES; a mode object is returned as is."""
    if isinstance(mode, str):
        try:
            return MODES[mode]()
        except KeyError:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}") from None
    if isinstance(mode, Mode):
        return mode
    raise TypeError(f"mode must be a name ({', '.join(MODES)}) or a mode object, not {type(mode).__name__}")


def mode_needs(mode: Any) -> Needs:
    """What a mode (a name in MODES or a mode object) needs of its backend: chat, grammar, tools."""
    return needs_of(get_mode(mode))
