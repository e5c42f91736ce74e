"""Where the model answers: one object that opens a server at a URL or the embedded llama-server,
and knows its backends, chat format, slots and prefix cache.

``run``, ``chat``, ``bench`` and ``proxy`` each open an :class:`Endpoint`; ``serve`` starts the
embedded server that a later ``run`` finds (``reuse_served``). What was worked out in each of
them before (which server, which backend, which chat format, how many slots) is worked out here
once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .backends import connect
from .errors import BackendError, TextagentError
from .templates import ChatFormat, format_from_renderer, get_format

__all__ = ["Endpoint"]


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
            backend = connect("llamacpp", self.url, timeout=self.timeout)
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
    def connect(self, *, chat: bool = False, retries: int | None = None) -> Any:
        """A new backend on the endpoint (its own HTTP session): the chat endpoint for native
        modes (``chat``), else the API's completion endpoint, with the prefix cache attached."""
        if self.url is None:
            raise TextagentError("the endpoint is not open: call open() first")
        api = "llamacpp" if self.embedded else self.api
        extra: dict[str, Any] = {} if retries is None else {"retries": retries}
        if self.embedded:  # the embedded server takes no model id and no key
            backend = connect(api, self.url, timeout=self.timeout, chat=chat, **extra)
        else:
            backend = connect(
                api,
                self.url,
                model=self.model,
                api_key=self.api_key,
                timeout=self.timeout,
                chat=chat,
                grammar_field=self.grammar_field,
                **extra,
            )
        if self.prefix_cache is not None and hasattr(backend, "prefix_cache"):
            backend.prefix_cache = self.prefix_cache
        return backend

    def chat_format(self, backend: Any = None) -> ChatFormat:
        """How a conversation is written into a prompt for ``backend`` (default: the endpoint's
        completion backend): the named format, or the model's own, learned once from llama.cpp's
        ``/apply-template``; chatml for a chat backend, which the server templates itself."""
        name = self.format_name or ("server" if self.embedded or self.api == "llamacpp" else "chatml")
        if isinstance(name, ChatFormat):
            return name
        if name != "server":
            return get_format(name)
        if backend is not None and not hasattr(backend, "apply_template"):
            if hasattr(backend, "chat"):
                return get_format("chatml")  # native modes: the server applies its own template
            raise TextagentError("--chat-format server needs a llama.cpp endpoint (--api llamacpp)")
        if self._format is None:  # BackendError when the server cannot say
            renderer = backend if backend is not None else self.connect()
            self._format = format_from_renderer(renderer.apply_template, name="server")
        return self._format

    def slots(self) -> int | None:
        """How many requests the server runs at once (llama.cpp's ``/props`` total_slots), if it says."""
        if not (self.embedded or self.api == "llamacpp"):
            return None
        try:
            value = self.connect(retries=0).props().get("total_slots")
        except BackendError:
            return None
        return value if isinstance(value, int) and value > 0 else None

    def model_label(self) -> str:
        """The model, as a report names it: the embedded model file's stem, or the model id."""
        if self.server is not None and self.server.model_path is not None:
            return str(self.server.model_path.stem)
        if self.served:
            return str(self.served.get("model", "")).rsplit("/", 1)[-1].removesuffix(".gguf")
        return self.model or ""
