"""OpenAI-compatible servers (vLLM, llama-cpp-python, llama.cpp, LM Studio, TGI, ...):
plain-text ``POST /v1/completions``. The chat endpoint lives in ``chat.py``.

The URL may be the server root (``http://host:8000``), the API root (``.../v1``) or the full
endpoint URL; all three mean the same server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from ..errors import BackendResponseError, ModeNotSupported
from ._http import DONE, HTTPBackend
from ._payload import llama_timings, openai_top_tokens, openai_usage
from ._reading import HOLD, LAST, MORE
from .base import OPENAI_SAMPLING, Capabilities, Completion
from .http_settings import HttpSettings

__all__ = ["OpenAICompletionsBackend", "openai_root"]

_FINISH = {"stop": "stop", "eos": "stop", "length": "length", "tool_calls": "stop", "function_call": "stop"}


def openai_root(url: str | None, default: str = "http://127.0.0.1:8080") -> str:
    """``http://host`` / ``http://host/v1`` / ``http://host/v1/completions`` -> ``http://host/v1``."""
    root = (url or default).strip().rstrip("/")
    if not root:
        raise ValueError("an OpenAI-compatible backend needs a server URL")
    for suffix in ("/chat/completions", "/completions"):
        if root.endswith(suffix):
            root = root[: -len(suffix)]
            break
    if not root.endswith("/v1"):
        root += "/v1"
    return root


def _finish(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return _FINISH.get(value, value)


class _OpenAIBase(HTTPBackend):
    """Shared by the completions and chat backends: URL, auth, payload basics, streaming."""

    api_name = "OpenAI-compatible"
    endpoint = "/completions"

    def __init__(
        self,
        url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        stream: bool = False,
        temperature: float = 0.0,
        seed: int | None = None,
        grammar_field: str | None = None,
        stream_usage: bool = True,
        params: Mapping[str, Any] | None = None,
        http: HttpSettings | None = None,
        **http_options: Any,
    ):
        super().__init__(openai_root(url, self.default_url), http=http, api_key=api_key, **http_options)
        self.model = model
        self.stream = bool(stream)
        self.temperature = temperature
        self.seed = seed
        self.grammar_field = grammar_field
        self.stream_usage = stream_usage
        self.params: dict[str, Any] = dict(params or {})

    probe_path = "/models"

    @property
    def capabilities(self) -> Capabilities:
        """grammar only with a ``grammar_field``; chat only for the chat backend; token_probs for
        completions (the legacy ``logprobs`` field)."""
        return Capabilities(
            grammar=bool(self.grammar_field),
            chat=self._chat,
            streaming=True,
            sampling=OPENAI_SAMPLING,
            token_probs=not self._chat,
        )

    _chat = False  # native function calling (chat()): ChatAsTextBackend

    def _status_hint(self, status: int, server_message: str | None) -> str | None:
        if status == 404 and not (server_message and "model" in server_message.lower()):
            return (
                f"{self.url}{self.endpoint} does not exist: is it an OpenAI-compatible server, "
                "and does it offer this endpoint? (choose the matching --api)"
            )
        if status in (400, 404, 422) and server_message and "model" in server_message.lower() and not self.model:
            return "this server wants a model name: pass model=... (--model)"
        return super()._status_hint(status, server_message)

    def _base_payload(self, *, stop: Sequence[str] | str | None, max_tokens: int, options: Mapping[str, Any]) -> dict:
        payload: dict[str, Any] = {}
        if self.model:
            payload["model"] = self.model
        # always sent: vLLM (and the OpenAI spec) default max_tokens to 16
        payload["max_tokens"] = int(max_tokens)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if stops:
            payload["stop"] = stops
        temperature = options.get("temperature")
        payload["temperature"] = self.temperature if temperature is None else temperature
        seed = options.get("seed", self.seed)
        if seed is not None:
            payload["seed"] = seed
        grammar = options.get("grammar")
        if grammar:
            if not self.grammar_field:
                raise ModeNotSupported(
                    f"{type(self).__name__} cannot constrain output with a grammar: the OpenAI API has no "
                    "grammar field. For llama.cpp's OpenAI endpoint construct it with grammar_field='grammar' "
                    "(vLLM: 'guided_grammar'), or use LlamaCppBackend, or a mode without a grammar."
                )
            payload[self.grammar_field] = grammar
        return payload

    def _stream_flags(self, payload: dict[str, Any], stream: bool) -> None:
        payload["stream"] = stream
        if stream and self.stream_usage:
            payload["stream_options"] = {"include_usage": True}

    @staticmethod
    def _want_stream(backend_default: bool, options: Mapping[str, Any]) -> tuple[bool, Callable[[str], Any] | None]:
        on_text = options.get("on_text")
        stream = options.get("stream")
        return ((backend_default or on_text is not None) if stream is None else bool(stream)), on_text

    def _first_choice(self, data: Any, url: str, retries: int) -> Mapping[str, Any]:
        data = self._answer_object(data, self.endpoint, url, retries)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} answered {self.endpoint} without choices "
                f"(keys: {sorted(data)[:12]}); is it an OpenAI-compatible server?",
                url=url,
                retries=retries,
            )
        return choices[0]

    def _piece(self, choice: Mapping[str, Any]) -> Any:
        """The text of one streamed choice chunk (completions: ``text``; chat: ``delta.content``)."""
        return choice.get("text")

    def _read_stream(
        self,
        resp: requests.Response,
        url: str,
        retries: int,
        started: float,
        on_text: Callable[[str], Any] | None,
    ) -> Completion:
        finish: str | None = None
        stop_word: str | None = None
        usage: Any = None
        timings: Any = None

        def read(event: Any) -> tuple[str, str]:
            nonlocal finish, stop_word, usage, timings
            if event is DONE:
                return "", LAST
            if not isinstance(event, Mapping):
                raise BackendResponseError(
                    f"{self.api_name} server at {self.url} sent a stream event that is not an object: {event!r:.200}",
                    url=url,
                    retries=retries,
                )
            if isinstance(event.get("usage"), Mapping):
                usage = event["usage"]
            if isinstance(event.get("timings"), Mapping):
                timings = event["timings"]
            choices = event.get("choices") or []
            choice = choices[0] if isinstance(choices, list) and choices else None
            if not isinstance(choice, Mapping):
                return "", MORE
            piece = self._piece(choice) or ""
            if not isinstance(piece, str):
                raise BackendResponseError(
                    f"{self.api_name} server at {self.url} sent a stream chunk whose text is not a string",
                    url=url,
                    retries=retries,
                )
            if not choice.get("finish_reason"):
                return piece, MORE
            finish = _finish(choice["finish_reason"])
            if isinstance(choice.get("stop_reason"), str):
                stop_word = choice["stop_reason"]
            return piece, HOLD  # usage may follow before [DONE]

        end = self._stream_text(self._iter_sse(resp, url, retries), resp, on_text, read)
        if end.early:
            return Completion(
                text=end.text,
                finish_reason="early_stop",
                usage=openai_usage(usage, timings),
                timings={**llama_timings(timings), "wall_ms": (time.perf_counter() - started) * 1000},
                retries=retries,
            )
        if not end.complete and finish is None:
            seen = end.seen
            what = "an empty stream" if not seen else f"a stream that ended after {seen} events without [DONE]"
            raise self._cut_off(what, url, retries)
        text = end.text
        return Completion(
            text=text,
            finish_reason=finish,
            stop_word=stop_word,
            usage=openai_usage(usage, timings),
            timings={**llama_timings(timings), "wall_ms": (time.perf_counter() - started) * 1000},
            retries=retries,
        )

    def models(self) -> list[str]:
        """``GET /v1/models``: the model ids the server offers."""
        data, retries = self._request_json("GET", "/models")
        items = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(items, list):
            raise BackendResponseError(
                f"{self.api_name} server at {self.url} answered /models without a 'data' list",
                url=self._url("/models"),
                retries=retries,
            )
        return [item["id"] for item in items if isinstance(item, Mapping) and isinstance(item.get("id"), str)]


class OpenAICompletionsBackend(_OpenAIBase):
    """Plain-text completions from ``POST /v1/completions`` of any OpenAI-compatible server.

    ``max_tokens`` is always sent (vLLM defaults to 16). ``model`` is sent when given (vLLM and
    hosted APIs need it; llama.cpp and llama-cpp-python do not). ``api_key`` becomes a Bearer
    token. Usage comes from ``usage`` (``prompt_tokens_details.cached_tokens`` when the server
    reports the reused prefix; llama.cpp's extra ``timings`` when present).

    ``grammar``: the OpenAI API has none, so a ``grammar`` option raises ModeNotSupported
    unless ``grammar_field`` names the server's field for it: ``"grammar"`` for llama.cpp's
    ``/v1/completions``, ``"guided_grammar"`` for vLLM.

    Streaming (``stream=True`` or an ``on_text`` option) reads SSE until ``data: [DONE]`` and
    asks for usage in the last chunk (``stream_options.include_usage``; ``stream_usage=False``
    for servers that reject it). ``params`` are extra fields merged into every request body.
    ``http``: the HTTP settings (HttpSettings); its fields may be given as keyword arguments too.
    """

    # what Agent(..., **options) may pass to complete() (see Backend)
    request_options = frozenset({"temperature", "seed", "stream", "on_text", "grammar"})

    endpoint = "/completions"

    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        stream, on_text = self._want_stream(self.stream, options)
        payload = self._base_payload(stop=stop, max_tokens=max_tokens, options=options)
        payload["prompt"] = prompt
        if options.get("token_probs"):  # the first token's alternatives: at most 5 in OpenAI's API
            payload["logprobs"] = min(int(options["token_probs"]), 5)
        self._stream_flags(payload, stream)
        payload.update(self.params)
        return self._generate(self.endpoint, payload, stream, on_text)

    def _from_json(self, data: Any, url: str, retries: int, started: float) -> Completion:
        choice = self._first_choice(data, url, retries)
        text = self._answer_text(choice, "text", "/completions", url, retries, where=" in choices[0]")
        stop_reason = choice.get("stop_reason")
        return Completion(
            text=text,
            finish_reason=_finish(choice.get("finish_reason")),
            stop_word=stop_reason if isinstance(stop_reason, str) and stop_reason else None,
            usage=openai_usage(data.get("usage"), data.get("timings")),
            timings={**llama_timings(data.get("timings")), "wall_ms": (time.perf_counter() - started) * 1000},
            retries=retries,
            top_tokens=openai_top_tokens(choice),
        )
