"""Plumbing shared by the HTTP backends: one ``requests.Session`` each, timeouts, safe retries,
error translation at the boundary, bounded body reading, and SSE / NDJSON stream readers.

Every ``requests`` / ``urllib3`` exception is translated here into a ``textagent.errors`` type
with ``raise ... from exc``, so callers only ever catch ``BackendError`` and its subclasses.

Retries (exponential backoff) happen only where repeating the request is safe: the connection
could not be made or was dropped before a response arrived, or the server answered 502/503/504
before any body was read. A 500, a timeout while waiting for the answer, or a failure in the
middle of a body is never retried: the server may have done the work, and waiting again for a
slow generation could take minutes.

Two clocks bound a request beyond the per-read timeouts. A run's deadline (Agent's
``max_seconds``, set with :func:`request_deadline` around the request) cuts the connect and read
timeouts to the time left and is checked between the chunks of a body or stream. And a stream
must make progress: keep-alive comments alone do not count, so a server that trickles them
still times out after the read timeout.
"""
from __future__ import annotations

import contextlib
import contextvars
import http.client
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Union

import requests
import urllib3.exceptions

from ..errors import (
    BackendConnectionError,
    BackendError,
    BackendHTTPError,
    BackendResponseError,
    BackendTimeout,
)
from .base import Usage

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "DONE",
    "HTTPBackend",
    "MAX_RESPONSE_BYTES",
    "RETRY_STATUSES",
    "TimeoutSpec",
    "normalize_timeout",
    "openai_usage",
    "request_deadline",
    "server_error_message",
]

TimeoutSpec = Union[float, "tuple[float, float]"]

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 300.0
DEFAULT_TIMEOUT: tuple[float, float] = (DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF = 0.25  # seconds; doubles on every retry
MAX_RESPONSE_BYTES = 8 * 1024 * 1024
RETRY_STATUSES = frozenset({502, 503, 504})

log = logging.getLogger(__name__)

_ERROR_BODY_BYTES = 64 * 1024  # how much of an error body we read at most
_BODY_EXCERPT_CHARS = 2000  # kept in BackendHTTPError.body
_MESSAGE_EXCERPT_CHARS = 300  # quoted in exception messages
_READ_SIZE = 64 * 1024


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("textagent_request_deadline", default=None)


@contextlib.contextmanager
def request_deadline(deadline: float | None) -> Iterator[None]:
    """Requests made inside the block end by ``deadline`` (a ``time.monotonic()`` value; None:
    no deadline): their timeouts are cut to the time left and bodies and streams are read no
    longer than that. Past it they raise BackendTimeout with ``time_limit = True``."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left() -> float | None:
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def _timed_out(message: str, url: str, retries: int, *, time_limit: bool = False) -> BackendTimeout:
    exc = BackendTimeout(message, url=url, retries=retries)
    exc.time_limit = time_limit  # type: ignore[attr-defined]  # the run's deadline, not the server's silence
    return exc


class _Progress:
    """When a stream last delivered an event: keep-alives do not count."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def made(self) -> None:
        self.last = time.monotonic()


class _Done:
    """The ``data: [DONE]`` marker of OpenAI-style streams."""

    def __repr__(self) -> str:
        return "DONE"


DONE = _Done()


def normalize_timeout(timeout: TimeoutSpec | None) -> tuple[float, float]:
    """``(connect, read)`` seconds from a float (used for both) or a pair; None = the default."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool):
        raise TypeError("timeout must be seconds (float) or a (connect, read) pair, not a bool")
    if isinstance(timeout, (int, float)):
        pair = (float(timeout), float(timeout))
    elif isinstance(timeout, (tuple, list)) and len(timeout) == 2:
        pair = (float(timeout[0]), float(timeout[1]))
    else:
        raise TypeError(f"timeout must be seconds (float) or a (connect, read) pair, got {timeout!r}")
    if not all(t > 0 for t in pair):
        raise ValueError(f"timeouts must be positive, got {timeout!r}")
    return pair


def _excerpt(text: str, limit: int = _MESSAGE_EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def server_error_message(payload: Any) -> str | None:
    """The human message inside an error body, for the shapes servers actually send.

    ``{"error": {"message": ...}}`` (OpenAI, llama.cpp), ``{"error": "..."}`` (Ollama),
    ``{"message": ...}`` (vLLM), ``{"detail": ...}`` (FastAPI).
    """
    if isinstance(payload, str):
        return payload.strip() or None
    if not isinstance(payload, Mapping):
        return None
    err = payload.get("error")
    if isinstance(err, str) and err.strip():
        return err.strip()
    if isinstance(err, Mapping):
        msg = err.get("message") or err.get("msg")
        if isinstance(msg, str) and msg.strip():
            return msg.strip()
        return json.dumps(err, ensure_ascii=False)
    for key in ("message", "detail"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if value:
            return json.dumps(value, ensure_ascii=False, default=str)
    return None


def _count(value: Any) -> int | None:
    """A token count from a JSON value: non-negative integers only (bools and junk -> None)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def openai_usage(usage: Any, timings: Any = None) -> Usage:
    """Usage from an OpenAI-style ``usage`` object (plus llama.cpp's ``timings`` if present).

    ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, llama.cpp) gives the reused prefix;
    llama.cpp's ``timings.prompt_n`` / ``cache_n`` give evaluated / reused prompt tokens.
    """
    usage = usage if isinstance(usage, Mapping) else {}
    timings = timings if isinstance(timings, Mapping) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = _count(timings.get("cache_n"))
    evaluated = _count(timings.get("prompt_n"))
    if evaluated is None and prompt is not None and cached is not None:
        evaluated = max(prompt - cached, 0)
    if cached is None and prompt is not None and evaluated is not None:
        cached = max(prompt - evaluated, 0)
    if completion is None:
        completion = _count(timings.get("predicted_n"))
    return Usage(prompt_tokens=prompt, prompt_evaluated=evaluated, prompt_cached=cached, completion_tokens=completion)


def llama_timings(timings: Any) -> dict[str, float]:
    """The millisecond / speed fields of a llama.cpp ``timings`` object."""
    out: dict[str, float] = {}
    if isinstance(timings, Mapping):
        for key in ("prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second"):
            value = _number(timings.get(key))
            if value is not None:
                out[key] = value
    return out


class HTTPBackend:
    """Base of the HTTP backends. Subclasses set ``api_name`` and build payloads.

    ``timeout``: seconds (connect and read) or a ``(connect, read)`` pair; default (5, 300).
    The read timeout is the longest silence tolerated: the wait for the response headers
    (a non-streaming completion sends them only when generation is over) and, when
    streaming, the gap between two events (keep-alive comments are not events).
    Inside :func:`request_deadline` (what Agent does for ``max_seconds``) every timeout is cut
    to the time left.
    ``retries``: how many times a request is repeated after a connection error or a
    502/503/504 (default 2), with ``backoff * 2**n`` seconds between attempts.
    ``max_response_bytes``: larger bodies / streams are refused with BackendResponseError.
    ``session``: a ``requests.Session`` to use (not closed by ``close()``); by default the
    backend creates and owns one.
    """

    api_name = "HTTP"
    default_url = "http://127.0.0.1:8080"

    def __init__(
        self,
        url: str | None = None,
        *,
        timeout: TimeoutSpec | None = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        session: requests.Session | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ):
        url = (url or self.default_url).strip()
        if not url:
            raise ValueError(f"{type(self).__name__} needs a server URL")
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        self.timeout = normalize_timeout(timeout)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be a non-negative int, got {retries!r}")
        self.retries = retries
        if backoff < 0:
            raise ValueError(f"backoff must be >= 0, got {backoff!r}")
        self.backoff = float(backoff)
        if max_response_bytes <= 0:
            raise ValueError("max_response_bytes must be positive")
        self.max_response_bytes = int(max_response_bytes)
        self.headers: dict[str, str] = {"Accept": "application/json, text/event-stream, application/x-ndjson"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        if headers:
            self.headers.update(headers)
        self._owns_session = session is None
        self.session: requests.Session = session if session is not None else requests.Session()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the session's pooled connections (only if this backend created the session)."""
        if not self._closed:
            self._closed = True
            if self._owns_session:
                self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- URLs and messages -------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return self.url + "/" + path.lstrip("/")

    def _no_server_message(self, url: str, exc: BaseException) -> str:
        reason = _reason(exc)
        if _unreachable(exc):
            return f"no server at {self.url} ({reason}); start one with `textagent serve` or pass --endpoint"
        return (
            f"the connection to the {self.api_name} server at {self.url} failed before an answer arrived "
            f"({reason}); is it still running? Start one with `textagent serve` or pass --endpoint"
        )

    def _status_hint(self, status: int, server_message: str | None) -> str | None:
        if status in (401, 403):
            return "check the API key (api_key=... / --api-key)"
        if status == 404:
            return f"{self.url} has no such endpoint: is it a {self.api_name} server? (choose the matching --api)"
        if status == 503:
            return "the server is busy or still loading the model; wait a moment and try again"
        if status in (502, 504):
            return "a proxy in front of the model server could not reach it"
        return None

    # -- requests ----------------------------------------------------------------------------
    def _open(
        self,
        method: str,
        path: str,
        *,
        payload: Any = None,
        timeout: TimeoutSpec | None = None,
        retries: int | None = None,
    ) -> tuple[requests.Response, int]:
        """Send the request; return the (unread, streaming) response and the retries made.

        Raises BackendConnectionError, BackendTimeout or BackendHTTPError (status >= 400).
        """
        if self._closed:
            raise BackendError(f"{type(self).__name__} for {self.url} was closed", url=self.url)
        url = self._url(path)
        configured = self.timeout if timeout is None else normalize_timeout(timeout)
        max_retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            failure: BaseException | None = None
            left = _time_left()
            if left is not None and left <= 0:
                raise _timed_out(f"the run's time limit was up before the request to {self.api_name} server at "
                                 f"{self.url}", url, attempt, time_limit=True)
            timeouts = configured if left is None else (min(configured[0], left), min(configured[1], left))
            try:
                resp = self.session.request(
                    method, url, json=payload, headers=self.headers, timeout=timeouts, stream=True
                )
            except requests.exceptions.ConnectTimeout as exc:
                failure = exc
            except requests.exceptions.ReadTimeout as exc:
                if timeouts[1] < configured[1]:
                    raise _timed_out(f"{self.api_name} server at {self.url} sent no answer within the run's time "
                                     f"limit ({timeouts[1]:.3g} s were left)", url, attempt, time_limit=True) from exc
                raise BackendTimeout(
                    f"{self.api_name} server at {self.url} accepted the request but sent no answer "
                    f"within {timeouts[1]:g} s (read timeout); raise the timeout or ask for fewer tokens",
                    url=url,
                    retries=attempt,
                ) from exc
            except (
                requests.exceptions.InvalidURL,
                requests.exceptions.MissingSchema,
                requests.exceptions.InvalidSchema,
            ) as exc:
                raise BackendError(f"invalid server URL {url!r}: {exc}", url=url, retries=attempt) from exc
            except requests.exceptions.ConnectionError as exc:
                failure = exc
            except requests.exceptions.RequestException as exc:
                raise BackendError(
                    f"request to {url} failed: {_reason(exc)}", url=url, retries=attempt
                ) from exc
            else:
                status = resp.status_code
                if status in RETRY_STATUSES and attempt < max_retries:
                    resp.close()  # nothing of the body was read; the request is safe to repeat
                    log.info("%s %s answered HTTP %d; retry %d of %d", method, url, status, attempt + 1, max_retries)
                    self._sleep(attempt)
                    attempt += 1
                    continue
                if status >= 400:
                    raise self._http_error(resp, url, attempt)
                return resp, attempt
            # connection-level failure: nothing reached the server (or nothing came back)
            if attempt >= max_retries:
                message = self._no_server_message(url, failure)
                if attempt:
                    message += f" (gave up after {attempt} {'retry' if attempt == 1 else 'retries'})"
                raise BackendConnectionError(message, url=url, retries=attempt) from failure
            log.info("%s %s failed (%s); retry %d of %d", method, url, _reason(failure), attempt + 1, max_retries)
            self._sleep(attempt)
            attempt += 1

    def _sleep(self, attempt: int) -> None:
        if self.backoff:
            left = _time_left()
            time.sleep(max(0.0, min(self.backoff * (2**attempt), left if left is not None else float("inf"))))

    def _http_error(self, resp: requests.Response, url: str, retries: int) -> BackendHTTPError:
        status = resp.status_code
        try:
            raw = b"".join(self._chunks(resp, url, retries, limit=_ERROR_BODY_BYTES, truncate=True))
        except BackendError:
            raw = b""
        finally:
            resp.close()
        body = raw.decode("utf-8", errors="replace")
        server_message = None
        try:
            server_message = server_error_message(json.loads(body))
        except (ValueError, RecursionError):
            if body.strip() and "<html" not in body[:200].lower():
                server_message = body.strip()
        message = f"{self.api_name} server at {self.url} answered HTTP {status}"
        if resp.reason:
            message += f" {resp.reason}"
        message += f" for {resp.request.method if resp.request else 'POST'} {_path(url)}"
        if server_message:
            message += f": {_excerpt(server_message)}"
        hint = self._status_hint(status, server_message)
        if hint:
            message += f" ({hint})"
        if retries:
            message += f" [after {retries} {'retry' if retries == 1 else 'retries'}]"
        return BackendHTTPError(message, status=status, body=body[:_BODY_EXCERPT_CHARS], url=url, retries=retries)

    # -- reading bodies ----------------------------------------------------------------------
    def _chunks(
        self,
        resp: requests.Response,
        url: str,
        retries: int,
        *,
        limit: int | None = None,
        truncate: bool = False,
        progress: _Progress | None = None,
    ) -> Iterator[bytes]:
        """Yield the body as it arrives, refusing more than ``limit`` bytes (or truncating).

        Past the run's deadline (request_deadline), or when ``progress`` (a stream's) was last
        made more than the read timeout ago, it raises BackendTimeout."""
        limit = self.max_response_bytes if limit is None else limit
        declared = resp.headers.get("Content-Length")
        if not truncate and declared and declared.isdigit() and int(declared) > limit:
            resp.close()
            raise self._too_big(url, retries, limit, declared=int(declared))
        total = 0
        raw = resp.raw
        read1 = getattr(raw, "read1", None)
        try:
            if read1 is not None:
                source: Iterator[bytes] = iter(lambda: read1(_READ_SIZE), b"")
            else:  # urllib3 < 2: chunked bodies still arrive chunk by chunk
                source = resp.iter_content(chunk_size=None)
            for data in source:
                left = _time_left()
                if left is not None and left <= 0:
                    resp.close()
                    raise _timed_out(f"{self.api_name} server at {self.url} was still sending when the run's time "
                                     f"limit was up ({total} bytes read)", url, retries, time_limit=True)
                if progress is not None and time.monotonic() - progress.last > self.timeout[1]:
                    resp.close()
                    raise _timed_out(f"{self.api_name} server at {self.url} sent no event for more than "
                                     f"{self.timeout[1]:g} s, only keep-alives (read timeout)", url, retries)
                if not data:
                    continue
                total += len(data)
                if total > limit:
                    if truncate:
                        yield data[: len(data) - (total - limit)]
                        return
                    resp.close()
                    raise self._too_big(url, retries, limit)
                yield data
        except BackendError:
            raise
        except (
            urllib3.exceptions.ReadTimeoutError,
            requests.exceptions.ReadTimeout,
            socket.timeout,
        ) as exc:
            resp.close()
            left = _time_left()
            if left is not None and left < 0.1:
                raise _timed_out(f"{self.api_name} server at {self.url} was still answering when the run's time "
                                 f"limit was up ({total} bytes read)", url, retries, time_limit=True) from exc
            raise BackendTimeout(
                f"{self.api_name} server at {self.url} stopped sending in the middle of its answer "
                f"for more than {self.timeout[1]:g} s (read timeout) after {total} bytes",
                url=url,
                retries=retries,
            ) from exc
        except (
            urllib3.exceptions.HTTPError,
            requests.exceptions.RequestException,
            http.client.HTTPException,
            OSError,
        ) as exc:
            resp.close()
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} closed the connection in the middle of its answer "
                f"after {total} bytes (stream cut off: did the server crash or restart?): {_reason(exc)}",
                url=url,
                retries=retries,
            ) from exc

    def _too_big(self, url: str, retries: int, limit: int, declared: int | None = None) -> BackendResponseError:
        what = f"announced a response of {declared} bytes" if declared is not None else "sent a response"
        return BackendResponseError(
            f"{self.api_name} server at {self.url} {what} larger than the {_size(limit)} limit; refused "
            "(raise max_response_bytes if this is expected)",
            url=url,
            retries=retries,
        )

    def _too_deep(self, what: str, url: str, retries: int) -> BackendResponseError:
        """JSON nested deeper than Python's decoder can go (``[`` x 10^5): json raises
        RecursionError, which must not escape the backend."""
        return BackendResponseError(
            f"{self.api_name} server at {self.url} sent JSON for {what} that is nested too deeply to read",
            url=url,
            retries=retries,
        )

    def _read_json(self, resp: requests.Response, url: str, retries: int) -> Any:
        """The whole body as JSON (bounded); BackendResponseError if empty or malformed."""
        try:
            body = b"".join(self._chunks(resp, url, retries))
        finally:
            resp.close()
        if not body.strip():
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent an empty response to {_path(url)} (expected JSON)",
                url=url,
                retries=retries,
            )
        try:
            return json.loads(body.decode("utf-8"))
        except RecursionError as exc:
            raise self._too_deep(_path(url), url, retries) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent malformed JSON for {_path(url)}: "
                f"{exc}; body starts {_excerpt(body[:400].decode('utf-8', 'replace'), 200)!r}",
                url=url,
                retries=retries,
            ) from exc

    def _request_json(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        timeout: TimeoutSpec | None = None,
        retries: int | None = None,
    ) -> tuple[Any, int]:
        resp, attempt = self._open(method, path, payload=payload, timeout=timeout, retries=retries)
        return self._read_json(resp, resp.url or self._url(path), attempt), attempt

    def _lines(self, resp: requests.Response, url: str, retries: int,
               progress: _Progress | None = None) -> Iterator[tuple[bytes, bool]]:
        """Lines of the body (without EOL); the flag is False for a last line with no newline."""
        buffer = bytearray()
        for data in self._chunks(resp, url, retries, progress=progress):
            buffer += data
            start = 0
            while True:
                end = buffer.find(b"\n", start)
                if end < 0:
                    break
                line = bytes(buffer[start:end])
                start = end + 1
                yield (line[:-1] if line.endswith(b"\r") else line), True
            del buffer[:start]
        if buffer:
            yield bytes(buffer), False

    def _decode_line(self, line: bytes, url: str, retries: int) -> str:
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent a stream line that is not UTF-8: {exc}",
                url=url,
                retries=retries,
            ) from exc

    def _stream_event_json(self, data: str, url: str, retries: int, *, partial: bool) -> Any:
        try:
            return json.loads(data)
        except RecursionError as exc:
            raise self._too_deep("a stream event", url, retries) from exc
        except ValueError as exc:
            if partial:
                raise BackendResponseError(
                    f"{self.api_name} server at {self.url} ended the stream in the middle of an event "
                    f"(stream cut off): {_excerpt(data, 200)!r}",
                    url=url,
                    retries=retries,
                ) from exc
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent malformed JSON in a stream event: "
                f"{exc}: {_excerpt(data, 200)!r}",
                url=url,
                retries=retries,
            ) from exc

    def _answer_object(self, data: Any, path: str, url: str, retries: int) -> Mapping[str, Any]:
        """A JSON answer that must be an object; an object holding an error is the server's error."""
        if not isinstance(data, Mapping):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} answered {path} with {type(data).__name__}, not an object",
                url=url,
                retries=retries,
            )
        if data.get("error"):
            raise self._stream_error(data, url, retries)
        return data

    def _answer_text(self, data: Mapping[str, Any], key: str, path: str, url: str, retries: int,
                     where: str = "") -> str:
        """The reply text at ``data[key]``; missing, it is a server of another kind (wrong --api)."""
        text = data.get(key)
        if not isinstance(text, str):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} answered {path} without a '{key}' string{where} "
                f"(keys: {sorted(data)[:12]}); is it a{'n' if self.api_name[0] in 'AEIOU' else ''} {self.api_name} "
                "server? (choose the matching --api)",
                url=url,
                retries=retries,
            )
        return text

    def _stream_piece(self, item: Any, key: str, unit: str, url: str, retries: int) -> str:
        """The text ``item[key]`` of one stream event or line ("" when absent); ``unit`` names
        the item in the error ("stream event", "stream line")."""
        if not isinstance(item, Mapping):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent a {unit} that is not an object: {item!r:.200}",
                url=url,
                retries=retries,
            )
        piece = item.get(key, "")
        if not isinstance(piece, str):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent a {unit} whose '{key}' is not a string",
                url=url,
                retries=retries,
            )
        return piece

    def _cut_off(self, what: str, url: str, retries: int) -> BackendResponseError:
        """A stream that ended before its final event."""
        return BackendResponseError(
            f"{self.api_name} server at {self.url} sent {what}: stream cut off (did the server crash or restart?)",
            url=url,
            retries=retries,
        )

    def _stream_error(self, payload: Any, url: str, retries: int) -> BackendHTTPError:
        error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
        code = error.get("code") if isinstance(error, Mapping) else None
        status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 500
        detail = server_error_message(payload) or server_error_message({"error": error}) or repr(payload)
        return BackendHTTPError(
            f"{self.api_name} server at {self.url} reported an error in the middle of the stream: {_excerpt(detail)}",
            status=status,
            body=json.dumps(payload, ensure_ascii=False, default=str)[:_BODY_EXCERPT_CHARS],
            url=url,
            retries=retries,
        )

    def _iter_sse(self, resp: requests.Response, url: str, retries: int) -> Iterator[Any]:
        """Parsed ``data:`` payloads of a Server-Sent-Events body; ``DONE`` for ``[DONE]``.

        Comment lines (``: keep-alive``) are skipped. An error event (``data: {"error": ...}``,
        llama.cpp's ``error: {...}`` field, or ``event: error``) raises BackendHTTPError. A body
        that ends inside an event raises BackendResponseError. Closes ``resp`` when done.
        """
        data_lines: list[str] = []
        event = ""
        progress = _Progress()

        def dispatch(partial: bool) -> Any:
            progress.made()
            data = "\n".join(data_lines)
            if data.strip() == "[DONE]":
                return DONE
            payload = self._stream_event_json(data, url, retries, partial=partial)
            if event == "error" or (isinstance(payload, Mapping) and payload.get("error")):
                raise self._stream_error(payload, url, retries)
            return payload

        try:
            for raw_line, complete in self._lines(resp, url, retries, progress):
                line = self._decode_line(raw_line, url, retries)
                if not complete:
                    # the body ended without a newline: only a whole field can still count
                    if line.startswith("data:"):
                        data_lines.append(_field_value(line))
                        yield dispatch(partial=True)
                        data_lines = []
                    elif line.strip() and not line.startswith(":"):
                        raise BackendResponseError(
                            f"{self.api_name} server at {self.url} ended the stream in the middle of a "
                            f"line (stream cut off): {_excerpt(line, 200)!r}",
                            url=url,
                            retries=retries,
                        )
                    break
                if not line:
                    if data_lines:
                        yield dispatch(partial=False)
                    data_lines, event = [], ""
                    continue
                if line.startswith(":"):
                    continue  # comment / keep-alive
                name, _, _ = line.partition(":")
                value = _field_value(line)
                if name == "data":
                    data_lines.append(value)
                elif name == "event":
                    event = value.strip()
                elif name == "error":  # llama.cpp sends stream errors as an `error:` field
                    payload = self._stream_event_json(value, url, retries, partial=False)
                    raise self._stream_error(payload, url, retries)
                # id:, retry: and unknown fields are ignored, as the SSE spec says
            if data_lines:  # last event not followed by a blank line: accept it if whole
                yield dispatch(partial=True)
        finally:
            resp.close()

    def _iter_ndjson(self, resp: requests.Response, url: str, retries: int) -> Iterator[Any]:
        """Parsed objects of a newline-delimited JSON body; ``{"error": ...}`` lines raise."""
        progress = _Progress()
        try:
            for raw_line, complete in self._lines(resp, url, retries, progress):
                line = self._decode_line(raw_line, url, retries).strip()
                if not line:
                    continue
                progress.made()
                payload = self._stream_event_json(line, url, retries, partial=not complete)
                if isinstance(payload, Mapping) and payload.get("error"):
                    raise self._stream_error(payload, url, retries)
                yield payload
        finally:
            resp.close()

    @staticmethod
    def _is_json_response(resp: requests.Response) -> bool:
        """True when a streaming request got a plain JSON answer (server ignored ``stream``)."""
        ctype = resp.headers.get("Content-Type", "").lower()
        return "json" in ctype and "ndjson" not in ctype and "jsonl" not in ctype


def _size(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def _field_value(line: str) -> str:
    _, _, value = line.partition(":")
    return value[1:] if value.startswith(" ") else value


def _path(url: str) -> str:
    rest = url.split("://", 1)[-1]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else "/"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (``__cause__``, urllib3's ``reason``, wrapped args)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        nxt = cur.__cause__ or cur.__context__
        if nxt is None and isinstance(getattr(cur, "reason", None), BaseException):
            nxt = cur.reason  # type: ignore[attr-defined]
        if nxt is None:
            nxt = next((a for a in cur.args if isinstance(a, BaseException)), None)
        cur = nxt


def _unreachable(exc: BaseException) -> bool:
    """True when no connection could be made at all (refused, DNS, connect timeout)."""
    return any(
        isinstance(
            e,
            (
                ConnectionRefusedError,
                socket.gaierror,
                requests.exceptions.ConnectTimeout,
                urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ConnectTimeoutError,
            ),
        )
        for e in _causes(exc)
    )


def _reason(exc: BaseException | None) -> str:
    """A short cause for a requests/urllib3 exception, e.g. 'connection refused'."""
    if exc is None:
        return "unknown error"
    for cur in _causes(exc):
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(cur, socket.gaierror):
            return "host name not found"
        if isinstance(cur, requests.exceptions.ConnectTimeout) or (
            isinstance(cur, urllib3.exceptions.ConnectTimeoutError)
            and not isinstance(cur, urllib3.exceptions.NewConnectionError)
        ):
            return "connect timeout: nothing answered"
        if isinstance(cur, http.client.RemoteDisconnected):
            return "the server closed the connection without answering"
    text = str(exc)
    return _excerpt(text, 200) if text else type(exc).__name__


# Callable type of the streaming hook the agent passes as options["on_text"].
OnText = Callable[[str], Any]
