"""Ollama: ``POST /api/generate`` with ``raw: true`` (textagent's prompt is sent verbatim)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from ..errors import ModeNotSupported
from ._http import HTTPBackend
from ._payload import _count, _number
from ._reading import LAST, MORE
from .base import Capabilities, Completion, Usage
from .http_settings import HttpSettings

__all__ = ["OllamaBackend"]

DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"
_FINISH = {"stop": "stop", "length": "length"}


def _usage(data: Mapping[str, Any]) -> Usage:
    # Since Ollama 0.2 (PR #5371) prompt_eval_count counts the whole prompt, cached or not;
    # newer servers add prompt_eval_cached_count for the reused prefix.
    prompt = _count(data.get("prompt_eval_count"))
    cached = _count(data.get("prompt_eval_cached_count"))
    evaluated = max(prompt - cached, 0) if prompt is not None and cached is not None else None
    return Usage(
        prompt_tokens=prompt,
        prompt_evaluated=evaluated,
        prompt_cached=cached,
        completion_tokens=_count(data.get("eval_count")),
    )


def _timings(data: Mapping[str, Any]) -> dict[str, float]:
    """Ollama durations are nanoseconds; textagent's timings are milliseconds."""
    out: dict[str, float] = {}
    for src, dst in (
        ("prompt_eval_duration", "prompt_ms"),
        ("eval_duration", "predicted_ms"),
        ("load_duration", "load_ms"),
        ("total_duration", "total_ms"),
    ):
        ns = _number(data.get(src))
        if ns is not None:
            out[dst] = ns / 1e6
    for count_key, ms_key, rate_key in (
        ("prompt_eval_count", "prompt_ms", "prompt_per_second"),
        ("eval_count", "predicted_ms", "predicted_per_second"),
    ):
        count = _count(data.get(count_key))
        if count is not None and out.get(ms_key):
            out[rate_key] = count / (out[ms_key] / 1000)
    return out


class OllamaBackend(HTTPBackend):
    """Completions from an Ollama server through ``/api/generate`` with ``raw: true``.

    ``model`` is required (an Ollama model name, e.g. ``"qwen2.5-coder:0.5b"``). Streams NDJSON
    by default (``stream=False`` for one JSON reply); ``on_text`` early stop works as for the
    other backends. Sends ``options`` ``num_predict``, ``stop``, ``temperature``, ``seed`` (and
    ``num_ctx`` if given, plus ``params``); ``keep_alive`` is passed through when given.
    Usage: ``prompt_eval_count`` / ``eval_count`` (and ``prompt_eval_cached_count`` on servers
    that report it); durations become millisecond timings. Ollama takes no GBNF grammar, so a
    ``grammar`` option raises ModeNotSupported. ``http``: the HTTP settings (HttpSettings);
    its fields may be given as keyword arguments too.
    """

    # what Agent(..., **options) may pass to complete() (see Backend)
    request_options = frozenset({"temperature", "seed", "stream", "on_text"})

    # top_p and the penalties go into Ollama's options; it takes no logit_bias
    capabilities = Capabilities(
        grammar=False,
        chat=False,
        streaming=True,
        sampling=frozenset({"top_p", "frequency_penalty", "presence_penalty"}),
    )

    api_name = "Ollama"
    probe_path = "/api/version"
    default_url = DEFAULT_OLLAMA_URL

    def __init__(
        self,
        url: str | None = DEFAULT_OLLAMA_URL,
        model: str | None = None,
        *,
        stream: bool = True,
        temperature: float = 0.0,
        seed: int | None = None,
        num_ctx: int | None = None,
        keep_alive: str | int | None = None,
        params: Mapping[str, Any] | None = None,
        http: HttpSettings | None = None,
        **http_options: Any,
    ):
        if not model:
            raise TypeError("OllamaBackend needs model=..., an Ollama model name such as 'qwen2.5-coder:0.5b'")
        base = (url or DEFAULT_OLLAMA_URL).strip().rstrip("/")
        for suffix in ("/api/generate", "/api"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        super().__init__(base, http=http, **http_options)
        self.model = model
        self.stream = bool(stream)
        self.temperature = temperature
        self.seed = seed
        self.num_ctx = num_ctx
        self.keep_alive = keep_alive
        self.params: dict[str, Any] = dict(params or {})

    def _status_hint(self, status: int, server_message: str | None) -> str | None:
        if status == 404 and server_message and "model" in server_message.lower():
            return f"pull it first: `ollama pull {self.model}`"
        return super()._status_hint(status, server_message)

    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        if options.get("grammar"):
            raise ModeNotSupported(
                "OllamaBackend cannot constrain output with a GBNF grammar (Ollama has no grammar field); "
                "use LlamaCppBackend or a mode without a grammar"
            )
        on_text: Callable[[str], Any] | None = options.get("on_text")
        stream = options.get("stream")
        stream = (self.stream or on_text is not None) if stream is None else bool(stream)
        temperature = options.get("temperature")
        model_options: dict[str, Any] = {
            "num_predict": int(max_tokens),
            "stop": [stop] if isinstance(stop, str) else list(stop or []),
            "temperature": self.temperature if temperature is None else temperature,
        }
        seed = options.get("seed", self.seed)
        if seed is not None:
            model_options["seed"] = seed
        if self.num_ctx is not None:
            model_options["num_ctx"] = self.num_ctx
        model_options.update(self.params)
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "raw": True,
            "stream": stream,
            "options": model_options,
        }
        if self.keep_alive is not None:
            payload["keep_alive"] = self.keep_alive
        return self._generate("/api/generate", payload, stream, on_text)

    def _from_json(self, data: Any, url: str, retries: int, started: float) -> Completion:
        return self._completion(data, None, url, retries, started)

    def _completion(self, data: Any, text: str | None, url: str, retries: int, started: float) -> Completion:
        data = self._answer_object(data, "/api/generate", url, retries)
        if text is None:
            text = self._answer_text(data, "response", "/api/generate", url, retries)
        reason = data.get("done_reason")
        timings = _timings(data)
        timings["wall_ms"] = (time.perf_counter() - started) * 1000
        return Completion(
            text=text,
            finish_reason=_FINISH.get(reason, reason) if isinstance(reason, str) and reason else None,
            usage=_usage(data),
            timings=timings,
            retries=retries,
        )

    def _read_stream(
        self,
        resp: requests.Response,
        url: str,
        retries: int,
        started: float,
        on_text: Callable[[str], Any] | None,
    ) -> Completion:
        def read(obj: Any) -> tuple[str, str]:
            piece = self._stream_piece(obj, "response", "stream line", url, retries)
            return piece, LAST if obj.get("done") else MORE

        end = self._stream_text(self._iter_ndjson(resp, url, retries), resp, on_text, read)
        if end.complete:
            return self._completion(end.event, end.text, url, retries, started)
        if end.early:
            return Completion(
                text=end.text,
                finish_reason="early_stop",
                timings={"wall_ms": (time.perf_counter() - started) * 1000},
                retries=retries,
            )
        seen = end.seen
        what = "an empty stream" if not seen else f'a stream that ended after {seen} lines without "done": true'
        raise self._cut_off(what, url, retries)
