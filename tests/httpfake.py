"""A small scripted HTTP server for backend tests (stdlib only).

    with FakeServer() as srv:
        srv.json("/completion", {"content": "hi", "stop_type": "eos"})
        srv.sse("/completion", [{"content": "h"}, ": keep-alive", {"content": "i", "stop": True}])
        srv.add("/health", status=503, json={"error": {"message": "Loading model"}})
        ...                      # point a backend at srv.url
        srv.requests[0].json     # what the client sent

Replies are queued per path (FIFO) and consumed one per request; ``repeat=True`` keeps a reply
for every later request. A request with nothing scripted gets HTTP 599 and is recorded in
``srv.unexpected``. Faults: ``delay`` (seconds before the status line), ``chunk_delay``,
``cut=True`` (drop the connection after the scripted chunks, mid-stream), ``close=True``
(drop the connection without answering at all). A callable among a stream's chunks (or events)
is called, not sent, when the stream reaches it: a test's hook to wait for what the client got.
"""

from __future__ import annotations

import json as _json
import socket
import threading
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeServer", "Recorded", "Reply", "closed_port_url", "sse_body"]


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    chunked: bool = False  # Transfer-Encoding: chunked (streams) instead of Content-Length
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut: bool = False
    close: bool = False
    repeat: bool = False
    method: str | None = None  # only answer this method (None: any)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return _json.loads(self.body.decode("utf-8")) if self.body else None


def _event_bytes(event: Any) -> bytes:
    """One SSE event: a dict/list becomes ``data: <json>``; a str/bytes is written as given
    (a str without a trailing newline gets the blank-line terminator)."""
    if isinstance(event, bytes) or callable(event):
        return event
    if isinstance(event, str):
        return (event if event.endswith("\n") else event + "\n\n").encode("utf-8")
    return b"data: " + _json.dumps(event).encode("utf-8") + b"\n\n"


def sse_body(events: Iterable[Any]) -> list[bytes]:
    return [_event_bytes(e) for e in events]


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else headers + body in two writes cost a 40 ms delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _serve(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        rec = Recorded(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body)
        reply = fake._take(self.command, path, rec)
        if reply is None:
            reply = Reply(status=599, chunks=[b'{"error": "httpfake: nothing scripted for this path"}'])
        if reply.delay and fake._stopping.wait(reply.delay):
            return
        if reply.close:
            self._drop()
            return
        try:
            self.send_response(reply.status)
            headers = {"Content-Type": "application/json", **reply.headers}
            for key, value in headers.items():
                self.send_header(key, value)
            if reply.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            elif not reply.cut:
                self.send_header("Content-Length", str(sum(len(c) for c in reply.chunks if not callable(c))))
            else:  # a cut body announces its full size but stops short
                self.send_header("Content-Length", str(sum(len(c) for c in reply.chunks if not callable(c)) + 100))
            self.end_headers()
            for chunk in reply.chunks:
                if callable(chunk):
                    chunk()
                    continue
                if reply.chunk_delay and fake._stopping.wait(reply.chunk_delay):
                    return
                if reply.chunked:
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if reply.cut:
                self._drop()
                return
            if reply.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-reply is what the fault tests are about


class FakeServer:
    def __init__(self) -> None:
        self._queues: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified at every request
        self._stopping = threading.Event()
        self.requests: list[Recorded] = []
        self.unexpected: list[Recorded] = []
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------
    def add(
        self,
        path: str,
        *,
        status: int = 200,
        json: Any = None,
        body: bytes | str | None = None,
        chunks: Iterable[bytes] | None = None,
        headers: dict[str, str] | None = None,
        chunked: bool = False,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        cut: bool = False,
        close: bool = False,
        repeat: bool = False,
        method: str | None = None,
    ) -> Reply:
        if json is not None:
            parts = [_json.dumps(json).encode("utf-8")]
        elif body is not None:
            parts = [body.encode("utf-8") if isinstance(body, str) else body]
        else:
            parts = list(chunks or [])
        reply = Reply(
            status=status,
            headers=dict(headers or {}),
            chunks=parts,
            chunked=chunked,
            delay=delay,
            chunk_delay=chunk_delay,
            cut=cut,
            close=close,
            repeat=repeat,
            method=method,
        )
        with self._lock:
            self._queues[path].append(reply)
        return reply

    def json(self, path: str, obj: Any, status: int = 200, **kw: Any) -> Reply:
        return self.add(path, status=status, json=obj, **kw)

    def sse(self, path: str, events: Iterable[Any], **kw: Any) -> Reply:
        kw.setdefault("chunked", True)
        headers = {"Content-Type": "text/event-stream", **kw.pop("headers", {})}
        return self.add(path, chunks=sse_body(events), headers=headers, **kw)

    def ndjson(self, path: str, lines: Iterable[Any], **kw: Any) -> Reply:
        kw.setdefault("chunked", True)
        headers = {"Content-Type": "application/x-ndjson", **kw.pop("headers", {})}
        parts = [
            line if isinstance(line, bytes) else (line if isinstance(line, str) else _json.dumps(line) + "\n").encode()
            for line in lines
        ]
        return self.add(path, chunks=parts, headers=headers, **kw)

    def _take(self, method: str, path: str, rec: Recorded) -> Reply | None:
        with self._lock:
            self.requests.append(rec)
            self._arrived.notify_all()
            queue = self._queues.get(path)
            if queue:
                for i, reply in enumerate(queue):
                    if reply.method is None or reply.method == method:
                        if not reply.repeat:
                            del queue[i]
                        return reply
            self.unexpected.append(rec)
            return None

    def wait_for_requests(self, count: int, path: str | None = None, timeout: float = 10.0) -> None:
        """Block until ``count`` requests (to ``path``, if given) have arrived: the event a test
        waits for, instead of sleeping and hoping. AssertionError after ``timeout`` seconds."""

        def arrived() -> bool:
            return sum(path is None or r.path == path for r in self.requests) >= count

        with self._arrived:
            if not self._arrived.wait_for(arrived, timeout):
                raise AssertionError(f"{count} request(s) to {path or 'any path'} did not arrive in {timeout} s")

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values() if q and not all(r.repeat for r in q))

    def bodies(self, path: str | None = None) -> list[Any]:
        """JSON bodies of the recorded requests (to one path, if given)."""
        return [r.json for r in self.requests if path is None or r.path == path]
