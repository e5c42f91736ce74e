"""The conventions every command that talks to a model shares (`run`, `chat`, `bench`, `proxy`):
the model and endpoint options, where the endpoint and key come from when not given, the
deprecated spellings, and the exit codes. A lower room than any command: the commands import
it, it imports none of them."""

from __future__ import annotations

import argparse
import logging
import os
import urllib.parse
from collections.abc import Callable
from typing import Any

from ._argtypes import nonempty, positive
from .backends.factory import APIS
from .templates import FORMATS

__all__ = [
    "API_CHOICES",
    "CHAT_FORMAT_CHOICES",
    "DEFAULT_EXAMPLE_STYLE",
    "DEFAULT_EXAMPLE_TOOL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_OLLAMA_HOST",
    "EXAMPLE_STYLE_CHOICES",
    "EXAMPLE_TOOL_CHOICES",
    "EXIT_CODES",
    "EXIT_ERROR",
    "add_example_options",
    "add_model_options",
    "add_prefix_cache_option",
    "add_retry_options",
    "add_server_options",
    "add_token_options",
    "apply_conventions",
    "check_names",
    "gguf_help",
    "model_names",
    "ollama_url",
]

# Exit codes: 0 answer; 2 usage error or unparseable input (`parse`); one per other stop reason.
EXIT_CODES = {
    "answer": 0,
    "submitted": 8,  # no mode of `run` submits (the proxy's does): a custom mode may
    "max_steps": 3,
    "token_budget": 4,
    "time_limit": 5,
    "format_errors": 6,
    "backend_error": 7,
    "repeated": 9,  # only with --max-repeats
    "call_errors": 10,  # only with --max-call-errors
}
EXIT_ERROR = 1

# --api and --chat-format take what the backends and the chat formats offer (their own tables);
# "server": the chat template llama.cpp applies (asked from the server)
API_CHOICES = tuple(APIS)
CHAT_FORMAT_CHOICES = ("server", *FORMATS)
# prompts.EXAMPLE_STYLES and its default, spelled here so that a command's parser does not load the prompts (and
# the grammar) to list them; a test holds the two equal
EXAMPLE_STYLE_CHOICES = ("placeholder", "concrete", "status", "value")
DEFAULT_EXAMPLE_STYLE = "status"  # prompts.DEFAULT_EXAMPLE_STYLE, the same way
EXAMPLE_TOOL_CHOICES = ("first", "closest")  # prompts.EXAMPLE_TOOLS
DEFAULT_EXAMPLE_TOOL = "closest"  # prompts.DEFAULT_EXAMPLE_TOOL

log = logging.getLogger(__name__)


def check_names(spec: str) -> str:
    """argparse type of --checks: the names checked now, kept as given."""
    from .checks import from_names

    try:
        from_names(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


# -- conventions shared with `textagent bench` ----------------------------------------------------

# Read when the flag is not given; flags win. OPENAI_* only for --api completions/chat, so an
# OpenAI key is never sent to a llama.cpp or Ollama server.
ENV_API_KEY, ENV_BASE_URL, ENV_OLLAMA_HOST = "OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST"


def gguf_help() -> str:
    """What --gguf takes: the embedded models by name (the default first) or a path."""
    from .local import DEFAULT_MODEL, MODELS

    others = [name for name in MODELS if name != DEFAULT_MODEL]
    return f"embedded llama-server: {DEFAULT_MODEL} (default), {', '.join(others)}, or a path to any .gguf file"


def model_names() -> list[str]:
    from .local import MODELS

    return list(MODELS)


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="the model id the endpoint serves (OpenAI-compatible or Ollama endpoints)")
    p.add_argument("--gguf", help=gguf_help())
    p.add_argument("--model-name", help=argparse.SUPPRESS)  # deprecated spelling of --model
    p.add_argument(
        "--api-key",
        type=nonempty("--api-key"),
        help=f"bearer token (default: ${ENV_API_KEY} for --api completions/chat)",
    )


def add_prefix_cache_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-prefix-cache",
        dest="prefix_cache",
        action="store_false",
        help="the embedded server evaluates the fixed prompt prefix (system prompt, tools, examples) "
        "afresh instead of restoring it from disk (`textagent cache` shows and clears the files)",
    )


def add_server_options(p: argparse.ArgumentParser) -> None:
    """What the embedded llama-server takes beyond the model: the prefix cache and extra arguments."""
    add_prefix_cache_option(p)
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="embedded server: an extra llama-server argument (repeatable), e.g. --server-arg=--poll --server-arg=0",
    )


def add_token_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token-budget", type=positive(int), help="token budget for the whole run")
    p.add_argument("--reply-tokens", type=positive(int), default=512, help="max tokens of one reply (default 512)")
    p.add_argument("--max-tokens", type=positive(int), dest="old_budget", help=argparse.SUPPRESS)  # deprecated


def add_example_options(p: argparse.ArgumentParser, examples: str) -> None:
    """--example-style and --example-tool: how ``examples`` (the worked examples built for tools
    without their own) read, and which tools they show."""
    p.add_argument(
        "--example-style",
        choices=EXAMPLE_STYLE_CHOICES,
        default=DEFAULT_EXAMPLE_STYLE,
        help=f"how {examples} read: placeholder (bracketed results to fill in, '(what f returned)'), "
        "concrete (made-up results stated in words, 'The result is 42.'), status (a result with no value, "
        "'f ran with x 1 and reported success.') or value (a status with a value, 'f reported success with "
        "the value 42.'); default %(default)s (docs/bench.md)",
    )
    p.add_argument(
        "--example-tool",
        choices=EXAMPLE_TOOL_CHOICES,
        default=DEFAULT_EXAMPLE_TOOL,
        help=f"which tools {examples} show: first (the first that takes arguments) or closest (those whose "
        "name and description are closest to the question); default %(default)s",
    )


def retry_parts(text: str) -> str:
    """``--retry``: parts of textagent.retry.Retry, comma-separated (checked, kept as written)."""
    from .retry import Retry  # at parse time only: the CLI's start-up does not load the loop

    try:
        Retry.from_parts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return ",".join(p.strip() for p in text.split(",") if p.strip()) or "none"


def _retry_number(field: str, most: int) -> Callable[[str], float]:
    """The argparse type of a number Retry takes as ``field``: above 0 and at most ``most``."""

    def parse(text: str) -> float:
        from .retry import Retry  # at parse time only: the CLI's start-up does not load the loop

        try:
            value = float(text)
            number: dict[str, Any] = {"odds": 1.0, field: value}  # verify needs odds beside it
            Retry(**number)  # Retry checks it
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number above 0 and at most {most} (got {text})") from None
        return value

    return parse


retry_temperature = _retry_number("temperature", 2)  # --retry-temperature
retry_odds = _retry_number("odds", 1)  # --retry-odds
retry_verify = _retry_number("verify", 1)  # --retry-verify


def add_retry_options(p: argparse.ArgumentParser, whose: str = "the loop") -> None:
    """--retry and --retry-temperature: what ``whose`` does after a failed reply (textagent.retry;
    none by default, each part measured in docs/tuning)."""
    p.add_argument(
        "--retry",
        default="none",
        type=retry_parts,
        help=f"what {whose} does after a failed reply: vary (a repeated mistake gets more to act on), grammar "
        "(the next reply held to the tool set's grammar, text protocol on llama.cpp), sample (a word-for-word "
        "repeat is followed by one sampled reply), gate (an answer before any call, while a listed tool is close "
        "to the question, is asked once more), abstain (the gate, its re-ask held to a grammar in which an "
        "answer comes only after naming the closest listed tool and why it does not fit), rewind (a repeat is "
        "kept out of the conversation and asked again, sampled), odds (the first reply begun with a call where "
        "the model's own odds of one reach --retry-odds, text protocol without a grammar, on llama.cpp or "
        "/v1/completions), errors (an answer right after calls whose results report an error is sent back "
        "once a question, the errors named), verify (with odds: a reply is begun only where the model, asked "
        "whether the call it would bring does what was asked, says yes with --retry-verify of its yes-or-no), "
        "claims (an answer saying a listed tool ran that never ran is kept out once a question and the next reply "
        "begun with that call; with verify only where the model stands by it); comma-separated, or none (default)",
    )
    p.add_argument(
        "--retry-temperature",
        type=retry_temperature,
        default=0.7,
        help="the temperature of the sampled retry (--retry sample or rewind; default 0.7, seeded by --seed and the step)",
    )
    p.add_argument(
        "--retry-odds",
        type=retry_odds,
        default=0.1,
        help="with --retry odds: the probability of a call the model's first token must reach for the reply to be "
        "begun with the call keyword (default 0.1; 1 records the odds and never begins a reply)",
    )
    p.add_argument(
        "--retry-verify",
        type=retry_verify,
        default=0.8,
        help="with --retry odds,verify: the share of yes in the model's yes-or-no on the call a begun reply "
        "would bring that the reply needs to be begun (default 0.8)",
    )


def ollama_url(host: str) -> str:
    """OLLAMA_HOST as Ollama's own client reads it: ``host``, ``host:port`` or a URL (port 11434)."""
    host = host.strip().rstrip("/")
    parts = urllib.parse.urlsplit(host if "://" in host else "http://" + host)
    if parts.port is None and parts.scheme == "http":
        parts = parts._replace(netloc=parts.netloc + ":11434")
    return urllib.parse.urlunsplit(parts)


def apply_conventions(args: argparse.Namespace) -> None:
    """Settle the options `run` and `bench` share, in place: the endpoint and API key from the
    environment when not given, and the deprecated spellings (with a warning)."""
    endpoints = args.endpoint if isinstance(args.endpoint, list) else [args.endpoint] if args.endpoint else []
    if not endpoints:
        env = {"completions": ENV_BASE_URL, "chat": ENV_BASE_URL, "ollama": ENV_OLLAMA_HOST}.get(args.api)
        if env and os.environ.get(env, "").strip():
            url = os.environ[env].strip()
            endpoints = [ollama_url(url) if env == ENV_OLLAMA_HOST else url]
            args.endpoint = endpoints if isinstance(args.endpoint, list) else endpoints[0]
            log.info("endpoint from $%s: %s", env, endpoints[0])
    if args.model and not endpoints and not args.gguf:
        log.warning(
            "--model without --endpoint naming the embedded server's model is deprecated; use --gguf "
            "(--model is the model id an endpoint serves)"
        )
        args.gguf, args.model = args.model, None
    if args.model_name:
        log.warning("--model-name is deprecated; use --model")
        args.model = args.model or args.model_name
    if args.api_key is None and args.api in ("completions", "chat") and os.environ.get(ENV_API_KEY):
        args.api_key = os.environ[ENV_API_KEY]
    if getattr(args, "old_budget", None) is not None:
        log.warning(
            "--max-tokens as the run's token budget is deprecated and will cap each reply in the next "
            "release, as elsewhere; use --token-budget (and --reply-tokens for one reply)"
        )
        args.token_budget = args.token_budget or args.old_budget
