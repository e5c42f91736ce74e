"""The one place the bench's backends are made: ``BackendFactory`` gives each worker (a server URL
and the slot it pins) its backend for a mode, as the mode's needs say (bench.mode_table)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..backends.factory import api_capabilities
from ..endpoint import Endpoint
from ..errors import BackendError
from ..templates import ChatFormat
from .mode_table import MODES, bench_mode

__all__ = ["MODES", "BackendFactory", "Slot", "mode_availability"]


@dataclass(frozen=True)
class Slot:
    """Where a worker sends its episodes: a server URL and the slot it pins (None: no pinning)."""

    endpoint: str
    slot: int | None = None


def mode_availability(modes: Sequence[str], *, api: str = "llamacpp") -> tuple[list[str], dict[str, str]]:
    """(modes that can run, {mode: why not}) on an endpoint of this API."""
    ok: list[str] = []
    missing: dict[str, str] = {}
    can = api_capabilities(api)
    for mode in modes:
        if mode not in MODES:
            missing[mode] = f"unknown mode; choose from {', '.join(MODES)}"
        elif bench_mode(mode).needs.grammar and not can.grammar:
            missing[mode] = "needs a llama.cpp endpoint (--api llamacpp): it sends a GBNF grammar"
        elif bench_mode(mode).needs.chat and not can.chat:
            missing[mode] = "needs an OpenAI-style /v1/chat/completions endpoint (llama.cpp, --api completions or chat)"
        else:
            ok.append(mode)
    return ok, missing


class BackendFactory:
    """``backend_for(mode, slot) -> (backend, chat_format)`` for real endpoints.

    One backend per (mode, endpoint, slot), i.e. per worker thread, made by the endpoint's
    :class:`~textagent.endpoint.Endpoint` (``endpoints``: the embedded server's is put there by
    the bench; one is made for each other URL); the chat format is learned once per endpoint from
    llama.cpp's ``/apply-template`` (``chat_format="server"``) or named.
    """

    def __init__(
        self,
        *,
        api: str = "llamacpp",
        chat_format: str | ChatFormat = "server",
        model_name: str | None = None,
        api_key: str | None = None,
        timeout: float = 300,
        proxies: Mapping[tuple[str, int | None], str] | None = None,
    ):
        self.api, self.chat_format, self.model_name = api, chat_format, model_name
        self.api_key, self.timeout = api_key, timeout
        # (endpoint, slot) -> the URL of the textagent proxy in front of it (slot None: all slots)
        self.proxies = dict(proxies or {})
        self.endpoints: dict[str, Endpoint] = {}
        self._backends: dict[tuple[str, str, int | None], Any] = {}
        self._lock = threading.Lock()

    def endpoint(self, url: str) -> Endpoint:
        """The Endpoint of ``url`` (made on first use for a URL the bench did not start)."""
        with self._lock:
            if url not in self.endpoints:
                self.endpoints[url] = Endpoint(
                    url,
                    api=self.api,
                    model=self.model_name,
                    api_key=self.api_key,
                    timeout=self.timeout,
                    chat_format=None if self.chat_format == "server" else self.chat_format,
                )
            return self.endpoints[url]

    def __call__(self, mode: str, slot: Slot) -> tuple[Any, ChatFormat]:
        key = (mode, slot.endpoint, slot.slot)
        with self._lock:
            backend = self._backends.get(key)
        if backend is None and bench_mode(mode).starts_proxy:
            from .proxy_client import OpenAIClientChat

            url = self.proxies.get((slot.endpoint, slot.slot)) or self.proxies.get((slot.endpoint, None))
            if url is None:
                raise BackendError(f"mode {mode}: no textagent proxy was started for {slot.endpoint}")
            backend = OpenAIClientChat(url, timeout=self.timeout)
            with self._lock:
                self._backends[key] = backend
        if backend is None:
            backend = self.endpoint(slot.endpoint).connect(chat=bench_mode(mode).needs.chat)
            with self._lock:
                self._backends[key] = backend
        return backend, self.format_for(slot.endpoint)

    def format_for(self, endpoint: str) -> ChatFormat:
        """The chat format the text modes write for ``endpoint`` (learned once)."""
        return self.endpoint(endpoint).chat_format()

    def slots(self, endpoint: str) -> int | None:
        """How many slots a llama.cpp server has (``/props`` total_slots), if it says."""
        return self.endpoint(endpoint).slots()
