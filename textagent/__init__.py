"""textagent: LLM agents on models without native function calling.

The model writes ``TOOL: name ARGS: {...}`` lines; a Lark grammar parses them; a reply that
does not parse goes back to the model as a precise error so it can correct itself.
"""

from typing import Any as _Any

from . import _lazy
from .errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendResponseError,
    BackendTimeout,
    LocalServerError,
    ModeNotSupported,
    ScriptExhausted,
    TextagentError,
    ToolArgumentError,
)

# Loaded when first used (PEP 562), so `textagent --version` and `--help` do not import
# lark, jsonschema and requests: name -> the module that defines it.
_LAZY = {
    **dict.fromkeys(["STOP_REASONS", "Agent", "Result", "Step"], ".agent"),
    **dict.fromkeys(
        [
            "Backend",
            "ChatAsTextBackend",
            "Completion",
            "LlamaCppBackend",
            "OllamaBackend",
            "OpenAICompletionsBackend",
            "ScriptedBackend",
            "Usage",
        ],
        ".backends",
    ),
    **dict.fromkeys(["ParseError", "Reply", "ToolCall", "parse_reply", "render_call"], ".protocol"),
    "ChatFormat": ".templates",
    "Retry": ".retry",
    "AgentConfig": ".config",
    **dict.fromkeys(["Example", "Tool", "ToolOutcome", "ToolSet", "tool"], ".tools"),
    **dict.fromkeys(["Trace", "load_trace", "load_traces"], ".trace"),
}


def __getattr__(name: str) -> _Any:
    if name == "__version__":  # importlib.metadata costs 40 ms: read when asked (`--help` does not)
        value = globals()["__version__"] = _version()
        return value
    return _lazy.load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


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


__all__ = [
    "STOP_REASONS",
    # the loop
    "Agent",
    "AgentConfig",
    # backends
    "Backend",
    "BackendConnectionError",
    "BackendError",
    "BackendHTTPError",
    "BackendResponseError",
    "BackendTimeout",
    "ChatAsTextBackend",
    "ChatFormat",
    "Completion",
    "Example",
    "LlamaCppBackend",
    "LocalServerError",
    "ModeNotSupported",
    "OllamaBackend",
    "OpenAICompletionsBackend",
    "ParseError",
    "Reply",
    "Result",
    "Retry",
    "ScriptExhausted",
    "ScriptedBackend",
    "Step",
    # errors
    "TextagentError",
    "Tool",
    "ToolArgumentError",
    "ToolCall",
    "ToolOutcome",
    "ToolSet",
    "Trace",
    "Usage",
    "__version__",
    # traces
    "load_trace",
    "load_traces",
    # the protocol
    "parse_reply",
    "render_call",
    # tools
    "tool",
]
