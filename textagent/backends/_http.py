"""The base of the HTTP backends: one ``requests.Session`` each, the request with its timeouts and
safe retries, and the translation of HTTP failures into ``textagent.errors`` types.

Every ``requests`` / ``urllib3`` exception is translated here (requests) or in ``_reading``
(bodies and streams) into a ``textagent.errors`` type with ``raise ... from exc``, so callers
only ever catch ``BackendError`` and its subclasses.

Retries (exponential backoff) happen only where repeating the request is safe: the connection
could not be made or was dropped before a response arrived, or the server answered 502/503/504
before any body was read. A 500, a timeout while waiting for the answer, or a failure in the
middle of a body is never retried: the server may have done the work, and waiting again for a
slow generation could take minutes.

Two clocks bound a request beyond the per-read timeouts. A run's deadline (Agent's
``max_seconds``, set with :func:`request_deadline` around the request) cuts the connect and read
timeouts to the time left and is checked between the chunks of a body or stream. And a stream
must make progress (see ``_reading``).

The settings (timeouts, retries, headers, session...) are one :class:`HttpSettings`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests

from .._redact import redact
from ..errors import BackendConnectionError, BackendError, BackendHTTPError, BackendTimeout
from ._deadline import _time_left, _timed_out, request_deadline
from ._describe import BODY_EXCERPT_CHARS, excerpt, failure_reason, unreachable, url_path
from ._payload import llama_timings, openai_usage, request_body, server_error_message
from ._reading import DONE, BodyReader
from .base import Completion
from .http_settings import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    MAX_RESPONSE_BYTES,
    HttpSettings,
    TimeoutSpec,
    normalize_timeout,
)

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "DONE",
    "MAX_RESPONSE_BYTES",
    "RETRY_STATUSES",
    "HTTPBackend",
    "HttpSettings",
    "TimeoutSpec",
    "llama_timings",
    "normalize_timeout",
    "openai_usage",
    "request_deadline",
    "server_error_message",
]

RETRY_STATUSES = frozenset({502, 503, 504})

log = logging.getLogger(__name__)

_ERROR_BODY_BYTES = 64 * 1024  # how much of an error body we read at most


class _Setting:
    """An attribute of the backend that reads and replaces the field of the same name of its
    ``http`` settings (checked again by HttpSettings when set)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, backend: Any, owner: type | None = None) -> Any:
        return self if backend is None else getattr(backend.http, self.name)

    def __set__(self, backend: Any, value: Any) -> None:
        backend.http = backend.http.replace(**{self.name: value})


# Callable type of the streaming hook the agent passes as options["on_text"].
OnText = Callable[[str], Any]


class HTTPBackend(BodyReader):
    """Base of the HTTP backends. Subclasses set ``api_name`` and build payloads.

    ``http``: the HTTP settings (see HttpSettings: timeout, retries, backoff, api_key, headers,
    session, max_response_bytes). The same names as keyword arguments replace the matching
    fields of ``http`` (a keyword given as None changes nothing). The settings stay readable
    and settable as attributes (``backend.retries = 0``); ``headers`` is the dict every request
    sends, ``session`` the session in use (created and owned by the backend, and closed by
    ``close()``, unless the settings name one).
    """

    api_name = "HTTP"
    default_url = "http://127.0.0.1:8080"

    def __init__(self, url: str | None = None, *, http: HttpSettings | None = None, **http_options: Any):
        url = (url or self.default_url).strip()
        if not url:
            raise ValueError(f"{type(self).__name__} needs a server URL")
        if "://" not in url:
            url = "http://" + url
        self.url = url.rstrip("/")
        self.shown_url = redact(self.url)  # what messages show: never the URL's credentials
        self.http = HttpSettings.merged(http, caller=f"{type(self).__name__}()", **http_options)
        self.headers: dict[str, str] = self.http.request_headers()
        self._owns_session = self.http.session is None
        self.session: requests.Session = self.http.session if self.http.session is not None else requests.Session()
        self._closed = False

    # -- settings: readable and settable as attributes, kept in self.http ----------------------
    timeout = _Setting()  # (connect, read) seconds
    retries = _Setting()
    backoff = _Setting()
    max_response_bytes = _Setting()

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
        return f"{type(self).__name__}({self.shown_url!r})"

    # -- URLs and messages -------------------------------------------------------------------
    # the cheapest request of the API, for probe(): what answers it is a server of that API
    probe_path = "/"

    def probe(self, path: str | None = None, *, timeout: TimeoutSpec | None = None) -> None:
        """``GET path`` (default: the API's cheapest, ``probe_path``) once, no retries, the body
        unread: is a server there? Raises the BackendError of the failure (refused, timed out,
        an HTTP error status)."""
        resp, _ = self._open("GET", path or self.probe_path, timeout=timeout, retries=0)
        resp.close()

    def sampling_params(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """``fields`` (sampling: top_p, penalties, logit_bias; those ``capabilities.sampling``
        names) as this API's request body carries them, for ``params``."""
        return dict(fields)

    def _url(self, path: str) -> str:
        return self.url + "/" + path.lstrip("/")

    def _no_server_message(self, url: str, exc: BaseException) -> str:
        reason = failure_reason(exc)
        if unreachable(exc):
            return f"no server at {self.shown_url} ({reason}); start one with `textagent serve` or pass --endpoint"
        return (
            f"the connection to the {self.api_name} server at {self.shown_url} failed before an answer arrived "
            f"({reason}); is it still running? Start one with `textagent serve` or pass --endpoint"
        )

    def _status_hint(self, status: int, server_message: str | None) -> str | None:
        if status in (401, 403):
            return "check the API key (api_key=... / --api-key)"
        if status == 404:
            return f"{self.shown_url} has no such endpoint: is it a {self.api_name} server? (choose the matching --api)"
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
            raise BackendError(f"{type(self).__name__} for {self.shown_url} was closed", url=self.shown_url)
        url = self._url(path)
        body, headers = self._body(payload, url)
        configured = self.timeout if timeout is None else normalize_timeout(timeout)
        max_retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            failure: BaseException | None = None
            left = _time_left()
            if left is not None and left <= 0:
                raise _timed_out(
                    f"the run's time limit was up before the request to {self.api_name} server at {self.shown_url}",
                    url,
                    attempt,
                    time_limit=True,
                )
            timeouts = configured if left is None else (min(configured[0], left), min(configured[1], left))
            try:
                resp = self.session.request(method, url, data=body, headers=headers, timeout=timeouts, stream=True)
            except requests.exceptions.ConnectTimeout as exc:
                failure = exc
            except requests.exceptions.ReadTimeout as exc:
                if timeouts[1] < configured[1]:
                    raise _timed_out(
                        f"{self.api_name} server at {self.shown_url} sent no answer within the run's time "
                        f"limit ({timeouts[1]:.3g} s were left)",
                        url,
                        attempt,
                        time_limit=True,
                    ) from exc
                raise BackendTimeout(
                    f"{self.api_name} server at {self.shown_url} accepted the request but sent no answer "
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
                raise BackendError(f"request to {url} failed: {failure_reason(exc)}", url=url, retries=attempt) from exc
            else:
                status = resp.status_code
                if status in RETRY_STATUSES and attempt < max_retries:
                    resp.close()  # nothing of the body was read; the request is safe to repeat
                    log.info(
                        "%s %s answered HTTP %d; retry %d of %d",
                        method,
                        self.shown_url + url_path(url),
                        status,
                        attempt + 1,
                        max_retries,
                    )
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
            log.info(
                "%s %s failed (%s); retry %d of %d",
                method,
                self.shown_url + url_path(url),
                failure_reason(failure),
                attempt + 1,
                max_retries,
            )
            self._sleep(attempt)
            attempt += 1

    def _body(self, payload: Any, url: str) -> tuple[bytes | None, dict[str, str]]:
        """The request's body and headers. Serialised here, not by requests, so that every
        backend's body (and the proxy's upstream requests) is UTF-8 with no lone surrogate."""
        if payload is None:
            return None, self.headers
        try:
            body = request_body(payload)
        except ValueError as exc:  # NaN or infinity, refused as requests refused them
            raise BackendError(f"request to {url} failed: the body is no JSON ({exc})", url=url) from exc
        return body, {"Content-Type": "application/json", **self.headers}

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
        message = f"{self.api_name} server at {self.shown_url} answered HTTP {status}"
        if resp.reason:
            message += f" {resp.reason}"
        message += f" for {resp.request.method if resp.request else 'POST'} {url_path(url)}"
        if server_message:
            message += f": {excerpt(server_message)}"
        hint = self._status_hint(status, server_message)
        if hint:
            message += f" ({hint})"
        if retries:
            message += f" [after {retries} {'retry' if retries == 1 else 'retries'}]"
        return BackendHTTPError(message, status=status, body=body[:BODY_EXCERPT_CHARS], url=url, retries=retries)

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

    # -- a generation request: one place for every API -----------------------------------------
    def _generate(self, path: str, payload: Any, stream: bool, on_text: OnText | None) -> Completion:
        """POST a generation request and read its answer: a stream through ``_read_stream``, a
        JSON body (also what a server that does not stream answers a streamed request with)
        through ``_from_json``."""
        started = time.perf_counter()
        resp, retries = self._open("POST", path, payload=payload)
        url = resp.url or self._url(path)
        if stream and not self._is_json_response(resp):
            return self._read_stream(resp, url, retries, started, on_text)
        return self._from_json(self._read_json(resp, url, retries), url, retries, started)

    def _read_stream(
        self, resp: requests.Response, url: str, retries: int, started: float, on_text: OnText | None
    ) -> Completion:
        raise NotImplementedError(f"{type(self).__name__} does not read streamed answers")

    def _from_json(self, data: Any, url: str, retries: int, started: float) -> Completion:
        raise NotImplementedError(f"{type(self).__name__} does not read generation answers")
