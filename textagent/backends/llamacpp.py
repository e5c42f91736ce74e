"""llama.cpp's own server (``llama-server``): ``POST /completion`` and friends.

Usage follows the server's real semantics (checked against llama.cpp's tools/server):
``tokens_evaluated`` counts the whole prompt -> ``Usage.prompt_tokens``; ``timings.prompt_n``
the prompt tokens computed this time -> ``prompt_evaluated``; ``timings.cache_n`` (newer
servers) the prompt tokens reused from the slot's KV cache -> ``prompt_cached`` (older servers:
``tokens_evaluated - prompt_n``). ``tokens_cached`` is deliberately not used: it is everything
in the slot's cache after the request (prompt plus generated tokens), not the reused prefix.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from ..errors import BackendConnectionError, BackendHTTPError, BackendResponseError, BackendTimeout
from ._http import DONE, HTTPBackend
from ._payload import _count, llama_timings, llama_top_tokens, server_error_message
from ._reading import LAST, MORE
from .base import OPENAI_SAMPLING, Capabilities, Completion, Usage
from .http_settings import HttpSettings, TimeoutSpec

__all__ = ["LlamaCppBackend"]

_TEMPLATE_CACHE_SIZE = 256


def _finish_reason(data: Mapping[str, Any]) -> str | None:
    stop_type = data.get("stop_type")
    if stop_type in ("word", "eos"):
        return "stop"
    if stop_type == "limit":
        return "length"
    # servers from before `stop_type` (2024) report booleans
    if data.get("stopped_word") or data.get("stopped_eos"):
        return "stop"
    if data.get("stopped_limit"):
        return "length"
    return None


def _usage(data: Mapping[str, Any]) -> Usage:
    raw_timings = data.get("timings")
    timings: Mapping[str, Any] = raw_timings if isinstance(raw_timings, Mapping) else {}
    total = _count(data.get("tokens_evaluated"))
    evaluated = _count(timings.get("prompt_n"))
    cached = _count(timings.get("cache_n"))
    if cached is None and total is not None and evaluated is not None:
        cached = max(total - evaluated, 0)
    if total is None and evaluated is not None and cached is not None:
        total = evaluated + cached
    completion = _count(data.get("tokens_predicted"))
    if completion is None:
        completion = _count(timings.get("predicted_n"))
    return Usage(prompt_tokens=total, prompt_evaluated=evaluated, prompt_cached=cached, completion_tokens=completion)


class LlamaCppBackend(HTTPBackend):
    """Completions from a llama.cpp ``llama-server`` through its native ``/completion`` endpoint.

    Sends ``cache_prompt: true`` so the server reuses the KV cache for the shared prefix of
    successive prompts (only the new tokens are evaluated: see ``Completion.usage``).

    ``complete()`` options: ``temperature``, ``seed``, ``grammar`` (GBNF, passed through),
    ``id_slot`` (pin the request to a server slot, which keeps its cache warm), ``token_probs``
    (``n_probs``: the first token's likeliest alternatives in ``Completion.top_tokens``), ``stream``
    (default: the constructor's ``stream``, or True when ``on_text`` is given), ``on_text``
    (called with the text so far after every streamed chunk; returning True closes the stream
    and returns what was generated with ``finish_reason="early_stop"``). ``params`` are extra
    fields merged into every request body (e.g. ``{"top_k": 1, "repeat_penalty": 1.0}``).
    ``http``: the HTTP settings (HttpSettings); its fields may be given as keyword arguments too.
    """

    # what Agent(..., **options) may pass to complete() (see Backend)
    request_options = frozenset({"temperature", "seed", "stream", "on_text", "id_slot", "grammar"})

    # grammar: GBNF in /completion; chat: native mode uses the server's /v1/chat/completions;
    # health, slots (/props), template (/apply-template), id_slot and slot save/restore its own
    capabilities = Capabilities(
        grammar=True,
        chat=True,
        streaming=True,
        health=True,
        slots=True,
        template=True,
        slot_pinning=True,
        prefix_cache=True,
        sampling=OPENAI_SAMPLING,
        token_probs=True,
    )

    api_name = "llama.cpp"
    default_url = "http://127.0.0.1:8080"
    probe_path = "/health"

    def __init__(
        self,
        url: str | None = None,
        *,
        stream: bool = False,
        temperature: float = 0.0,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        http: HttpSettings | None = None,
        **http_options: Any,
    ):
        super().__init__(url, http=http, **http_options)
        self.stream = bool(stream)
        self.temperature = temperature
        self.seed = seed
        self.params: dict[str, Any] = dict(params or {})
        # set for a server started with --slot-save-path (LocalServer.prefix_cache()): see prefix_cache.py
        self.prefix_cache: Any = None
        self._templates: OrderedDict[str, str] = OrderedDict()

    # -- completion --------------------------------------------------------------------------
    def complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        fixed, slot = options.get("cache_prefix"), options.get("id_slot")
        if self.prefix_cache is not None and fixed and (slot is not None or self.prefix_cache.slots == 1):
            # the prompt's fixed part restored from disk (or evaluated once and saved) before it is
            # asked, in the slot the request goes to (pinned, or the server's only one)
            started = time.perf_counter()
            self.prefix_cache.prepare(self, slot or 0, prompt[: int(fixed)])
            completion = self._complete(prompt, stop=stop, max_tokens=max_tokens, **options)
            completion.timings["prefix_ms"] = (time.perf_counter() - started) * 1000 - completion.timings.get(
                "wall_ms", 0.0
            )
            return completion
        return self._complete(prompt, stop=stop, max_tokens=max_tokens, **options)

    def _complete(self, prompt: str, *, stop: Sequence[str], max_tokens: int, **options: Any) -> Completion:
        on_text: Callable[[str], Any] | None = options.get("on_text")
        stream = options.get("stream")
        stream = (self.stream or on_text is not None) if stream is None else bool(stream)
        temperature = options.get("temperature")
        seed = options.get("seed", self.seed)
        payload: dict[str, Any] = {
            "prompt": prompt,
            "n_predict": int(max_tokens),
            "stop": [stop] if isinstance(stop, str) else list(stop or []),
            "temperature": self.temperature if temperature is None else temperature,
            "cache_prompt": True,
            "stream": stream,
        }
        if seed is not None:
            payload["seed"] = seed
        if options.get("grammar"):
            payload["grammar"] = options["grammar"]
        if options.get("id_slot") is not None:
            payload["id_slot"] = options["id_slot"]
        if options.get("token_probs"):  # before sampling: at temperature 0 the sampler's are all 1 and 0
            payload["n_probs"], payload["post_sampling_probs"] = int(options["token_probs"]), False
        if stream:
            # per-chunk timings let an early-stopped stream still report its token counts
            payload["timings_per_token"] = True
        payload.update(self.params)

        return self._generate("/completion", payload, stream, on_text)

    def _from_json(self, data: Any, url: str, retries: int, started: float) -> Completion:
        return self._completion(data, None, url, retries, started)

    def _completion(self, data: Any, text: str | None, url: str, retries: int, started: float) -> Completion:
        data = self._answer_object(data, "/completion", url, retries)
        if text is None:
            text = self._answer_text(data, "content", "/completion", url, retries)
        timings = llama_timings(data.get("timings"))
        timings["wall_ms"] = (time.perf_counter() - started) * 1000
        finish = _finish_reason(data)
        stop_word = data.get("stopping_word") if data.get("stop_type", "word") == "word" else None
        return Completion(
            text=text,
            finish_reason=finish,
            stop_word=stop_word if isinstance(stop_word, str) and stop_word else None,
            usage=_usage(data),
            timings=timings,
            retries=retries,
            top_tokens=llama_top_tokens(data),
        )

    def _read_stream(
        self,
        resp: requests.Response,
        url: str,
        retries: int,
        started: float,
        on_text: Callable[[str], Any] | None,
    ) -> Completion:
        last_timings: Mapping[str, Any] | None = None

        def read(event: Any) -> tuple[str, str] | None:
            nonlocal last_timings
            if event is DONE:
                return None
            chunk = self._stream_piece(event, "content", "stream event", url, retries)
            if isinstance(event.get("timings"), Mapping):
                last_timings = event["timings"]
            return chunk, LAST if event.get("stop") else MORE

        end = self._stream_text(self._iter_sse(resp, url, retries), resp, on_text, read)
        if end.complete:
            return self._completion(end.event, end.text, url, retries, started)
        if end.early:
            return self._early_stop(end.text, last_timings, retries, started)
        if not end.seen:
            what = "an empty stream"
        else:
            what = f"a stream that ended after {end.seen} events without the final one (stop: true)"
        raise self._cut_off(what, url, retries)

    @staticmethod
    def _early_stop(text: str, timings: Mapping[str, Any] | None, retries: int, started: float) -> Completion:
        usage = _usage({"timings": timings}) if timings else Usage()
        out = llama_timings(timings)
        out["wall_ms"] = (time.perf_counter() - started) * 1000
        return Completion(text=text, finish_reason="early_stop", usage=usage, timings=out, retries=retries)

    def sampling_params(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """As the OpenAI body has them, but ``logit_bias`` as /completion's [[token, bias], ...]
        pairs (OpenAI's is a {token: bias} object)."""
        out = dict(fields)
        if "logit_bias" in out:
            out["logit_bias"] = [[int(token), bias] for token, bias in out["logit_bias"].items()]
        return out

    # -- server helpers ----------------------------------------------------------------------
    def health(self, *, timeout: TimeoutSpec | None = None) -> dict[str, Any] | str:
        """``GET /health`` once (no retries). Returns the body (``{"status": "ok"}``).

        Raises BackendHTTPError with status 503 while the model is loading, and
        BackendConnectionError when nothing listens.
        """
        resp, retries = self._open("GET", "/health", timeout=timeout or (min(self.timeout[0], 5.0), 10.0), retries=0)
        url = resp.url or self._url("/health")
        try:
            raw = b"".join(self._chunks(resp, url, retries, limit=64 * 1024, truncate=True))
        finally:
            resp.close()
        body = raw.decode("utf-8", errors="replace").strip()
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            return body
        return data if isinstance(data, dict) else body

    def wait_healthy(
        self,
        timeout: float = 120.0,
        on_wait: Callable[[str], Any] | None = None,
        *,
        interval: float = 0.25,
        report_every: float = 5.0,
        check: Callable[[], Any] | None = None,
    ) -> dict[str, Any] | str:
        """Poll ``GET /health`` until the server is ready; return its body.

        Keeps waiting while nothing listens yet (a server still starting) and while it answers
        503 (loading the model). ``on_wait(message)`` gets a one-line status when waiting
        starts, when the reason changes and every ``report_every`` seconds. ``check()`` is
        called before every poll and may raise to abort (e.g. the server process died).
        After ``timeout`` seconds: BackendTimeout if the server answered but never became
        ready, BackendConnectionError if nothing ever answered.
        """
        started = time.monotonic()
        deadline = started + timeout
        answered = False
        last_reason: str | None = None
        last_report = float("-inf")
        last_exc: BaseException | None = None
        while True:
            if check is not None:
                check()
            try:
                return self.health(timeout=(min(self.timeout[0], 2.0), 5.0))
            except BackendHTTPError as exc:
                if exc.status not in (503, 502, 504):
                    raise
                answered = True
                last_exc = exc
                message = _health_message(exc.body)
                if message and "load" in message.lower():
                    reason = "loading the model"
                else:
                    reason = f"not ready (HTTP {exc.status}{': ' + message if message else ''})"
            except BackendConnectionError as exc:
                last_exc = exc
                reason = "not answering yet (starting?)" if not answered else "not answering any more"
            except BackendTimeout as exc:
                answered = True
                last_exc = exc
                reason = "too slow to answer /health"
            now = time.monotonic()
            elapsed = now - started
            if now >= deadline:
                message = (
                    f"llama.cpp server at {self.url} is still {reason} after {timeout:g} s; "
                    "give it more time (a big model loads slowly) or check its log"
                )
                if answered:
                    raise BackendTimeout(message, url=self._url("/health")) from last_exc
                raise BackendConnectionError(
                    f"no server at {self.url} after waiting {timeout:g} s; start one with "
                    "`textagent serve` or pass --endpoint",
                    url=self._url("/health"),
                ) from last_exc
            if on_wait is not None and (reason != last_reason or now - last_report >= report_every):
                on_wait(f"waiting for llama.cpp server at {self.url}: {reason} ({elapsed:.0f} s)")
                last_report = now
            last_reason = reason
            time.sleep(max(0.0, min(interval, deadline - now)))

    def evaluate(self, prompt: str, *, id_slot: int) -> None:
        """Have the server evaluate ``prompt`` into slot ``id_slot``'s KV cache, generating nothing."""
        payload = {"prompt": prompt, "n_predict": 0, "cache_prompt": True, "id_slot": id_slot, "stream": False}
        self._request_json("POST", "/completion", {**payload, **self.params, "n_predict": 0})

    def slot_action(self, slot: int, action: str, filename: str) -> dict[str, Any]:
        """``POST /slots/{slot}?action=save|restore``: the slot's KV cache to or from ``filename``
        in the server's ``--slot-save-path``. Raises BackendHTTPError when the server refuses
        (no such API, no save path, a file it cannot read)."""
        data, _ = self._request_json("POST", f"/slots/{int(slot)}?action={action}", {"filename": filename})
        return data if isinstance(data, dict) else {}

    def props(self) -> dict[str, Any]:
        """``GET /props``: the server's settings (chat template, context size, model path...)."""
        data, retries = self._request_json("GET", "/props")
        if not isinstance(data, dict):
            raise BackendResponseError(
                f"llama.cpp server at {self.url} answered /props with {type(data).__name__}, not an object",
                url=self._url("/props"),
                retries=retries,
            )
        return data

    def chat_backend(self) -> Any:
        """The same server's ``/v1/chat/completions`` as a backend with ``chat()`` (native
        mode), sharing this backend's HTTP settings and session."""
        from .chat import ChatAsTextBackend

        return ChatAsTextBackend(
            self.url,
            http=self.http,
            session=self.session,
            params=self.params,
            temperature=self.temperature,
            seed=self.seed,
        )

    def apply_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """Render ``messages`` with the model's own chat template (``POST /apply-template``).

        Results are cached per conversation, so the same messages (e.g. the system prompt
        on every step) always give byte-identical text and the KV-cache prefix stays stable.
        """
        messages = [dict(m) for m in messages]
        key = json.dumps([messages, add_generation_prompt], sort_keys=True, ensure_ascii=False, default=str)
        cached = self._templates.get(key)
        if cached is not None:
            self._templates.move_to_end(key)
            return cached
        payload: dict[str, Any] = {"messages": messages}
        if not add_generation_prompt:
            payload["add_generation_prompt"] = False
        data, retries = self._request_json("POST", "/apply-template", payload)
        prompt = data.get("prompt") if isinstance(data, Mapping) else None
        if not isinstance(prompt, str):
            raise BackendResponseError(
                f"llama.cpp server at {self.url} answered /apply-template without a 'prompt' string",
                url=self._url("/apply-template"),
                retries=retries,
            )
        self._templates[key] = prompt
        if len(self._templates) > _TEMPLATE_CACHE_SIZE:
            self._templates.popitem(last=False)
        return prompt

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        """``POST /tokenize``: token ids of ``text`` with the served model's tokenizer."""
        data, retries = self._request_json("POST", "/tokenize", {"content": text, "add_special": add_special})
        tokens = data.get("tokens") if isinstance(data, Mapping) else None
        if not isinstance(tokens, list):
            raise BackendResponseError(
                f"llama.cpp server at {self.url} answered /tokenize without a 'tokens' list",
                url=self._url("/tokenize"),
                retries=retries,
            )
        out: list[int] = []
        for tok in tokens:
            tok_id = tok.get("id") if isinstance(tok, Mapping) else tok
            if isinstance(tok_id, bool) or not isinstance(tok_id, int):
                raise BackendResponseError(
                    f"llama.cpp server at {self.url} answered /tokenize with a non-integer token {tok!r:.80}",
                    url=self._url("/tokenize"),
                    retries=retries,
                )
            out.append(tok_id)
        return out


def _health_message(body: str) -> str | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body.strip()[:200] or None
    message = server_error_message(data)
    if message is None and isinstance(data, Mapping) and isinstance(data.get("status"), str):
        message = data["status"]
    return message
