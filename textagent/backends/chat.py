"""Chat-only OpenAI-compatible endpoints: ``POST /v1/chat/completions``.

``ChatAsTextBackend.complete()`` sends the conversation as messages **without** ``tools`` and
returns the reply's text, which the agent parses with the text protocol. ``chat()`` is the
native function-calling path: it sends ``tools`` and returns the raw assistant message.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BackendResponseError
from ._payload import llama_timings, openai_usage
from .base import Completion
from .openai import _finish, _OpenAIBase

__all__ = ["ChatAsTextBackend"]


def _content_text(content: Any) -> str | None:
    """Message content as text: a string, null (tool calls only) or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return None


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if messages is None:
        raise TypeError(
            "ChatAsTextBackend.complete() needs the conversation as messages=[{'role': ..., 'content': ...}, ...] "
            "(the same conversation the prompt was rendered from); a chat endpoint cannot take a raw prompt"
        )
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise TypeError(
            f"messages must be a non-empty list of {{'role', 'content'}} dicts, got {type(messages).__name__}"
        )
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise TypeError(f"messages[{i}] must be a dict with a 'role' string, got {message!r:.120}")
        out.append(dict(message))
    return out


class ChatAsTextBackend(_OpenAIBase):
    """Text-protocol agents on chat-only endpoints (``/v1/chat/completions``, no ``tools``).

    ``complete(prompt, stop=..., max_tokens=..., messages=[...])``: ``messages`` is required
    (the agent passes the conversation; ``prompt`` is ignored, the server applies its own chat
    template). Stop sequences, temperature, seed, ``max_tokens`` (always sent) and streaming
    (SSE ``delta.content`` until ``[DONE]``; ``on_text`` for early stop) work as in
    OpenAICompletionsBackend, and so does ``grammar_field`` (llama.cpp's chat endpoint accepts
    ``"grammar"``); without it a ``grammar`` option raises ModeNotSupported.

    ``chat(messages, tools=..., max_tokens=...)`` is for native function calling: it returns a
    Completion whose ``message`` is the assistant message as the server sent it (including
    ``tool_calls``) and whose ``text`` is its content (or ""). It does not stream.
    """

    # what Agent(..., **options) may pass to complete() (see Backend)
    request_options = frozenset({"temperature", "seed", "stream", "on_text", "id_slot", "grammar"})

    endpoint = "/chat/completions"
    _chat = True

    def _piece(self, choice: Mapping[str, Any]) -> Any:
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            return ""
        return _content_text(delta.get("content"))

    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        messages = _check_messages(options.get("messages"))
        stream, on_text = self._want_stream(self.stream, options)
        payload = self._base_payload(stop=stop, max_tokens=max_tokens, options=options)
        payload["messages"] = messages
        if options.get("id_slot") is not None:  # llama.cpp's chat endpoint pins the slot too
            payload["id_slot"] = options["id_slot"]
        self._stream_flags(payload, stream)
        payload.update(self.params)
        return self._generate(self.endpoint, payload, stream, on_text)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = "auto",
        max_tokens: int,
        stop: Sequence[str] | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        grammar: str | None = None,
        **extra: Any,
    ) -> Completion:
        """One non-streaming chat request, with ``tools`` if given (native function calling).

        ``extra`` fields are merged into the request body (e.g. ``parallel_tool_calls=False``).
        """
        options: dict[str, Any] = {"temperature": temperature, "grammar": grammar}
        if seed is not None:
            options["seed"] = seed
        payload = self._base_payload(stop=stop, max_tokens=max_tokens, options=options)
        payload["messages"] = _check_messages(messages)
        if tools:
            payload["tools"] = [dict(t) for t in tools]
            if tool_choice is not None:
                payload["tool_choice"] = tool_choice
        payload["stream"] = False
        payload.update(self.params)
        payload.update(extra)
        return self._generate(self.endpoint, payload, False, None)

    def _from_json(self, data: Any, url: str, retries: int, started: float) -> Completion:
        choice = self._first_choice(data, url, retries)
        message = choice.get("message")
        if not isinstance(message, Mapping):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} answered /chat/completions without a message in choices[0]",
                url=url,
                retries=retries,
            )
        text = _content_text(message.get("content"))
        if text is None:
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent a message whose content is neither text nor null",
                url=url,
                retries=retries,
            )
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, list):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent 'tool_calls' that is not a list",
                url=url,
                retries=retries,
            )
        stop_reason = choice.get("stop_reason")
        return Completion(
            text=text,
            finish_reason=_finish(choice.get("finish_reason")),
            stop_word=stop_reason if isinstance(stop_reason, str) and stop_reason else None,
            usage=openai_usage(data.get("usage"), data.get("timings")),
            timings={**llama_timings(data.get("timings")), "wall_ms": (time.perf_counter() - started) * 1000},
            message=dict(message),
            retries=retries,
        )
