"""The requests between their body and an upstream slot, waiting on the event loop in arrival order."""

from __future__ import annotations

import threading
from collections import deque

import anyio

from .errors import Cancelled, ProxyError
from .upstream import Upstream


class _Waiter:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = anyio.Event()


class SlotQueue:
    """The requests between their body and an upstream slot, on the event loop: at most
    ``size`` at once, and the slots handed out in arrival order."""

    def __init__(self, upstream: Upstream, size: int):
        self.upstream, self.size = upstream, size
        self.admitted = 0
        self.waiters: deque[_Waiter] = deque()

    def admit(self) -> None:
        if self.admitted >= self.size:
            raise ProxyError(503, f"the proxy has {self.size} requests waiting already; retry later", code="proxy_busy")
        self.admitted += 1

    def leave(self) -> None:
        self.admitted -= 1

    async def slot(self, key: str, cancelled: threading.Event) -> int:
        """A slot for the conversation ``key``; Cancelled if the client goes away first, 503
        after the upstream's ``slot_wait``."""
        waiter = _Waiter()
        self.waiters.append(waiter)
        deadline = anyio.current_time() + self.upstream.config.slot_wait
        try:
            while True:
                if cancelled.is_set():
                    raise Cancelled()
                if self.waiters[0] is waiter:
                    slot = self.upstream.try_acquire(key)
                    if slot is not None:
                        return slot
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise ProxyError(503, "every upstream slot is busy; retry later", code="upstream_busy")
                with anyio.move_on_after(min(left, 0.2)):  # also: look at `cancelled` now and then
                    await waiter.event.wait()
                waiter.event = anyio.Event()
        finally:
            self.waiters.remove(waiter)
            self.wake()

    def release(self, slot: int) -> None:
        self.upstream.release(slot)
        self.wake()

    def wake(self) -> None:
        if self.waiters:
            self.waiters[0].event.set()
