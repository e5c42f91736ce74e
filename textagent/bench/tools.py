"""The tools of a bench episode: the suite's own (``bench.suite_tools``, bound to the episode's
``Env``), ``module:function`` references for user suites, and the tools of MCP servers, started
once a run and shared.

    env = Env(lights={"kitchen": True})
    tools = make_toolset(["get_weather", "multiply", "toggle_light"], env)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from .._lazy import load_reference
from ..toolkits import demo
from ..tools import Tool, ToolSet
from .examples import pick_examples
from .suite_tools import RATES, STOCKS, TOOL_BUILDERS
from .world import FROZEN_NOW, Env

__all__ = [
    "FROZEN_NOW",
    "RATES",
    "STOCKS",
    "TOOL_BUILDERS",
    "Env",
    "make_toolset",
]


def _external(spec: str) -> Tool:
    """``module:function`` (a Tool or a plain function) for user suites."""
    try:
        obj = load_reference(spec)
    except ValueError as exc:
        raise ValueError(f"cannot load tool {spec!r}: {exc}") from None
    return obj if isinstance(obj, Tool) else Tool.from_function(obj)


def check_tool_names(names: Iterable[str]) -> list[str]:
    """The names that are neither bench tools nor ``module:function`` references."""
    return [n for n in names if n not in TOOL_BUILDERS and ":" not in n]


class MCPPool:
    """MCP servers of a bench run, each started once on first use and shared by every episode
    (their ToolSets are safe to call from several workers); ``close()`` stops them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self._sets: dict[Any, ToolSet] = {}

    def toolset(self, server: str | Sequence[str]) -> ToolSet:
        from ..tools.mcp import MCPConnection

        key = server if isinstance(server, str) else tuple(server)
        with self._lock:
            if key not in self._sets:
                self._sets[key] = self._stack.enter_context(MCPConnection(server)).toolset()
            return self._sets[key]

    def close(self) -> None:
        with self._lock:
            self._stack.close()
            self._sets.clear()


MCP_POOL = MCPPool()


def make_toolset(names: Iterable[str], env: Env, mcp: Sequence[Any] = ()) -> ToolSet:
    """A fresh ToolSet of these tools bound to ``env``, plus the tools of the ``mcp`` servers
    (from ``MCP_POOL``); the demo's worked example when it fits."""
    tools: list[Any] = [MCP_POOL.toolset(server) for server in mcp]
    for name in names:
        if name in TOOL_BUILDERS:
            tools.append(TOOL_BUILDERS[name](env))
        elif ":" in name:
            tools.append(_external(name))
        else:
            raise ValueError(f"unknown bench tool {name!r}; known: {', '.join(TOOL_BUILDERS)} (or module:function)")
    names = {n for t in tools for n in (t if isinstance(t, ToolSet) else [t.name])}
    return ToolSet(tools, example=pick_examples(names), max_examples=demo.MAX_EXAMPLES)
