"""The ``textagent`` command line: parse, run, chat, grammar, serve, models.

Expected failures (no server, HTTP errors, a bad model file) print one clear line on
stderr and exit non-zero; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import signal
import stat
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._cli_parser import CHAT_HELP, build_parser
from ._lazy import load_reference
from .conventions import EXIT_CODES, EXIT_ERROR, apply_conventions
from .errors import BackendError, BackendHTTPError, TextagentError

if TYPE_CHECKING:
    from .agent import Agent  # imported when a command needs it: start-up stays fast

log = logging.getLogger(__name__)
_IMPORTED = time.perf_counter()


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
            try:
                obj = load_reference(item)
            except ValueError as exc:
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
    if step.rescued:
        _say(f"  step {step.index}: (native+fallback: the calls above were read from the message content)")
    elif step.decode_failure:
        _say(
            f"  step {step.index}: native decode failure: the content holds a call "
            f"({step.decode_failure}) the server did not return as tool_calls"
        )
    if step.sent_back is not None:
        found = ", ".join(str(getattr(f, "item", f)) for f in step.sent_back.found)
        _say(
            f"  step {step.index}: answer sent back by the {step.sent_back.check} check"
            + (f": {found}" if found else "")
        )
    elif not step.outcomes:
        _say(f"  step {step.index}: answer")


def _make_backend(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[Any, Any]:
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
        # chat's --ctx-size: a server started here with that context, not the one `textagent serve` runs
        reuse_served=args.ctx_size is None,
        server={"ctx_size": args.ctx_size} if args.ctx_size else None,
        prefix_cache=args.prefix_cache,
        progress=_say if args.verbose or sys.stderr.isatty() else lambda _: None,
    )
    stack.callback(endpoint.stop)  # before open(): a server that fails to start is stopped too
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


class _Terminated(KeyboardInterrupt):
    """SIGTERM: unwinds as Ctrl-C does (the servers are stopped on the way), but ends a chat
    session, where Ctrl-C only drops the question under way."""


def _raise_terminated(*_: Any) -> None:
    raise _Terminated


def _open_agent(args: argparse.Namespace, stack: contextlib.ExitStack) -> Any:
    """The Agent `run` and `chat` use: tools (demo, module:function, MCP servers), the backend
    (an endpoint or the embedded server), the options given; what they start is stopped
    through ``stack``."""
    from . import checks
    from .agent import Agent
    from .retry import Retry

    _check_trace_path(args.trace)
    tools = _load_tools(args.tools) if args.tools or not args.mcp else None
    if args.mcp:
        from .tools.mcp import mcp_tools

        served = stack.enter_context(mcp_tools(*args.mcp, prefix=args.mcp_prefix))
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
        max_steps=args.max_steps,
        max_repeats=args.max_repeats,
        max_call_errors=args.max_call_errors,
        max_tokens=args.token_budget,
        reply_tokens=args.reply_tokens,
        max_seconds=args.max_seconds,
        chat_format=chat_format,
        checks=checks.from_names(args.checks),
        retry=Retry.from_parts(
            args.retry,
            temperature=args.retry_temperature,
            seed=args.seed or 0,
            odds=args.retry_odds,
            verify=args.retry_verify,
        ),
        on_step=_print_step if args.verbose else None,
        trace=args.trace,
        **options,
    )


def _unwind_on_sigterm(stack: contextlib.ExitStack) -> None:
    """SIGTERM unwinds like Ctrl-C, so the embedded llama-server (also while it loads the model)
    and MCP servers (in sessions of their own) are stopped, not left running without a parent;
    the handler before is put back last, once they are."""
    if threading.current_thread() is threading.main_thread():
        stack.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, _raise_terminated))


def _say_stop(result: Any) -> None:
    if result.stop_reason == "backend_error":
        _say(f"textagent: {result.error}")
    elif result.stop_reason != "answer":
        _say(f"textagent: stopped: {result.stop_reason} after {len(result.steps)} steps")


def cmd_run(args: argparse.Namespace) -> int:
    from .modes import mode_needs

    if not args.question.strip():
        raise TextagentError("the question is empty; give the question to ask as the argument of `run`")
    stack = contextlib.ExitStack()  # what the run starts, stopped in reverse order
    _unwind_on_sigterm(stack)
    begun = time.perf_counter()
    try:
        agent = _open_agent(args, stack)
        opened = time.perf_counter() - begun
        result = agent.run(args.question)
    finally:
        stack.close()
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


# llama.cpp's refusal of a prompt longer than a slot's context (OpenAI's says "context length")
_CONTEXT = re.compile(r"exceed_context_size|exceeds the available context|context (?:size|length)", re.I)


def _context_size(error: BackendHTTPError, backend: Any) -> int | None:
    """The context the server has: the n_ctx of its refusal (llama.cpp), else of its /props."""
    with contextlib.suppress(ValueError, TypeError, KeyError):
        return int(json.loads(error.body)["error"]["n_ctx"])
    with contextlib.suppress(BackendError, ValueError, TypeError, KeyError, AttributeError):
        return int(backend.props()["default_generation_settings"]["n_ctx"])
    return None


def _refused(error: Any, agent: Any, embedded: bool) -> str:
    """What chat says of a question the server refused (the question is dropped)."""
    if isinstance(error, BackendHTTPError) and _CONTEXT.search(error.body or str(error)):
        size = _context_size(error, agent.backend)
        return (
            f"textagent: the conversation no longer fits the model's context"
            f"{f' ({size} tokens)' if size else ''}, so that question is dropped; /reset starts a new conversation"
            + (", or start chat again with a larger --ctx-size" if embedded else "")
        )
    return f"textagent: {error} (that question is dropped)"


def _ask(agent: Agent, text: str, embedded: bool) -> None:
    """One question of a chat. A question interrupted (Ctrl-C) or refused by the server is taken
    back (Agent.restore): the conversation stays as it was before it, so the next question does not carry it."""
    before = agent.checkpoint()
    try:
        result = agent.run(text)
    except _Terminated:
        raise
    except KeyboardInterrupt:
        result = None
    if result is None or result.stop_reason == "backend_error":
        agent.restore(before)
        _say("(interrupted; that question is dropped)" if result is None else _refused(result.error, agent, embedded))
        return
    _say_stop(result)
    if result.answer is not None:
        print(result.answer, flush=True)


def cmd_chat(args: argparse.Namespace) -> int:
    """An interactive conversation: each line a question that sees the earlier ones."""
    stack = contextlib.ExitStack()  # what the session starts, stopped in reverse order
    _unwind_on_sigterm(stack)
    try:
        agent = _open_agent(args, stack)
        _say(f"textagent chat ({agent.mode.name} mode, tools: {', '.join(agent.tools) or 'none'}): {CHAT_HELP}")
        while True:
            try:
                line = input(args.prompt)
            except _Terminated:
                raise
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
            _ask(agent, text, embedded=args.endpoint is None)
    finally:
        stack.close()


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
    stack = contextlib.ExitStack()  # as run's and chat's: SIGTERM unwinds it as Ctrl-C does
    _unwind_on_sigterm(stack)
    stack.callback(clear_state)
    stack.callback(server.stop)  # before start(): a server that fails to start is stopped too
    try:
        server.start()
        write_state(server.state())
        _say(f"llama-server ready at {server.url} (model {server.model_path}); Ctrl-C stops it")
        print(server.url, flush=True)
        assert server.process is not None
        server.process.wait()
        _say(f"llama-server exited with code {server.process.returncode if server.process else '?'}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 0
    finally:
        stack.close()


def cmd_cache(args: argparse.Namespace) -> int:
    from .backends.prefix_cache import PrefixCache
    from .local import forget_repack_crashes, prefix_dir, repack_crashes

    cache = PrefixCache(prefix_dir(), identity="")
    if args.action == "clear":
        print(f"deleted {cache.clear()} saved prefixes from {cache.directory}")
        if forgotten := forget_repack_crashes():
            print(f"forgot {forgotten} note(s) of llama-server crashing on repacked weights: the next start tries them")
        return 0
    for note in repack_crashes():
        amx = f", the CPU advertising {' '.join(note['amx'])}" if note.get("amx") else ""
        print(
            f"llama-server {note['binary']} crashed loading repacked weights here{amx} ({note.get('when', '?')}; "
            f"log {note.get('log', '?')}): it starts with --no-repack (`textagent cache clear` forgets this)"
        )
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


def _stdout_gone() -> int:
    """The reader of stdout has gone (`textagent parse FILE | head -c 5`): the rest of the output
    goes nowhere, also what Python would flush at exit (into the closed pipe: one more error),
    and the exit status is a shell's for a writer SIGPIPE ended (128 + 13), without a word."""
    with contextlib.suppress(OSError, ValueError):  # a stdout with no file descriptor (tests)
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return 141


COMMANDS = {
    "parse": cmd_parse,
    "run": cmd_run,
    "chat": cmd_chat,
    "grammar": cmd_grammar,
    "serve": cmd_serve,
    "cache": cmd_cache,
    "models": cmd_models,
}
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
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("run", "chat"):
        apply_conventions(args)
        if args.ctx_size and args.endpoint:
            parser.error("--ctx-size sizes the embedded server; with --endpoint the server's own context applies")
    try:
        code = COMMANDS[args.command](args)
        sys.stdout.flush()  # a reader that left (`| head`) is found here, not by the flush at exit
        return code
    except BrokenPipeError:
        return _stdout_gone()
    except BackendError as exc:  # e.g. asking the server for its chat template before the run
        _say(f"textagent: {exc}")
        return EXIT_CODES["backend_error"]
    except TextagentError as exc:
        _say(f"textagent: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        _say(f"textagent: {'terminated' if isinstance(exc, _Terminated) else 'interrupted'}")
        return 130


if __name__ == "__main__":
    sys.exit(main())
