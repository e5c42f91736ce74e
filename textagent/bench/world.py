"""The world of one bench episode: its lights, its bookings and thermostats, its call counters and a
frozen clock. Episodes run concurrently, so each gets its own ``Env`` and tools bound to it
(``bench.suite_tools``); nothing is shared between episodes."""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..toolkits import demo
from ..tools import Tool

__all__ = ["FROZEN_NOW", "Env", "counted"]

# The bench clock: Saturday 14 June 2025, 12:00 UTC (Paris 14:00, Tokyo 21:00, New York 08:00).
FROZEN_NOW = _dt.datetime(2025, 6, 14, 12, 0, 0, tzinfo=_dt.timezone.utc)


@dataclass
class Env:
    """The world of one episode: light states, per-tool call counts, the clock."""

    lights: dict[str, bool] = field(default_factory=dict)
    now: _dt.datetime = FROZEN_NOW
    calls: dict[str, int] = field(default_factory=dict)
    bookings: list[dict[str, Any]] = field(default_factory=list)
    thermostats: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.lights = {**{room: False for room in demo.ROOMS}, **{k.lower(): bool(v) for k, v in self.lights.items()}}

    def count(self, name: str) -> int:
        """Count one more call of ``name``; returns how many there have been, this one included."""
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            return self.calls[name]

    def state(self) -> dict[str, Any]:
        return {
            "lights": dict(self.lights),
            "calls": dict(self.calls),
            "bookings": list(self.bookings),
            "thermostats": dict(self.thermostats),
        }


def counted(env: Env, tool: Tool, fn: Callable[..., Any] | None) -> Tool:
    """``tool`` (same name, description, schema) running ``fn`` and counting its calls in ``env``."""
    if fn is None:
        raise ValueError(f"tool {tool.name} has no function to run")

    def run(**kwargs: Any) -> Any:
        env.count(tool.name)
        return fn(**kwargs)

    return Tool(tool.name, tool.description, tool.parameters, fn=run)
