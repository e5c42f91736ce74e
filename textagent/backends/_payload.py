"""Values read out of servers' JSON answers (error messages, token counts, llama.cpp timings), and
the JSON body every request sends."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .base import Usage

__all__ = [
    "llama_timings",
    "llama_top_tokens",
    "openai_top_tokens",
    "openai_usage",
    "request_body",
    "server_error_message",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def request_body(payload: Any) -> bytes:
    """``payload`` as the UTF-8 JSON body of a request, each lone surrogate replaced by U+FFFD.

    A lone surrogate comes from text Python decoded with surrogateescape (a file name
    ``os.listdir`` could not decode, a line typed on a Latin-1 terminal) or from a client's
    ``"\\udce9"`` escape; written as that escape it is JSON llama.cpp refuses (HTTP 500), and
    in a conversation every later request holds it too. NaN and infinity are refused
    (ValueError), as ``requests`` refuses them: they are no JSON."""
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    if _SURROGATE.search(text) is not None:
        # through UTF-16: a high and low half side by side are one character, a lone one U+FFFD
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.encode("utf-8")


def server_error_message(payload: Any) -> str | None:
    """The human message inside an error body, for the shapes servers actually send.

    ``{"error": {"message": ...}}`` (OpenAI, llama.cpp), ``{"error": "..."}`` (Ollama),
    ``{"message": ...}`` (vLLM), ``{"detail": ...}`` (FastAPI).
    """
    if isinstance(payload, str):
        return payload.strip() or None
    if not isinstance(payload, Mapping):
        return None
    err = payload.get("error")
    if isinstance(err, str) and err.strip():
        return err.strip()
    if isinstance(err, Mapping):
        msg = err.get("message") or err.get("msg")
        if isinstance(msg, str) and msg.strip():
            return msg.strip()
        return json.dumps(err, ensure_ascii=False)
    for key in ("message", "detail"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if value:
            return json.dumps(value, ensure_ascii=False, default=str)
    return None


_MAX_COUNT = 2**53  # past what a JSON number holds exactly: no server counts that many tokens


def _count(value: Any) -> int | None:
    """A token count from a JSON value: non-negative integers only (bools and junk -> None)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= _MAX_COUNT else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= _MAX_COUNT:
        return int(value)
    return None


def _number(value: Any) -> float | None:
    """A finite number from a JSON value (a 400-digit integer, NaN or infinity -> None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def openai_usage(usage: Any, timings: Any = None) -> Usage:
    """Usage from an OpenAI-style ``usage`` object (plus llama.cpp's ``timings`` if present).

    ``prompt_tokens_details.cached_tokens`` (OpenAI, vLLM, llama.cpp) gives the reused prefix;
    llama.cpp's ``timings.prompt_n`` / ``cache_n`` give evaluated / reused prompt tokens.
    """
    usage = usage if isinstance(usage, Mapping) else {}
    timings = timings if isinstance(timings, Mapping) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = _count(timings.get("cache_n"))
    evaluated = _count(timings.get("prompt_n"))
    if evaluated is None and prompt is not None and cached is not None:
        evaluated = max(prompt - cached, 0)
    if cached is None and prompt is not None and evaluated is not None:
        cached = max(prompt - evaluated, 0)
    if completion is None:
        completion = _count(timings.get("predicted_n"))
    return Usage(prompt_tokens=prompt, prompt_evaluated=evaluated, prompt_cached=cached, completion_tokens=completion)


def llama_timings(timings: Any) -> dict[str, float]:
    """The millisecond / speed fields of a llama.cpp ``timings`` object, and the draft tokens
    proposed and accepted when the server decodes speculatively."""
    out: dict[str, float] = {}
    if isinstance(timings, Mapping):
        for key in (
            "prompt_ms",
            "predicted_ms",
            "prompt_per_second",
            "predicted_per_second",
            "predicted_n",
            "draft_n",
            "draft_n_accepted",
        ):
            value = _number(timings.get(key))
            if value is not None:
                out[key] = value
    return out


def _probability(entry: Mapping[str, Any]) -> float | None:
    """One alternative's probability: its ``prob``, or ``logprob`` turned into one."""
    prob = _number(entry.get("prob"))
    if prob is None:
        logprob = _number(entry.get("logprob"))
        prob = math.exp(logprob) if logprob is not None and logprob <= 0 else None
    return prob if prob is not None and 0.0 <= prob <= 1.0 else None


def _ranked(pairs: list[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(pairs, key=lambda pair: -pair[1]))


def _entry_top_tokens(first: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """One generated token's alternatives, in the forms llama.cpp writes them."""
    for key, text_key in (("top_logprobs", "token"), ("top_probs", "token"), ("probs", "tok_str")):
        alternatives = first.get(key)
        if isinstance(alternatives, list):
            pairs = []
            for entry in alternatives:
                if isinstance(entry, Mapping) and isinstance(entry.get(text_key), str):
                    prob = _probability(entry)
                    if prob is not None:
                        pairs.append((entry[text_key], prob))
            return _ranked(pairs)
    return ()


def _first_entry(entries: Any) -> Mapping[str, Any] | None:
    return entries[0] if isinstance(entries, list) and entries and isinstance(entries[0], Mapping) else None


def llama_top_tokens(data: Any) -> tuple[tuple[str, float], ...]:
    """The first generated token's alternatives in a llama.cpp ``/completion`` answer asked with
    ``n_probs``, likeliest first: ``completion_probabilities[0]``'s ``top_logprobs`` (servers
    since 2025), ``top_probs`` (with ``post_sampling_probs``) or ``probs`` (older servers, whose
    alternatives are ``tok_str``). Whatever does not fit is left out."""
    first = _first_entry(data.get("completion_probabilities") if isinstance(data, Mapping) else None)
    return _entry_top_tokens(first) if first is not None else ()


def openai_top_tokens(choice: Any) -> tuple[tuple[str, float], ...]:
    """The first generated token's alternatives in an OpenAI ``/v1/completions`` choice asked
    with ``logprobs``, likeliest first: ``logprobs.top_logprobs[0]``, a {token: logprob} object
    (OpenAI, vLLM), or ``logprobs.content[0].top_logprobs`` (llama.cpp's, in the chat form)."""
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    if not isinstance(logprobs, Mapping):
        return ()
    content = _first_entry(logprobs.get("content"))
    if content is not None:
        return _entry_top_tokens(content)
    top = _first_entry(logprobs.get("top_logprobs"))
    if top is None:
        return ()
    return _entry_top_tokens({"top_logprobs": [{"token": t, "logprob": lp} for t, lp in top.items()]})
