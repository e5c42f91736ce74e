"""The ASGI app: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``.

Every answer is JSON (errors in OpenAI's shape, never a traceback); every request is logged as
one JSON line on the ``textagent.proxy.access`` logger and, with a trace directory, written to
``<dir>/<request id>.json``. The upstream work runs in a worker thread while the client's
connection is watched: a client that goes away closes the upstream generation.
"""
from __future__ import annotations

import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import BackendError
from ..trace import json_line
from .convert import ChatRequest, ReplyMemory, message_key, parse_request, transcript
from .errors import ProxyError, error_body, from_backend_error
from .repair import Answer, Cancelled, answer
from .streaming import chunks, completion_object, sse
from .upstream import Upstream

__all__ = ["ProxyConfig", "create_app", "REPAIRS_HEADER"]

log = logging.getLogger(__name__)
access_log = logging.getLogger("textagent.proxy.access")

REPAIRS_HEADER = "x-textagent-repairs"


@dataclass
class ProxyConfig:
    mode: str = "text"                  # text | constrained
    max_repairs: int = 2
    api_key: str | None = None          # clients must send it as a bearer token
    max_body_bytes: int = 4 * 1024 * 1024
    trace_dir: Path | None = None
    body_timeout: float = 60.0          # seconds to receive a request body (slower: 408)


class _Exchange:
    """One request: its id, timing and what the access log and the trace say about it."""

    def __init__(self, request: Request, prefix: str = "req-"):
        self.id = prefix + uuid.uuid4().hex[:24]
        self.started = time.monotonic()
        self.record: dict[str, Any] = {"id": self.id, "method": request.method, "path": request.url.path,
                                       "client": request.client.host if request.client else None}

    def done(self, status: int, trace_dir: Path | None, trace: dict[str, Any] | None = None) -> None:
        self.record.update(status=status, ms=round((time.monotonic() - self.started) * 1000, 1))
        access_log.info(json_line(self.record))
        if trace_dir is not None and trace is not None:
            try:
                (trace_dir / f"{self.id}.json").write_text(json_line({**self.record, **trace}) + "\n",
                                                            encoding="utf-8")
            except OSError as exc:
                log.warning("could not write the trace of %s: %s", self.id, exc)


def _error(exc: ProxyError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def create_app(upstream: Upstream, config: ProxyConfig) -> Starlette:
    memory = ReplyMemory()

    def authorized(request: Request) -> None:
        if config.api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), config.api_key.encode()):
            raise ProxyError(401, "missing or wrong API key: send it as 'Authorization: Bearer <key>'",
                             code="invalid_api_key")

    async def read_json(request: Request) -> Any:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > config.max_body_bytes:
            raise ProxyError(413, f"the request body is larger than {config.max_body_bytes} bytes",
                             code="request_too_large")
        body = bytearray()
        with anyio.move_on_after(config.body_timeout) as scope:   # a client that stops sending
            async for piece in request.stream():
                body += piece
                if len(body) > config.max_body_bytes:
                    raise ProxyError(413, f"the request body is larger than {config.max_body_bytes} bytes",
                                     code="request_too_large")
        if scope.cancelled_caught:
            raise ProxyError(408, f"the request body did not arrive within {config.body_timeout:g} s",
                             code="request_timeout")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise ProxyError(400, "the request body is not valid JSON", code="invalid_json") from None

    async def health(request: Request) -> Response:
        ex = _Exchange(request)
        state = await anyio.to_thread.run_sync(upstream.health)
        ex.done(200, None)
        return JSONResponse({"status": "ok", "upstream": state})

    async def models(request: Request) -> Response:
        ex = _Exchange(request)
        try:
            authorized(request)
        except ProxyError as exc:
            ex.done(exc.status, None)
            return _error(exc)
        ex.done(200, None)
        return JSONResponse({"object": "list", "data": [{"id": upstream.model, "object": "model", "created": 0,
                                                         "owned_by": "textagent"}]})

    async def chat(request: Request) -> Response:
        ex = _Exchange(request, "chatcmpl-")
        trace: dict[str, Any] = {}
        try:
            authorized(request)
            body = await read_json(request)
            chat_request = parse_request(body)
            trace["request"] = body
            ex.record.update(stream=chat_request.stream, tools=len(chat_request.tools),
                             tool_choice=chat_request.tool_choice)
            result, turns = await _run(request, chat_request)
        except ProxyError as exc:
            trace["error"] = exc.body()["error"]
            ex.done(exc.status, config.trace_dir, trace)
            return _error(exc)
        except Cancelled:
            ex.record["client_disconnected"] = True
            ex.done(499, config.trace_dir, trace)
            return Response(status_code=499)
        memory.remember(message_key(turns, result.content,
                                    [(c["name"], json.loads(c["arguments"])) for c in result.calls]), result.turns)
        ex.record.update(repairs=result.repairs, finish_reason=result.finish_reason,
                         prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens)
        model = chat_request.model or upstream.model
        trace.update(repairs=result.repairs, attempts=result.attempts, response=result.message())
        ex.done(200, config.trace_dir, trace)
        headers = {REPAIRS_HEADER: str(result.repairs)}
        if not chat_request.stream:
            return JSONResponse(completion_object(result, id=ex.id, model=model), headers=headers)

        async def events() -> Any:
            for data in chunks(result, id=ex.id, model=model, include_usage=chat_request.include_usage):
                yield sse(data)
            yield sse(None)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={**headers, "cache-control": "no-cache"})

    async def _run(request: Request, chat_request: ChatRequest) -> tuple[Answer, list[dict[str, str]]]:
        """The answer, and the transcript it answered."""
        cancelled = threading.Event()

        def work() -> tuple[Answer, list[dict[str, str]]]:
            upstream.require()
            turns = transcript(chat_request, memory)
            first_user = next((t["content"] for t in turns[1:] if t["role"] == "user"), "")
            with upstream.slot(turns[0]["content"] + first_user) as slot:
                try:
                    return answer(upstream, chat_request, turns, constrained=config.mode == "constrained",
                                  max_repairs=config.max_repairs, slot=slot, cancelled=cancelled), turns
                except BackendError as exc:
                    if cancelled.is_set():
                        raise Cancelled() from None
                    raise from_backend_error(exc) from None

        async def watch() -> None:
            while not cancelled.is_set():
                if await request.is_disconnected():
                    cancelled.set()
                    return
                await anyio.sleep(0.1)

        result: tuple[Answer, list[dict[str, str]]] | None = None
        error: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:   # caught here: the task group would wrap it in an ExceptionGroup
                result = await anyio.to_thread.run_sync(work)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
        assert result is not None
        return result

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: f"no route {request.url.path}; the proxy serves /v1/chat/completions, /v1/models "
                        "and /health",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(status, "internal error")
        return JSONResponse(error_body(status, message), status_code=status)

    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(error_body(500, f"internal error in the proxy ({type(exc).__name__}); see its log"),
                            status_code=500)

    handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
        HTTPException: not_found, Exception: crashed}
    return Starlette(routes=[Route("/health", health, methods=["GET"]),
                             Route("/v1/models", models, methods=["GET"]),
                             Route("/v1/chat/completions", chat, methods=["POST"])],
                     exception_handlers=handlers)
