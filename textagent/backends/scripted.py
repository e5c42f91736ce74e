"""A deterministic backend: replies given up front, prompts recorded. For tests and demos."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ScriptExhausted
from .base import REQUEST_OPTIONS, Capabilities, Completion, Usage

__all__ = ["ScriptedBackend"]

Reply = str | Completion | Exception | Callable[[str], "str | Completion"]


class ScriptedBackend:
    """Return the given replies in order and record every prompt in ``.prompts``.

    A reply may be a string, a ready ``Completion``, an exception instance (raised, to
    simulate a backend failure) or a callable taking the prompt and returning either.
    Asking for more replies than were given raises ``ScriptExhausted``.

    Stop sequences are honoured like a real server would (the text is cut before the first
    one) unless ``honour_stop=False``, which simulates a server that ignores ``stop``.

    ``capabilities``: by default it takes a grammar (recorded in ``.calls`` with the other
    options; the replies are the script's), has no ``chat()`` and does not stream (``on_text``
    is never called). Pass others to stand in for a backend that lacks or has them.
    """

    request_options = REQUEST_OPTIONS  # it stands in for any of textagent's backends

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        honour_stop: bool = True,
        capabilities: Capabilities = Capabilities(grammar=True),  # noqa: B008 - a frozen value
    ):
        self.replies: list[Reply] = list(replies)
        self.capabilities = capabilities
        self.honour_stop = honour_stop
        self.prompts: list[str] = []
        self.calls: list[dict[str, Any]] = []

    @property
    def remaining(self) -> int:
        return len(self.replies) - len(self.prompts)

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, **options: Any) -> Completion:
        index = len(self.prompts)
        self.prompts.append(prompt)
        self.calls.append({"stop": list(stop), "max_tokens": max_tokens, **options})
        if index >= len(self.replies):
            raise ScriptExhausted(
                f"ScriptedBackend ran out of replies: it was given {len(self.replies)} and asked for reply {index + 1}"
            )
        started = time.perf_counter()
        reply = self.replies[index]
        if callable(reply) and not isinstance(reply, Completion):
            reply = reply(prompt)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Completion):
            return reply
        text, stop_word = str(reply), None
        if self.honour_stop:
            cuts = [(text.find(s), s) for s in stop if s and s in text]
            if cuts:
                at, stop_word = min(cuts)
                text = text[:at]
        # A crude token count (whitespace words) so budgets can be exercised without a model.
        return Completion(
            text=text,
            finish_reason="stop",
            stop_word=stop_word,
            usage=Usage(prompt_tokens=len(prompt.split()), completion_tokens=len(text.split())),
            timings={"wall_ms": (time.perf_counter() - started) * 1000},
        )
