"""Where the model answers: one object that opens a server at a URL or the embedded llama-server,
and knows its backends, chat format, slots and prefix cache.

``run``, ``chat``, ``bench`` and ``proxy`` each open an :class:`Endpoint`; ``serve`` starts the
embedded server that a later ``run`` finds (``reuse_served``). What was worked out in each of
them before (which server, which backend, which chat format, how many slots, is it alive,
which model it serves) is worked out here once, by asking the backends' Capabilities, never
their type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any

from .backends.base import Backend, Capabilities, ServerBackend, capabilities_of, server_backend
from .backends.factory import api_capabilities, connect
from .errors import BackendConnectionError, BackendError, BackendHTTPError, BackendTimeout, TextagentError
from .templates import ChatFormat, format_from_renderer, get_format

__all__ = ["DeadEndpoint", "Endpoint"]

log = logging.getLogger(__name__)


class DeadEndpoint(BackendError):
    """The endpoint does not answer, answers with a server error, or refuses the key."""


def _quiet(_: str) -> None:
    pass


class Endpoint:
    """A model server: ``url`` with ``api`` (llamacpp, completions, chat, ollama), or, with no
    ``url``, the embedded llama-server: the one `textagent serve` runs (``reuse_served``, when
    no ``gguf`` is named) or one started here with ``server`` options (LocalServer's: parallel,
    ctx_size, threads, poll, extra_args) and stopped by :meth:`stop`.

    ``chat_format``: a format name, or None for the model's own ("server": asked from llama.cpp),
    chatml elsewhere. ``prefix_cache``: the embedded server restores saved prompt prefixes.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api: str = "llamacpp",
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 300.0,
        grammar_field: str | None = None,
        chat_format: str | ChatFormat | None = None,
        gguf: str | None = None,
        reuse_served: bool = True,
        server: Mapping[str, Any] | None = None,
        prefix_cache: bool = True,
        progress: Callable[[str], Any] = _quiet,
    ):
        self.url, self.api, self.model, self.api_key = url, api, model, api_key
        self.timeout, self.grammar_field, self.format_name = timeout, grammar_field, chat_format
        self.gguf, self.reuse_served, self.server_options = gguf, reuse_served, dict(server or {})
        self.use_prefix_cache, self.progress = prefix_cache, progress
        self.embedded = url is None
        self.server: Any = None  # the LocalServer started here
        self.served: dict[str, str] | None = None  # the state of the server `textagent serve` runs
        self.prefix_cache: Any = None
        self._format: ChatFormat | None = None

    # -- life ---------------------------------------------------------------------------------------
    def open(self) -> Endpoint:
        """Find or start the server (the embedded one), so that :meth:`connect` can reach it."""
        if not self.embedded or self.url is not None:
            return self
        if self.api != "llamacpp":
            raise TextagentError("the embedded server speaks llamacpp; pass --endpoint for other APIs")
        from . import local

        self.served = local.running_server() if self.gguf is None and self.reuse_served else None
        if self.served:
            self.url = self.served["url"]
            self.format_name = self.format_name or self.served.get("chat_format", "server")
        else:
            self.server = local.LocalServer(
                self.gguf, progress=self.progress, prefix_cache=self.use_prefix_cache, **self.server_options
            )
            try:
                self.server.start()
            except BaseException:
                self.server.stop()
                raise
            self.url = self.server.url
            self.format_name = self.format_name or self.server.chat_format
        if self.use_prefix_cache:
            backend = self._backend()
            self.prefix_cache = (
                self.server.prefix_cache(backend)
                if self.server
                else local.served_prefix_cache(self.served or {}, backend)
            )
        return self

    def stop(self) -> None:
        """Stop the server started here (one found running is left running)."""
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> Endpoint:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what it serves -------------------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """What the endpoint's completion backend can do, known before any backend is made."""
        return api_capabilities(self._api, grammar_field=self.grammar_field)

    @property
    def _api(self) -> str:
        return "llamacpp" if self.embedded else self.api

    def _backend(
        self, *, chat: bool = False, retries: int | None = None, timeout: Any = None, probe: bool = False
    ) -> ServerBackend:
        """A new backend of the API (its own HTTP session). ``probe``: one that asks no model
        (any name will do for Ollama's) and sends the key to OpenAI-style servers only."""
        if self.url is None:
            raise TextagentError("the endpoint is not open: call open() first")
        extra: dict[str, Any] = {} if retries is None else {"retries": retries}
        timeout = self.timeout if timeout is None else timeout
        if self.embedded:  # the embedded server takes no model id and no key
            return server_backend(connect("llamacpp", self.url, timeout=timeout, chat=chat, **extra))
        ollama = self.api == "ollama"
        return server_backend(
            connect(
                self.api,
                self.url,
                model=(self.model or "-") if probe and ollama else self.model,
                api_key=None if probe and ollama else self.api_key,
                timeout=timeout,
                chat=chat,
                grammar_field=self.grammar_field,
                **extra,
            )
        )

    def connect(self, *, chat: bool = False, retries: int | None = None) -> Backend:
        """A new backend on the endpoint (its own HTTP session): the chat endpoint for native
        modes (``chat``), else the API's completion endpoint, with the prefix cache attached."""
        backend = self._backend(chat=chat, retries=retries)
        if self.prefix_cache is not None and backend.capabilities.prefix_cache:
            backend.prefix_cache = self.prefix_cache
        return backend

    def chat_format(self, backend: Backend | None = None) -> ChatFormat:
        """How a conversation is written into a prompt for ``backend`` (default: the endpoint's
        completion backend): the named format, or the model's own, learned once from llama.cpp's
        ``/apply-template``; chatml for a chat backend, which the server templates itself."""
        name = self.format_name or ("server" if self.capabilities.template else "chatml")
        if isinstance(name, ChatFormat):
            return name
        if name != "server":
            return get_format(name)
        if backend is not None and not capabilities_of(backend).template:
            if capabilities_of(backend).chat:
                return get_format("chatml")  # native modes: the server applies its own template
            raise _no_template()
        if self._format is None:  # BackendError when the server cannot say
            renderer = server_backend(backend) if backend is not None else self._backend()
            if not renderer.capabilities.template:
                raise _no_template()
            self._format = format_from_renderer(renderer.apply_template, name="server")
        return self._format

    def _props(self) -> dict[str, Any] | None:
        """The server's ``/props`` (asked once, no retries), None when it has none or cannot say."""
        if not self.capabilities.slots:
            return None
        server = self._backend(retries=0)
        try:
            return server.props()
        except BackendError as exc:
            log.debug("no /props from %s: %s", self.url, exc)
            return None
        finally:
            server.close()

    def slots(self) -> int | None:
        """How many requests the server runs at once (llama.cpp's ``/props`` total_slots), if it says."""
        value = (self._props() or {}).get("total_slots")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def served_model(self) -> str:
        """The file name of the model the server says it serves (llama.cpp's ``/props``
        model_path), or "" when it cannot say: how a report names a model found at a URL."""
        path = (self._props() or {}).get("model_path")
        return PurePath(path).name if isinstance(path, str) and path else ""

    def model_label(self) -> str:
        """The model, as a report names it: the embedded model file's stem, or the model id."""
        if self.server is not None and self.server.model_path is not None:
            return str(self.server.model_path.stem)
        if self.served:
            return str(self.served.get("model", "")).rsplit("/", 1)[-1].removesuffix(".gguf")
        return self.model or ""

    # -- is it alive ----------------------------------------------------------------------------------
    def probe(self, *, timeout: Any = (2.0, 3.0)) -> None:
        """One request now, on a connection of its own, no retries: the BackendError that says
        why the server cannot serve, if it cannot. A server with a health endpoint must say it
        is ready (not loading, not failing); one without (OpenAI-style, Ollama) is there when it
        answers the API's cheapest request at all."""
        server = self._backend(retries=0)
        try:
            if server.capabilities.health:
                server.health(timeout=timeout)
                return
            try:
                server.probe(timeout=timeout)
            except BackendHTTPError:
                pass  # an answer, even an error status: a server is there
        finally:
            server.close()

    def wait_ready(self, *, timeout: float = 300.0, on_wait: Callable[[str], Any] | None = None) -> None:
        """Wait (up to ``timeout`` seconds, ``on_wait`` told why) until a server that says when it
        is ready (llama.cpp, loading its model) is; a server that cannot say is not waited for."""
        server = self._backend()
        try:
            if server.capabilities.health:
                server.wait_healthy(timeout, on_wait)
        finally:
            server.close()

    def check(
        self, *, timeout: float = 10.0, load_timeout: float = 300.0, on_wait: Callable[[str], Any] | None = None
    ) -> None:
        """Raise DeadEndpoint, saying what is wrong and what to do, unless the server answers.

        A server with a health endpoint must be healthy (one still loading its model is waited
        for, up to ``load_timeout``); others get the API's cheapest request (``GET /v1/models``,
        Ollama's ``GET /api/version``), where any answer but a server error or a refused key
        means alive."""
        url = self.url or ""
        server = self._backend(retries=0, timeout=(min(timeout, 5.0), timeout), probe=True)
        try:
            if not server.capabilities.health:
                server.probe()
                return
            try:
                server.health()
            except BackendHTTPError as exc:
                if exc.status != 503:
                    raise
                server.wait_healthy(load_timeout, on_wait)  # loading the model
        except BackendHTTPError as exc:
            if exc.status in (401, 403):
                raise DeadEndpoint(
                    f"{url} refused the API key (HTTP {exc.status}); pass --api-key or set $OPENAI_API_KEY", url=url
                ) from exc
            if exc.status >= 500:
                raise DeadEndpoint(f"{url} is not healthy: {exc}", url=url) from exc
            log.info("%s answered the health probe with HTTP %d: alive", url, exc.status)
        except (BackendConnectionError, BackendTimeout) as exc:
            raise DeadEndpoint(
                f"{url} is not answering ({exc}); start the server or fix --endpoint/--api", url=url
            ) from exc
        finally:
            server.close()


def _no_template() -> TextagentError:
    return TextagentError("--chat-format server needs a llama.cpp endpoint (--api llamacpp)")
