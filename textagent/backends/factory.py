"""Where a backend is built from an API name and a URL (the CLI, bench, proxy and the examples all
call :func:`connect`). Two derive one from a backend they have: ``LlamaCppBackend.chat_backend()``
(the same server's chat endpoint) and the proxy's per-request copy with the client's sampling
fields (``Upstream.backend_for``).

    connect("llamacpp", "http://127.0.0.1:8080")                     # /completion
    connect("llamacpp", url, chat=True)                               # the same server's /v1/chat/completions
    connect("completions", url, model="m", grammar_field="grammar")   # /v1/completions
    connect("ollama", "http://127.0.0.1:11434", model="qwen2.5-coder:0.5b")

One rule for every API's options: ``model``, ``api_key``, ``timeout`` and the HTTP settings are
passed to whichever backend takes them; the Ollama API needs ``model`` (there is no default
model: a name Ollama has not pulled fails later and less clearly). ``chat=True`` asks for the
chat endpoint of an OpenAI-style server (native function calling); Ollama has none, so its
backend is returned as is and a mode that needs chat refuses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from ..errors import TextagentError
from .base import OPENAI_SAMPLING, Capabilities

if TYPE_CHECKING:
    from ._http import HTTPBackend
    from .llamacpp import LlamaCppBackend

__all__ = ["APIS", "api_capabilities", "connect"]

#: The APIs connect() knows, with what each one's endpoint is.
APIS = {
    "llamacpp": "llama.cpp /completion",
    "completions": "OpenAI /v1/completions",
    "chat": "OpenAI /v1/chat/completions without tools",
    "ollama": "Ollama /api/generate",
}


def api_capabilities(api: str, *, grammar_field: str | None = None) -> Capabilities:
    """What the backends connect() builds for ``api`` can do (Capabilities): their completion
    backend's, with ``chat`` where the API has a /v1/chat/completions endpoint (native function
    calling, through ``connect(..., chat=True)``)."""
    _check_api(api)
    if api == "llamacpp":
        from .llamacpp import LlamaCppBackend

        return LlamaCppBackend.capabilities
    if api == "ollama":
        from .ollama import OllamaBackend

        return OllamaBackend.capabilities
    return Capabilities(grammar=grammar_field is not None, chat=True, streaming=True, sampling=OPENAI_SAMPLING)


@overload
def connect(
    api: Literal["llamacpp"],
    url: str | None,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout: Any = None,
    chat: Literal[False] = False,
    grammar_field: str | None = None,
    **http_options: Any,
) -> LlamaCppBackend: ...


@overload
def connect(
    api: str,
    url: str | None,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout: Any = None,
    chat: bool = False,
    grammar_field: str | None = None,
    **http_options: Any,
) -> HTTPBackend: ...


def connect(
    api: str,
    url: str | None,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout: Any = None,
    chat: bool = False,
    grammar_field: str | None = None,
    **http_options: Any,
) -> HTTPBackend:
    """The backend for an endpoint of ``api`` (one of APIS) at ``url``.

    ``chat``: the conversation goes to the server's /v1/chat/completions (ChatAsTextBackend,
    whose ``chat()`` is native function calling), for every API that has one. ``timeout``:
    None for the backend's default. ``http_options``: the other HttpSettings fields
    (``retries``, ``session``, ...). Raises TextagentError for an unknown API or a missing
    Ollama model."""
    from .chat import ChatAsTextBackend
    from .llamacpp import LlamaCppBackend
    from .ollama import OllamaBackend
    from .openai import OpenAICompletionsBackend

    _check_api(api)
    if timeout is not None:
        http_options["timeout"] = timeout
    if api_key is not None:
        http_options["api_key"] = api_key
    if api == "ollama":
        if not model:
            raise TextagentError(
                "the Ollama API needs a model (--model, model=...): the name of a model the "
                "server has pulled, e.g. qwen2.5-coder:0.5b"
            )
        return OllamaBackend(url, model=model, **http_options)
    if chat or api == "chat":
        return ChatAsTextBackend(url, model=model, grammar_field=grammar_field, **http_options)
    if api == "llamacpp":
        return LlamaCppBackend(url, **http_options)
    return OpenAICompletionsBackend(url, model=model, grammar_field=grammar_field, **http_options)


def _check_api(api: str) -> None:
    if api not in APIS:
        raise TextagentError(f"unknown API {api!r}; choose one of {', '.join(APIS)}")
