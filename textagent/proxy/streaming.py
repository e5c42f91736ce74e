"""Responses in OpenAI's shapes: the ``chat.completion`` object, and the same answer as
``chat.completion.chunk`` server-sent events (role, content or ``tool_calls`` deltas, the
finish reason, usage when ``stream_options.include_usage``, then ``data: [DONE]``).

An answer's content is streamed while the model writes it, once the reply is known to be an
answer; each call as soon as its line is complete and the call is valid (protocol.ReplyStream): a call
sent stays in the answer, and a repair only adds calls, so the client never sees an invalid one."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..backends.base import Usage
from ..trace import json_line
from .answer import Answer

__all__ = ["ChatChunks", "EventStream", "OnCall", "OnContent", "completion_object", "dump", "sse", "usage_object"]

_CONTENT_PIECE = 64  # characters of content per delta


def usage_object(usage: Usage) -> dict[str, Any]:
    prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": usage.prompt_cached or 0},
    }


def completion_object(answer: Answer, *, id: str, model: str, created: int | None = None) -> dict[str, Any]:
    return {
        "id": id,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": answer.message(), "finish_reason": answer.finish_reason, "logprobs": None}],
        "usage": usage_object(answer.usage),
    }


class ChatChunks:
    """The ``chat.completion.chunk`` events of one streamed answer, as it becomes known: the
    role (with ``content: ""`` when content follows), content pieces, or per call (as each is
    known) one delta with ``id``, ``type`` and ``name`` and one with the ``arguments``, the finish
    reason, a usage
    chunk when ``include_usage``, and ``[DONE]``."""

    def __init__(self, *, id: str, model: str, include_usage: bool):
        self.id, self.model, self.include_usage = id, model, include_usage
        self.created = int(time.time())
        self.calls = 0  # calls sent

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if self.include_usage:
            data["usage"] = None
        return data

    def start(self, content: bool) -> list[bytes]:
        return [sse(self.chunk({"role": "assistant", "content": "" if content else None}))]

    def content(self, piece: str) -> list[bytes]:
        return [
            sse(self.chunk({"content": piece[at : at + _CONTENT_PIECE]})) for at in range(0, len(piece), _CONTENT_PIECE)
        ]

    def call(self, call: dict[str, Any]) -> list[bytes]:
        """One call's deltas: ``id``, ``type`` and ``name``, then the ``arguments``."""
        index, self.calls = self.calls, self.calls + 1
        return [
            sse(
                self.chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            ),
            sse(self.chunk({"tool_calls": [{"index": index, "function": {"arguments": call["arguments"]}}]})),
        ]

    def end(self, answer: Answer) -> list[bytes]:
        out = [piece for call in answer.calls[self.calls :] for piece in self.call(call)]  # those not sent yet
        out.append(sse(self.chunk({}, answer.finish_reason)))
        if self.include_usage:
            out.append(
                sse(
                    {
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "choices": [],
                        "usage": usage_object(answer.usage),
                    }
                )
            )
        return [*out, sse(None)]

    def error(self, body: dict[str, Any]) -> list[bytes]:
        """An error after the stream began (OpenAI streams it as an event with the error body)."""
        return [sse(body), sse(None)]


OnContent = Callable[[str, int], None]  # a piece of content, the repairs so far
OnCall = Callable[[dict[str, Any], int], None]  # a valid call (client names), the repairs so far


class EventStream:
    """The ASGI response of a streamed request, whose status is decided by what comes first: a
    failure before anything is known is an ordinary error response (``fail`` makes it); the
    first piece of content, the first call, or the finished answer, starts a 200 event stream,
    written by ``writer`` (``start``, ``content``, ``call``, ``end``, ``error``: lists of bytes).
    ``run(on_content, on_call)`` answers the request; both may be called from a worker thread.
    ``done(status, answer, error)`` is told how it ended."""

    def __init__(
        self,
        run: Callable[[OnContent, OnCall], Awaitable[Answer]],
        writer: Any,
        *,
        fail: Callable[[Exception], Response],
        error_body: Callable[[Exception], dict[str, Any]],
        headers: dict[str, str],
        done: Callable[[int, Answer | None, Exception | None], None],
    ):
        self.run, self.writer, self.fail, self.error_body = run, writer, fail, error_body
        self.headers, self.done = headers, done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender: MemoryObjectSendStream[tuple[str, Any, int]]  # (kind, value, repairs)
        receiver: MemoryObjectReceiveStream[tuple[str, Any, int]]
        sender, receiver = anyio.create_memory_object_stream(math.inf)

        def put(item: tuple[str, Any, int]) -> None:
            _put(sender, item)

        def on_content(piece: str, repairs: int) -> None:
            anyio.from_thread.run_sync(put, ("content", piece, repairs))

        def on_call(call: dict[str, Any], repairs: int) -> None:
            anyio.from_thread.run_sync(put, ("call", call, repairs))

        async def produce() -> None:
            try:
                result = await self.run(on_content, on_call)
            except Exception as exc:  # written to the client below
                put(("error", exc, 0))
            else:
                put(("done", result, result.repairs))

        started = False

        async def begin(content: bool, repairs: int) -> None:
            nonlocal started
            started = True
            await send(self._start_message(repairs))
            await write(self.writer.start(content))

        async def write(pieces: list[bytes]) -> None:
            await send({"type": "http.response.body", "body": b"".join(pieces), "more_body": True})

        pieces = {"content": self.writer.content, "call": self.writer.call}
        async with anyio.create_task_group() as group:
            group.start_soon(produce)
            async with receiver:
                async for kind, value, repairs in receiver:
                    if kind == "error":
                        if not started:
                            response = self.fail(value)
                            await response(scope, receive, send)
                            self.done(response.status_code, None, value)
                            return
                        if type(value).__name__ != "Cancelled":
                            await write(self.writer.error(self.error_body(value)))
                        self.done(200, None, value)
                        break
                    if not started:
                        await begin(kind == "content", repairs)
                    if kind != "done":  # a piece of content or a call
                        await write(pieces[kind](value))
                        continue
                    await write(self.writer.end(value))
                    self.done(200, value, None)
                    break
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _start_message(self, repairs: int) -> dict[str, Any]:
        """The response's start: 200, an event stream, the repairs it took so far."""
        headers = {
            **self.headers,
            "x-textagent-repairs": str(repairs),
            "content-type": "text/event-stream",
            "cache-control": "no-cache",
        }
        encoded = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        return {"type": "http.response.start", "status": 200, "headers": encoded}


def _put(sender: MemoryObjectSendStream[tuple[str, Any, int]], item: tuple[str, Any, int]) -> None:
    try:
        sender.send_nowait(item)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the response is over (the client went away): nobody reads it


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
