"""A scripted backend that streams: each reply's text is handed to ``on_text`` whole, as a server
that streams in one piece would (the tests of what a stream shows)."""

from __future__ import annotations

from typing import Any

from textagent.backends.base import Completion
from textagent.backends.scripted import ScriptedBackend


class StreamingScripted(ScriptedBackend):
    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, **options: Any) -> Completion:
        completion = super().complete(prompt, stop=stop, max_tokens=max_tokens, **options)
        if options.get("on_text") is not None:
            options["on_text"](completion.text)
        return completion
