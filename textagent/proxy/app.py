"""The ASGI app: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` and
``POST /v1/responses`` (responses.py).

Every answer is JSON (errors in OpenAI's shape, never a traceback); every request is logged as
one JSON line on the ``textagent.proxy.access`` logger and, with a trace directory, written to
``<dir>/<request id>.json``.

Nothing that can take long runs on the event loop, so ``/health`` always answers at once:
reading the request and its tools' schemas, and writing the transcript, run in worker threads
of their own; a request waits for an upstream slot on the event loop (in arrival order, holding
no thread: slots.py), at most ``max_queue`` of them (more: 503 ``proxy_busy``); the upstream work runs in a
worker thread while the client's connection is watched: a client that goes away is never sent
upstream, and one that goes away mid-generation closes it.

Browsers are kept out unless asked in (guard.py): a request from a web page of another origin is refused
(403) unless the proxy has an API key or the origin is allowed (``allowed_origins``); on a
loopback address, so is a ``Host`` that is not a loopback name or the proxy's own (DNS
rebinding); and a body must be declared ``application/json`` (415), which no page can send
to another origin without the proxy's consent.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import prompts
from ..errors import BackendError
from ..retry import Retry
from .answer import Answer
from .answering import answer
from .convert import ChatRequest, TooDeep, loads, parse_request
from .errors import Cancelled, ModelFailed, ProxyError, error_body, from_backend_error
from .exchange import JSON, Exchange, error_response
from .guard import Guard
from .memory import ReplyMemory, message_key
from .responses import ResponsesShape, parse_responses
from .slots import SlotQueue
from .streaming import ChatChunks, EventStream, OnCall, OnContent, completion_object
from .transcript import transcript
from .upstream import Upstream

__all__ = ["FAILURE_HEADER", "REPAIRS_HEADER", "ProxyApp", "ProxyConfig", "create_app"]

log = logging.getLogger(__name__)

REPAIRS_HEADER = "x-textagent-repairs"
# set when no reply of the model was usable and the client got an empty message (a plain answer;
# a streamed one has sent its headers by then: the trace says it)
FAILURE_HEADER = "x-textagent-failure"


@dataclass
class ProxyConfig:
    mode: str = "text"  # text | constrained
    max_repairs: int = 2
    api_key: str | None = None  # clients must send it as a bearer token
    max_body_bytes: int = 4 * 1024 * 1024
    trace_dir: Path | None = None
    body_timeout: float = 60.0  # seconds to receive a request body (slower: 408)
    header_timeout: float = 10.0  # seconds to receive a request's headers (slower: closed)
    max_queue: int = 64  # requests read or waiting for a slot at once (more: 503)
    allowed_origins: tuple[str, ...] = ()  # web origins allowed without an API key ("*": any)
    example_style: str = prompts.DEFAULT_EXAMPLE_STYLE  # how placeholder examples read (prompts.EXAMPLE_STYLES)
    example_tool: str = prompts.DEFAULT_EXAMPLE_TOOL  # which tools they show (prompts.EXAMPLE_TOOLS)
    retry: Retry = field(default_factory=Retry)  # what the repair loop does after a failed reply (textagent.retry)

    def __post_init__(self) -> None:
        prompts.example_style(self.example_style)
        prompts.example_tool(self.example_tool)


class _ChatShape:
    """The answer as ``chat.completion`` and ``chat.completion.chunk`` objects."""

    @staticmethod
    def complete(result: Answer, *, id: str, model: str, request: ChatRequest) -> dict[str, Any]:
        return completion_object(result, id=id, model=model)

    @staticmethod
    def writer(*, id: str, model: str, request: ChatRequest) -> ChatChunks:
        return ChatChunks(id=id, model=model, include_usage=request.include_usage)


class ProxyApp:
    """The proxy's state and request handlers: the reply memory, the slot queue, the thread
    pools, and one method per route; :meth:`starlette` is the ASGI app."""

    def __init__(self, upstream: Upstream, config: ProxyConfig):
        self.upstream, self.config = upstream, config
        self.memory = ReplyMemory()
        self.queue = SlotQueue(upstream, config.max_queue)
        self.limiters: dict[str, anyio.CapacityLimiter] = {}

    def starlette(self, host: str = "127.0.0.1") -> Starlette:
        """The ASGI app; ``host`` is the address it listens on (what ``Host`` may name)."""
        handlers: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
            HTTPException: self.not_found,
            Exception: self.crashed,
        }
        return Starlette(
            routes=[
                Route("/health", self.health, methods=["GET"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
            ],
            exception_handlers=handlers,
            middleware=[
                Middleware(Guard, host=host, api_key=self.config.api_key, allowed_origins=self.config.allowed_origins)
            ],
        )

    def limiter(self, name: str) -> anyio.CapacityLimiter:
        # thread pools of their own: waiting requests or a slow health check never take the
        # threads another kind of work needs (anyio's default pool has 40)
        if name not in self.limiters:  # made on the event loop, on first use
            self.limiters[name] = anyio.CapacityLimiter({"cpu": 2, "health": 4, "upstream": 256}[name])
        return self.limiters[name]

    def authorized(self, request: Request) -> None:
        if self.config.api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.config.api_key.encode()):
            raise ProxyError(
                401, "missing or wrong API key: send it as 'Authorization: Bearer <key>'", code="invalid_api_key"
            )

    async def read_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ProxyError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
        body = bytearray()
        with anyio.move_on_after(self.config.body_timeout) as scope:  # a client that stops sending
            async for piece in request.stream():
                body += piece
                if len(body) > limit:
                    raise ProxyError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
        if scope.cancelled_caught:
            raise ProxyError(
                408, f"the request body did not arrive within {self.config.body_timeout:g} s", code="request_timeout"
            )
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise ProxyError(
                415,
                f"the request body must be sent as 'Content-Type: application/json', not "
                f"{kind[:60] or 'without a type'!r}",
                code="unsupported_media_type",
            )
        return bytes(body)

    @staticmethod
    def parse(body: bytes, read: Callable[[Any], ChatRequest]) -> tuple[Any, ChatRequest]:
        try:
            data = loads(body)
        except TooDeep:
            raise ProxyError(400, "the request body is nested too deeply to read", code="invalid_json") from None
        except ValueError:
            raise ProxyError(
                400, "the request body is not valid JSON (RFC 8259: no NaN or Infinity)", code="invalid_json"
            ) from None
        return data, read(data)

    # -- routes -----------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        ex = Exchange(request)
        state = await anyio.to_thread.run_sync(self.upstream.health, limiter=self.limiter("health"))
        ready = state["state"] == "ready"
        ex.done(200 if ready else 503, None)
        return JSON({"status": "ok" if ready else state["state"], "upstream": state}, status_code=200 if ready else 503)

    async def models(self, request: Request) -> Response:
        ex = Exchange(request)
        try:
            self.authorized(request)
        except ProxyError as exc:
            ex.done(exc.status, None)
            return error_response(exc)
        ex.done(200, None)
        return JSON(
            {
                "object": "list",
                "data": [{"id": self.upstream.model, "object": "model", "created": 0, "owned_by": "textagent"}],
            }
        )

    async def chat(self, request: Request) -> Response | EventStream:
        return await self.answering(request, "chatcmpl-", parse_request, _ChatShape)

    async def responses(self, request: Request) -> Response | EventStream:
        return await self.answering(request, "resp_", parse_responses, ResponsesShape)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {
            404: f"no route {request.url.path}; the proxy serves /v1/chat/completions, /v1/responses, "
            "/v1/models and /health",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(status, "internal error")
        return JSON(error_body(status, message), status_code=status)

    async def crashed(self, request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSON(
            error_body(500, f"internal error in the proxy ({type(exc).__name__}); see its log"), status_code=500
        )

    # -- answering --------------------------------------------------------------------------------
    @staticmethod
    def failed(exc: Exception) -> Response:
        """The response to a request that failed before its answer began."""
        if isinstance(exc, ProxyError):
            return error_response(exc, {"retry-after": "1"} if exc.code == "proxy_busy" else None)
        if isinstance(exc, Cancelled):
            return Response(status_code=499)
        log.error("internal error answering a request", exc_info=exc)
        return JSON(
            error_body(500, f"internal error in the proxy ({type(exc).__name__}); see its log"), status_code=500
        )

    @staticmethod
    def shown_error(exc: Exception) -> dict[str, Any]:
        return (
            exc.body()
            if isinstance(exc, ProxyError)
            else error_body(500, f"internal error in the proxy ({type(exc).__name__}); see its log")
        )

    def ended(
        self, ex: Exchange, trace: dict[str, Any], status: int, result: Answer | None, error: Exception | None
    ) -> None:
        """The access log line and trace of a request that ended."""
        if isinstance(error, ModelFailed):  # the replies that did not meet the request
            result = error.answer
        if isinstance(error, ProxyError):
            trace["error"] = error.body()["error"]
        elif isinstance(error, Cancelled):
            ex.record["client_disconnected"] = True
            status = 499
        elif error is not None:
            trace["error"] = self.shown_error(error)["error"]
        if result is not None:
            ex.record.update(
                repairs=result.repairs,
                finish_reason=result.finish_reason,
                prompt_tokens=result.usage.prompt_tokens,
                completion_tokens=result.usage.completion_tokens,
            )
            trace.update(repairs=result.repairs, attempts=[step.to_record() for step in result.attempts])
            if result.failure is not None:
                ex.record["failure"] = trace["failure"] = result.failure
            if error is None:
                trace["response"] = result.message()
        ex.done(status, self.config.trace_dir, trace)

    async def answering(
        self, request: Request, prefix: str, read: Callable[[Any], ChatRequest], shape: Any
    ) -> Response | EventStream:
        """One request to ``/v1/chat/completions`` or ``/v1/responses``: ``read`` makes the
        ChatRequest of its body, ``shape`` writes the answer (``complete``) or the events of a
        streamed one (``writer``)."""
        ex = Exchange(request, prefix)
        trace: dict[str, Any] = {}
        admitted = streamed = False

        def leave_queue() -> None:  # once the request holds a slot, or fails
            nonlocal admitted
            if admitted:
                admitted = False
                self.queue.leave()

        try:
            self.authorized(request)
            raw = await self.read_body(request)
            self.queue.admit()
            admitted = True
            body, chat_request = await anyio.to_thread.run_sync(self.parse, raw, read, limiter=self.limiter("cpu"))
            trace["request"] = body
            ex.record.update(
                stream=chat_request.stream, tools=len(chat_request.tools), tool_choice=chat_request.tool_choice
            )
            self.upstream.require()
            self.upstream.backend_for(chat_request.sampling)  # a field the upstream cannot take: 400 now
            turns = await anyio.to_thread.run_sync(
                transcript,
                chat_request,
                self.memory,
                self.config.example_style,
                self.config.example_tool,
                limiter=self.limiter("cpu"),
            )
            model = chat_request.model or self.upstream.model
            if chat_request.stream:
                streamed = True

                def done(status: int, result: Answer | None, error: Exception | None) -> None:
                    leave_queue()
                    self.ended(ex, trace, status, result, error)

                return EventStream(
                    lambda on_content, on_call: self.run(
                        request, chat_request, turns, leave_queue, on_content, on_call
                    ),
                    shape.writer(id=ex.id, model=model, request=chat_request),
                    fail=self.failed,
                    error_body=self.shown_error,
                    headers={},
                    done=done,
                )
            result = await self.run(request, chat_request, turns, leave_queue)
        except (ProxyError, Cancelled) as exc:
            response = self.failed(exc)
            self.ended(ex, trace, response.status_code, None, exc)
            return response
        finally:
            if not streamed:
                leave_queue()
        self.ended(ex, trace, 200, result, None)
        return JSON(
            shape.complete(result, id=ex.id, model=model, request=chat_request),
            headers={
                REPAIRS_HEADER: str(result.repairs),
                **({FAILURE_HEADER: "no_usable_reply"} if result.failure is not None else {}),
            },
        )

    def work(
        self,
        chat_request: ChatRequest,
        turns: list[dict[str, str]],
        slot: int,
        cancelled: threading.Event,
        on_content: OnContent | None,
        on_call: OnCall | None,
    ) -> Answer:
        """The answer on ``slot`` (in a worker thread), remembered for the client's next request,
        its calls under the client's tool names."""
        client_call = (
            None
            if on_call is None
            else (lambda call, repairs: on_call({**call, "name": chat_request.client_name(call["name"])}, repairs))
        )
        try:
            result = answer(
                self.upstream,
                chat_request,
                turns,
                constrained=self.config.mode == "constrained",
                max_repairs=self.config.max_repairs,
                retry=self.config.retry,
                slot=slot,
                cancelled=cancelled,
                on_content=on_content,
                on_call=client_call,
            )
        except BackendError as exc:
            if cancelled.is_set():
                raise Cancelled() from None
            raise from_backend_error(exc, self.upstream.redact) from None
        if turns[-1]["role"] == "user":  # a prefill's content is not a message the client sends back
            self.memory.remember(
                message_key(turns, result.content, [(c["name"], c["args"]) for c in result.calls]), result.turns
            )
        result.calls = [{**c, "name": chat_request.client_name(c["name"])} for c in result.calls]
        return result

    async def run(
        self,
        request: Request,
        chat_request: ChatRequest,
        turns: list[dict[str, str]],
        left_queue: Callable[[], None],
        on_content: OnContent | None = None,
        on_call: OnCall | None = None,
    ) -> Answer:
        """The answer to ``turns`` (the calls under the client's tool names); ``left_queue`` is
        called once the request holds a slot, or fails; ``on_content`` gets the content in pieces,
        ``on_call`` each valid call as soon as it is known."""
        cancelled = threading.Event()

        async def watch() -> None:
            while not cancelled.is_set():
                if await request.is_disconnected():
                    cancelled.set()
                    self.queue.wake()
                    return
                await anyio.sleep(0.1)

        first_user = next((t["content"] for t in turns[1:] if t["role"] == "user"), "")
        key = self.upstream.conversation_key(turns[0]["content"] + first_user)
        result: Answer | None = None
        error: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            try:  # caught here: the task group would wrap it in an ExceptionGroup
                try:
                    slot = await self.queue.slot(key, cancelled)
                finally:
                    left_queue()
                try:
                    result = await anyio.to_thread.run_sync(
                        self.work,
                        chat_request,
                        turns,
                        slot,
                        cancelled,
                        on_content,
                        on_call,
                        limiter=self.limiter("upstream"),
                    )
                finally:
                    self.queue.release(slot)
            except Exception as exc:  # re-raised below
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
        assert result is not None
        return result


def create_app(upstream: Upstream, config: ProxyConfig, *, host: str = "127.0.0.1") -> Starlette:
    """The app for ``upstream``; ``host`` is the address it listens on (what ``Host`` may name)."""
    return ProxyApp(upstream, config).starlette(host)
