"""Reading the HTTP backends' response bodies: bounded, under the read timeout and the run's
deadline, as one JSON document or as a stream of Server-Sent Events or NDJSON lines. Every
failure while reading becomes a ``textagent.errors`` type (``raise ... from exc``).

A stream must make progress: keep-alive comments alone do not count, so a server that trickles
them still times out after the read timeout.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests
import urllib3.exceptions

from ..errors import BackendError, BackendHTTPError, BackendResponseError, BackendTimeout
from ._deadline import _time_left, _timed_out
from ._describe import BODY_EXCERPT_CHARS, excerpt, failure_reason, size_text, url_path
from ._payload import server_error_message

__all__ = ["DONE", "HOLD", "LAST", "MORE", "BodyReader", "StreamEnd"]

_READ_SIZE = 64 * 1024


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

# What one stream event is to BodyReader._stream_text (see there).
MORE, LAST, HOLD = "more", "last", "hold"


@dataclass(frozen=True)
class StreamEnd:
    """How a stream of text ended: its ``text``, the ``event`` read last, the events that
    counted (``seen``), whether the final event came (``complete``) or ``on_text`` stopped it
    early (``early``); neither: the stream was cut off."""

    text: str
    event: Any
    seen: int
    complete: bool = False
    early: bool = False


class BodyReader:
    """The body-reading half of HTTPBackend. Uses the backend's ``api_name`` and ``url`` (for
    messages), ``timeout`` (the read timeout bounds a stream's silence) and
    ``max_response_bytes``."""

    api_name: str
    url: str
    timeout: tuple[float, float]
    max_response_bytes: int

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
                # decoded: a server may gzip or deflate its answer (requests itself offers both);
                # the byte limit below then counts what the body unpacks to, so a bomb stops there
                source: Iterator[bytes] = iter(lambda: read1(_READ_SIZE, decode_content=True), b"")
            else:  # urllib3 < 2: chunked bodies still arrive chunk by chunk
                source = resp.iter_content(chunk_size=None)
            for data in source:
                left = _time_left()
                if left is not None and left <= 0:
                    resp.close()
                    raise _timed_out(
                        f"{self.api_name} server at {self.url} was still sending when the run's time "
                        f"limit was up ({total} bytes read)",
                        url,
                        retries,
                        time_limit=True,
                    )
                if progress is not None and time.monotonic() - progress.last > self.timeout[1]:
                    resp.close()
                    raise _timed_out(
                        f"{self.api_name} server at {self.url} sent no event for more than "
                        f"{self.timeout[1]:g} s, only keep-alives (read timeout)",
                        url,
                        retries,
                    )
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
        except (TimeoutError, urllib3.exceptions.ReadTimeoutError, requests.exceptions.ReadTimeout) as exc:
            resp.close()
            left = _time_left()
            if left is not None and left < 0.1:
                raise _timed_out(
                    f"{self.api_name} server at {self.url} was still answering when the run's time "
                    f"limit was up ({total} bytes read)",
                    url,
                    retries,
                    time_limit=True,
                ) from exc
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
                f"after {total} bytes (stream cut off: did the server crash or restart?): {failure_reason(exc)}",
                url=url,
                retries=retries,
            ) from exc

    def _too_big(self, url: str, retries: int, limit: int, declared: int | None = None) -> BackendResponseError:
        what = f"announced a response of {declared} bytes" if declared is not None else "sent a response"
        return BackendResponseError(
            f"{self.api_name} server at {self.url} {what} larger than the {size_text(limit)} limit; refused "
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
                f"{self.api_name} server at {self.url} sent an empty response to {url_path(url)} (expected JSON)",
                url=url,
                retries=retries,
            )
        try:
            return json.loads(body.decode("utf-8"))
        except RecursionError as exc:
            raise self._too_deep(url_path(url), url, retries) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent malformed JSON for {url_path(url)}: "
                f"{exc}; body starts {excerpt(body[:400].decode('utf-8', 'replace'), 200)!r}",
                url=url,
                retries=retries,
            ) from exc

    def _lines(
        self, resp: requests.Response, url: str, retries: int, progress: _Progress | None = None
    ) -> Iterator[tuple[bytes, bool]]:
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
                    f"(stream cut off): {excerpt(data, 200)!r}",
                    url=url,
                    retries=retries,
                ) from exc
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} sent malformed JSON in a stream event: "
                f"{exc}: {excerpt(data, 200)!r}",
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

    def _answer_text(
        self, data: Mapping[str, Any], key: str, path: str, url: str, retries: int, where: str = ""
    ) -> str:
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
            f"{self.api_name} server at {self.url} reported an error in the middle of the stream: {excerpt(detail)}",
            status=status,
            body=json.dumps(payload, ensure_ascii=False, default=str)[:BODY_EXCERPT_CHARS],
            url=url,
            retries=retries,
        )

    def _iter_sse(self, resp: requests.Response, url: str, retries: int) -> Generator[Any, None, None]:
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
                            f"line (stream cut off): {excerpt(line, 200)!r}",
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

    def _stream_text(
        self,
        events: Generator[Any, None, None],
        resp: requests.Response,
        on_text: Callable[[str], Any] | None,
        read: Callable[[Any], tuple[str, str] | None],
    ) -> StreamEnd:
        """The one loop over a text stream's events (every backend's, SSE or NDJSON).

        ``read(event)`` gives the event's text and what the event is: ``LAST`` (the final one:
        the stream is complete), ``MORE`` (``on_text`` is asked whether to stop after it) or
        ``HOLD`` (it ends the text but more events are due: no early stop); None skips the
        event. Closes ``events`` and ``resp``."""
        text, seen, event = "", 0, None
        try:
            for event in events:
                got = read(event)
                if got is None:
                    continue
                piece, kind = got
                seen += 1
                text += piece
                if kind == LAST:
                    return StreamEnd(text, event, seen, complete=True)
                if kind == MORE and on_text is not None and piece and on_text(text):
                    return StreamEnd(text, event, seen, early=True)
        finally:
            events.close()
            resp.close()
        return StreamEnd(text, event, seen)

    def _iter_ndjson(self, resp: requests.Response, url: str, retries: int) -> Generator[Any, None, None]:
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


def _field_value(line: str) -> str:
    _, _, value = line.partition(":")
    return value[1:] if value.startswith(" ") else value
