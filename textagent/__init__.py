"""textagent: LLM agents on models without native function calling.

The model writes ``TOOL: name ARGS: {...}`` lines; a Lark grammar parses them; a reply that
does not parse goes back to the model as a precise error so it can correct itself.
"""
from .agent import STOP_REASONS, Agent, Result, Step
from .backends import (Backend, ChatAsTextBackend, Completion, LlamaCppBackend, OllamaBackend,
                       OpenAICompletionsBackend, ScriptedBackend, Usage)
from .errors import (BackendConnectionError, BackendError, BackendHTTPError, BackendResponseError, BackendTimeout,
                     LocalServerError, ModeNotSupported, ScriptExhausted, TextagentError, ToolArgumentError)
from .protocol import ParseError, Reply, ToolCall, parse_reply, render_call
from .templates import ChatFormat
from .tools import Example, Tool, ToolOutcome, ToolSet, tool
from .trace import Trace, load_trace, load_traces



def _version() -> str:
    """The installed distribution's version; in a source tree that is not installed, pyproject's."""
    from importlib import metadata
    try:
        return metadata.version("textagent")
    except metadata.PackageNotFoundError:
        import re
        from pathlib import Path
        try:
            text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
        except OSError:
            return "0+unknown"
        found = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
        return found.group(1) if found else "0+unknown"


__version__ = _version()

__all__ = [
    # the loop
    "Agent", "Result", "Step", "STOP_REASONS",
    # the protocol
    "parse_reply", "render_call", "Reply", "ToolCall", "ParseError",
    # tools
    "tool", "Tool", "ToolSet", "ToolOutcome", "Example",
    # backends
    "Backend", "Completion", "Usage", "ScriptedBackend", "LlamaCppBackend", "OpenAICompletionsBackend",
    "ChatAsTextBackend", "OllamaBackend", "ChatFormat",
    # traces
    "load_trace", "load_traces", "Trace",
    # errors
    "TextagentError", "BackendError", "BackendConnectionError", "BackendTimeout", "BackendHTTPError",
    "BackendResponseError", "ScriptExhausted", "ModeNotSupported", "ToolArgumentError", "LocalServerError",
    "__version__",
]
