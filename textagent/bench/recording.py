"""A backend wrapper that keeps every completion it returns: the runner reads their stop words
(a reply cut at ``OBSERVATION`` shows a hallucinated result), the speculative bench their text
and timings."""

from __future__ import annotations

from typing import Any

from ..backends.base import Completion

__all__ = ["Recording"]


class Recording:
    """``backend`` as it is, but each completion of :meth:`complete` is also kept in
    ``completions``, in order."""

    def __init__(self, backend: Any):
        self._backend = backend
        self.completions: list[Completion] = []

    def complete(self, prompt: str, **kwargs: Any) -> Completion:
        completion = self._backend.complete(prompt, **kwargs)
        self.completions.append(completion)
        return completion

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)
