"""Responses in OpenAI's shapes: the ``chat.completion`` object, and the same answer as
``chat.completion.chunk`` server-sent events (role, content or ``tool_calls`` deltas, the
finish reason, usage when ``stream_options.include_usage``, then ``data: [DONE]``).

The answer is streamed once it is known to be usable: a reply is only valid as a whole (the
text protocol's calls are checked after the last line), and the client must never see a call
that a repair replaces."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from ..backends.base import Usage
from ..trace import json_line
from .repair import Answer

__all__ = ["usage_object", "completion_object", "chunks", "sse", "dump"]

_CONTENT_PIECE = 64   # characters of content per delta


def usage_object(usage: Usage) -> dict[str, Any]:
    prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": usage.prompt_cached or 0}}


def completion_object(answer: Answer, *, id: str, model: str, created: int | None = None) -> dict[str, Any]:
    return {"id": id, "object": "chat.completion", "created": created or int(time.time()), "model": model,
            "choices": [{"index": 0, "message": answer.message(), "finish_reason": answer.finish_reason,
                         "logprobs": None}],
            "usage": usage_object(answer.usage)}


def chunks(answer: Answer, *, id: str, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The chunk objects of a streamed answer."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [{"index": 0, "delta": delta, "finish_reason": finish,
                                             "logprobs": None}]}
        if include_usage:
            data["usage"] = None
        return data

    yield chunk({"role": "assistant", "content": "" if not answer.calls else None})
    content = answer.content or ""
    for at in range(0, len(content), _CONTENT_PIECE):
        yield chunk({"content": content[at:at + _CONTENT_PIECE]})
    for index, call in enumerate(answer.calls):
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["name"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": call["arguments"]}}]})
    yield chunk({}, answer.finish_reason)
    if include_usage:
        yield {"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
               "usage": usage_object(answer.usage)}


def dump(data: Any) -> bytes:
    """``data`` as every answer of the proxy is written: compact RFC 8259 JSON that UTF-8 can hold
    (a lone surrogate as its ``\\uXXXX`` escape; a NaN, which no answer should hold, as a string)."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json_line(data).encode("utf-8")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json_line(data).encode("utf-8")


def sse(data: dict[str, Any] | None) -> bytes:
    """One event; None is the closing ``[DONE]``."""
    return b"data: [DONE]\n\n" if data is None else b"data: " + dump(data) + b"\n\n"
