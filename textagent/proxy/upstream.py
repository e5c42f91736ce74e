"""The model server behind the proxy: built in the background (the proxy listens at once, also
while an embedded llama-server starts), asked for its state by ``/health``, and shared between
requests through its slots."""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ..backends.base import NO_CAPABILITIES, Backend, Capabilities, capabilities_of, server_backend
from ..endpoint import Endpoint
from ..errors import BackendError, TextagentError
from ..templates import ChatFormat, get_format
from .errors import ProxyError, redact

__all__ = ["Upstream", "UpstreamConfig"]

log = logging.getLogger(__name__)


@dataclass
class UpstreamConfig:
    endpoint: str | None = None  # None: the embedded server (`textagent serve`'s, or one started here)
    api: str = "llamacpp"  # llamacpp | completions | ollama
    model: str | None = None  # the model id an OpenAI-compatible or Ollama endpoint serves
    gguf: str | None = None  # the embedded server's model
    api_key: str | None = None  # sent to the upstream
    chat_format: str | None = None  # default: the model's own (llama.cpp), else chatml
    timeout: float = 300.0  # read timeout of one upstream request
    parallel: int | None = None  # requests in flight upstream (default: llama.cpp's slots, else 4)
    # the llama.cpp server's slots this proxy uses (default: all): a server shared with other
    # clients keeps each client's KV cache when each has slots of its own
    slots: tuple[int, ...] = ()
    slot_wait: float = 600.0  # how long a request waits for a free slot
    ctx_size: int | None = None  # the embedded server: context per slot (default LocalServer's, 8192)
    server_args: tuple[str, ...] = ()  # the embedded server: more llama-server arguments
    prefix_cache: bool = True  # the embedded server restores saved prompt prefixes (backends/prefix_cache.py)


class Upstream:
    """State ``starting`` until the backend and chat format are known, then ``ready`` (or
    ``failed``, with the reason). ``try_acquire()``/``release()`` hand out the upstream's slots
    (the proxy's requests wait for theirs on its event loop), preferring the one a conversation
    used before (its KV cache holds that conversation)."""

    def __init__(self, config: UpstreamConfig, *, progress: Callable[[str], Any] = log.info):
        self.config = config
        self.progress: Callable[[str], Any] = lambda message: progress(self.redact(message))
        self.state, self.detail = "starting", ""
        self.backend: Backend | None = None
        self.capabilities: Capabilities = NO_CAPABILITIES  # the backend's, once it is made
        self.format: ChatFormat = get_format("chatml")
        self.takes_grammar = False
        self.model = config.model or config.gguf or "textagent"
        self._server: Any = None
        self.endpoint: Endpoint | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._free: list[int] = []
        self._cond = threading.Condition()
        self._last: dict[str, int] = {}
        self._retry = True  # a failed start is tried again by the next request (not an embedded server)

    # -- life ---------------------------------------------------------------------------------
    def start(self, *, background: bool = True) -> None:
        if background:
            threading.Thread(target=self._start, name="textagent-proxy-upstream", daemon=True).start()
        else:
            self._start()

    def _start(self) -> None:
        try:
            self._connect()
        except (TextagentError, OSError, ValueError) as exc:
            self.state, self.detail = "failed", self.redact(str(exc))
            log.error("upstream failed to start: %s", self.detail)
        else:
            self.state, self.detail = "ready", ""
        finally:
            self._ready.set()
        if self._server is not None:
            # the embedded llama-server is told to die with the thread that started it
            # (PR_SET_PDEATHSIG is per thread): this thread lives as long as the server should
            self._stopping.wait()

    def _connect(self) -> None:
        c = self.config
        if c.endpoint is not None and c.api not in ("llamacpp", "completions", "ollama"):
            raise TextagentError(f"unknown --api {c.api!r}; the proxy talks to llamacpp, completions or ollama")
        sizing: dict[str, Any] = {"ctx_size": c.ctx_size} if c.ctx_size else {}  # else LocalServer's default
        endpoint = self.endpoint = Endpoint(
            c.endpoint,
            api=c.api,
            model=c.model,
            api_key=c.api_key,
            timeout=c.timeout,
            chat_format=c.chat_format,
            gguf=c.gguf,
            server={"parallel": c.parallel or max(c.slots, default=1) + 1, "extra_args": list(c.server_args), **sizing},
            prefix_cache=c.prefix_cache,
            progress=self.progress,
        )
        try:
            self._open(endpoint)
        except BaseException:
            # a server started here that cannot serve is stopped, never left running; and it is
            # not started again by the next request: its failure (a template, a model) stays
            self._retry = endpoint.server is None
            self._server = None
            endpoint.stop()
            raise

    def _open(self, endpoint: Endpoint) -> None:
        c = self.config
        try:
            endpoint.open()
        except BackendError as exc:  # the server started, but its /props (read for the prefix cache) failed
            raise TextagentError(f"the model server at {endpoint.url} did not give its properties: {exc}") from None
        self._server = endpoint.server
        if self._server is not None:
            self.model = c.model or endpoint.model_label() or self.model
        self.backend = endpoint.connect()
        self.capabilities = capabilities_of(self.backend)
        endpoint.wait_ready(timeout=c.timeout, on_wait=self.progress)
        try:
            self.format = endpoint.chat_format(self.backend)
        except BackendError as exc:
            raise TextagentError(f"could not learn the chat template from {endpoint.url}: {exc}") from None
        self.takes_grammar = self.capabilities.grammar
        if not c.slots:
            self._free = list(range(c.parallel or endpoint.slots() or 4))
            return
        if not self.capabilities.slot_pinning:
            raise TextagentError("--slots needs a llama.cpp upstream (--api llamacpp): other APIs cannot pin a slot")
        known = endpoint.slots()
        if known is not None and max(c.slots) >= known:
            raise TextagentError(f"--slots {','.join(map(str, c.slots))}: the server has slots 0 to {known - 1}")
        self._free = list(c.slots)

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.stop()

    def wait(self, timeout: float | None = None) -> bool:
        return self._ready.wait(timeout)

    # -- state --------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` as a client or a log may see it: the credentials of the upstream's URL
        (``http://user:password@host``) and its API key never appear."""
        secrets = [self.config.api_key or ""]
        try:
            parts = urlsplit(self.config.endpoint or "")
            for secret in (parts.password, parts.username):
                if secret:
                    secrets += [secret, unquote(secret)]
        except ValueError:
            pass
        return redact(text, secrets)

    def health(self) -> dict[str, Any]:
        """What ``/health`` says about the upstream: state, and whether it answers now (llama.cpp:
        its own health; other APIs, which have none: any HTTP answer)."""
        url = server_backend(self.backend).url if self.backend is not None else self.config.endpoint
        out: dict[str, Any] = {"state": self.state, "url": self.redact(url) if isinstance(url, str) else url}
        if self.detail:
            out["detail"] = self.redact(self.detail)
        if self.state == "ready" and self.endpoint is not None:
            try:
                self.endpoint.probe(timeout=(2.0, 3.0))
            except BackendError as exc:
                out["state"], out["detail"] = "unavailable", self.redact(str(exc))
        return out

    def require(self) -> None:
        """ProxyError 503 unless the upstream is ready."""
        if self.state == "starting":
            raise ProxyError(
                503, "the upstream model server is still starting; retry in a moment", code="upstream_starting"
            )
        if self.state == "failed" and not self._retry:
            raise ProxyError(
                503,
                f"the embedded llama-server could not be used and was stopped: {self.redact(self.detail)}; "
                "restart the proxy once that is fixed",
                code="upstream_failed",
            )
        if self.state == "failed":
            detail, self.state = self.detail, "starting"
            self._ready.clear()
            self.start()  # the next request may find it up (a server started after the proxy)
            raise ProxyError(
                503, f"the upstream model server failed: {self.redact(detail)}; trying it again", code="upstream_failed"
            )

    # -- slots --------------------------------------------------------------------------------
    def options(self, slot: int) -> dict[str, Any]:
        """Request options for a request on ``slot`` (a server that pins it keeps its KV cache)."""
        return {"id_slot": slot} if self.capabilities.slot_pinning else {}

    def backend_for(self, sampling: dict[str, Any]) -> Any:
        """The backend with ``sampling`` (top_p, penalties, logit_bias) in every request body;
        ProxyError 400 for a field this upstream cannot take."""
        if not sampling:
            return self.backend
        refused = sorted(set(sampling) - self.capabilities.sampling)
        if refused:
            raise ProxyError(
                400,
                f"this upstream ({self.config.api}) cannot honour {', '.join(refused)}",
                param=refused[0],
                code="unsupported_parameter",
            )
        shared = server_backend(self.backend)
        backend = copy.copy(shared)  # shares the HTTP session; only the body differs
        backend.params = {**shared.params, **shared.sampling_params(sampling)}
        return backend

    @staticmethod
    def conversation_key(conversation: str) -> str:
        """What tells conversations apart for ``try_acquire`` (any text: a lone surrogate too)."""
        return hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()

    def try_acquire(self, key: str) -> int | None:
        """A free slot at once (the one conversation ``key`` used before, if it is free), or None."""
        with self._cond:
            if not self._free:
                return None
            preferred = self._last.get(key)
            slot = preferred if preferred in self._free else self._free[0]
            self._free.remove(slot)
            self._last[key] = slot
            if len(self._last) > 10_000:
                self._last.pop(next(iter(self._last)))
            return slot

    def release(self, slot: int) -> None:
        with self._cond:
            self._free.append(slot)
            self._cond.notify()
