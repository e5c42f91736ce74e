"""``textagent proxy``: serve an OpenAI-compatible function-calling endpoint in front of a model
server (or the embedded one) until Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._argtypes import Refused, nonempty, port_number, positive, slot_list
from ..conventions import (
    API_CHOICES,
    CHAT_FORMAT_CHOICES,
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_OLLAMA_HOST,
    EXIT_ERROR,
    add_retry_options,
    add_server_options,
    gguf_help,
    ollama_url,
)

if TYPE_CHECKING:
    from .app import ProxyConfig

ENV_PROXY_KEY = "TEXTAGENT_PROXY_API_KEY"
DEFAULT_PORT = 8000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="textagent proxy",
        description="Serve POST /v1/chat/completions (and /v1/responses) with OpenAI function calling (tools, "
        "tool_choice, tool_calls, response_format, streaming) in front of a model server that has none: the conversation is written in textagent's "
        "text protocol, replies are parsed and validated, and bad ones are repaired inside the proxy. "
        "Without --endpoint it uses the embedded llama-server (the one `textagent serve` runs, or one it "
        "starts). GET /health answers at once; GET /v1/models lists the model. See docs/proxy.md.",
    )
    p.add_argument(
        "--endpoint",
        type=nonempty("--endpoint"),
        help=f"URL of the upstream server (default: ${ENV_BASE_URL} for --api completions, "
        f"${ENV_OLLAMA_HOST} for --api ollama, else the embedded llama-server)",
    )
    p.add_argument(
        "--api",
        choices=tuple(a for a in API_CHOICES if a != "chat"),
        default="llamacpp",
        help="the upstream's API: llama.cpp /completion (default), OpenAI /v1/completions, Ollama",
    )
    p.add_argument("--model", help="the model id the upstream serves (completions, ollama); also what /v1/models lists")
    p.add_argument("--gguf", help=gguf_help())
    p.add_argument(
        "--upstream-api-key",
        type=nonempty("--upstream-api-key"),
        help=f"bearer token for the upstream (default: ${ENV_API_KEY} for --api completions)",
    )
    p.add_argument(
        "--mode",
        choices=["text", "constrained"],
        default="text",
        help="text: free generation, parsed and repaired (default); constrained: the upstream is held "
        "to the tools' GBNF grammar (llama.cpp)",
    )
    p.add_argument(
        "--chat-format",
        choices=CHAT_FORMAT_CHOICES,
        help="how the conversation is written into the prompt (default: the model's own, asked from "
        "llama.cpp; chatml elsewhere)",
    )
    p.add_argument(
        "--ctx-size",
        type=positive(int),
        metavar="TOKENS",
        help="embedded server: context per slot (default 8192); a conversation longer than that is "
        "refused with 400 context_length_exceeded, never cut",
    )
    add_server_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)"
    )
    p.add_argument(
        "--api-key",
        type=nonempty("--api-key"),
        help=f"require this bearer token from clients (default: ${ENV_PROXY_KEY}; unset: no key needed)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (http://host:port) whose pages may call the proxy without an API key; "
        "repeatable, '*' allows any (default: only pages on localhost)",
    )
    p.add_argument(
        "--max-queue",
        type=positive(int),
        default=64,
        help="requests waiting for an upstream slot at once (default 64; more get 503)",
    )
    p.add_argument(
        "--max-repairs",
        type=int,
        default=2,
        help="repairs of one reply inside the proxy before the client gets it as text (default 2)",
    )
    add_retry_options(p, "the proxy's repair loop")
    p.add_argument(
        "--parallel",
        type=positive(int),
        help="requests sent upstream at a time (default: llama.cpp's slots, 2 for the embedded server, "
        "else 4); more wait for a free slot",
    )
    p.add_argument(
        "--slots",
        type=slot_list,
        default=(),
        help="the llama.cpp server's slots this proxy uses, e.g. 2,3 (default: all of them); a server "
        "shared with other clients keeps each one's KV cache when each has slots of its own",
    )
    p.add_argument(
        "--timeout",
        type=positive(float),
        default=300,
        help="read timeout of one upstream request, seconds (default 300)",
    )
    p.add_argument(
        "--max-body",
        type=positive(int),
        default=4 * 1024 * 1024,
        help="largest request body in bytes (default 4 MiB; larger: 413)",
    )
    p.add_argument("--trace", metavar="DIR", help="write a JSON trace of every request into DIR")
    p.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one JSON line per request on stderr (default: on)",
    )
    return p


def _access_log(on: bool) -> None:
    logger = logging.getLogger("textagent.proxy.access")
    logger.propagate = False
    if not on:
        logger.disabled = True
        return
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)


def exposure_warning(host: str, api_key: str | None) -> str | None:
    """What to say when the proxy listens where others can reach it with no key."""
    from .guard import is_loopback

    if api_key or is_loopback(host):
        return None
    return (
        f"warning: listening on {host} without --api-key: anyone who can reach this address can use the "
        f"model server; set --api-key (or ${ENV_PROXY_KEY})"
    )


def _endpoint_and_trace(args: argparse.Namespace) -> tuple[str | None, Path | None]:
    """The upstream endpoint (None: the embedded server) and the trace folder, made; Refused
    when the options do not go together."""
    endpoint = args.endpoint
    if not endpoint and args.api == "completions" and os.environ.get(ENV_BASE_URL, "").strip():
        endpoint = os.environ[ENV_BASE_URL].strip()
    if not endpoint and args.api == "ollama" and os.environ.get(ENV_OLLAMA_HOST, "").strip():
        endpoint = ollama_url(os.environ[ENV_OLLAMA_HOST])
    if not endpoint and args.api != "llamacpp":
        raise Refused(f"--api {args.api} needs --endpoint", code=EXIT_ERROR)
    if args.mode == "constrained" and args.api != "llamacpp":
        raise Refused("--mode constrained needs a llama.cpp upstream (--api llamacpp)", code=EXIT_ERROR)
    if endpoint and (args.ctx_size or args.server_arg):
        raise Refused(
            "--ctx-size and --server-arg size the embedded server; with --endpoint the upstream's own settings apply",
            code=2,
        )
    if args.max_repairs < 0:
        raise Refused("--max-repairs must be 0 or more", code=EXIT_ERROR)
    trace_dir = Path(args.trace) if args.trace else None
    if trace_dir is not None:
        try:
            trace_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise Refused(f"--trace {trace_dir}: {exc.strerror or exc}", code=EXIT_ERROR) from None
    return endpoint, trace_dir


def proxy_config(args: argparse.Namespace, trace_dir: Path | None) -> ProxyConfig:
    """The ProxyConfig of the parsed options."""
    from ..retry import Retry
    from .app import ProxyConfig

    return ProxyConfig(
        mode=args.mode,
        max_repairs=args.max_repairs,
        retry=Retry.from_parts(
            args.retry, temperature=args.retry_temperature, odds=args.retry_odds, verify=args.retry_verify
        ),
        api_key=args.api_key or os.environ.get(ENV_PROXY_KEY) or None,
        max_body_bytes=args.max_body,
        trace_dir=trace_dir,
        max_queue=args.max_queue,
        allowed_origins=tuple(args.allow_origin),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import uvicorn

        from . import Upstream, UpstreamConfig
        from .server import uvicorn_config
    except ImportError as exc:
        print(f"textagent proxy: needs the proxy extra (pip install 'textagent[proxy]'): {exc}", file=sys.stderr)
        return EXIT_ERROR
    try:
        endpoint, trace_dir = _endpoint_and_trace(args)
    except Refused as refused:
        print(f"textagent proxy: {refused}", file=sys.stderr)
        return refused.code
    upstream_key = args.upstream_api_key
    if upstream_key is None and args.api == "completions":
        upstream_key = os.environ.get(ENV_API_KEY)
    _access_log(args.access_log)

    def say(message: str) -> None:
        print(f"textagent proxy: {message}", file=sys.stderr, flush=True)

    upstream = Upstream(
        UpstreamConfig(
            endpoint=endpoint,
            api=args.api,
            model=args.model,
            gguf=args.gguf,
            api_key=upstream_key,
            chat_format=args.chat_format,
            timeout=args.timeout,
            parallel=args.parallel,
            slots=args.slots,
            ctx_size=args.ctx_size,
            server_args=tuple(args.server_arg),
            prefix_cache=args.prefix_cache,
        ),
        progress=say,
    )
    config = proxy_config(args, trace_dir)
    warning = exposure_warning(args.host, config.api_key)
    if warning:
        say(warning)
    server = uvicorn.Server(uvicorn_config(upstream, config, host=args.host, port=args.port))

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        if server.started:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            shown = upstream.redact(endpoint) if endpoint else "the embedded llama-server"
            say(f"listening on http://{host}:{port}/v1 (upstream: {shown}, mode {args.mode}); Ctrl-C stops it")
            upstream.wait()
            say(f"upstream {upstream.state}{': ' + upstream.redact(upstream.detail) if upstream.detail else ''}")

    threading.Thread(target=announce, daemon=True).start()
    upstream.start()
    # uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal with the handler
    # it found: for SIGTERM that is this no-op, so the embedded server is stopped below and the exit
    # is clean (SIGINT still ends as KeyboardInterrupt, after the same cleanup)
    signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run()
    finally:
        upstream.stop()
    return 0 if server.started else EXIT_ERROR
