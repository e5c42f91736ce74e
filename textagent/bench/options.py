"""The options of ``textagent bench`` (``textagent.bench.cli`` runs what they ask for)."""

from __future__ import annotations

import argparse

from .._argtypes import non_negative, nonempty, positive, repeat_limit
from ..conventions import (
    API_CHOICES,
    CHAT_FORMAT_CHOICES,
    add_example_options,
    add_model_options,
    add_retry_options,
    add_server_options,
    check_names,
)
from ..local import DEFAULT_POLL, DEFAULT_THREADS
from .mode_table import MODES

__all__ = ["DEFAULT_MODES", "add_arguments", "build_parser"]

DEFAULT_MODES = "text,constrained,native,baseline"
DESCRIPTION = "``textagent bench``: run the task suite in several modes side by side and write a report."


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument(
        "--modes",
        default=DEFAULT_MODES,
        help=f"comma-separated modes: {', '.join(MODES)} (default: {DEFAULT_MODES}); an unknown mode "
        "is a usage error, modes the endpoint's API cannot run are skipped with the reason",
    )
    p.add_argument(
        "--endpoint",
        action="append",
        default=[],
        type=nonempty("--endpoint"),
        help="server URL; repeat to spread episodes over several servers (default: start the "
        "embedded llama-server with --concurrency slots)",
    )
    p.add_argument(
        "--api",
        choices=API_CHOICES,
        default="llamacpp",
        help="the endpoints' API for text/baseline modes (default llamacpp); the endpoint comes from "
        "$OPENAI_BASE_URL (completions, chat) or $OLLAMA_HOST (ollama) when not given",
    )
    add_model_options(p)
    p.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help="embedded server: CPU threads (default: llama-server's own, all cores; 1 is faster on a "
        "machine busy with other work: docs/perf.md)",
    )
    p.add_argument(
        "--poll",
        type=int,
        default=DEFAULT_POLL,
        help="embedded server: llama-server --poll level 0..100 (default: the server's own, 50)",
    )
    p.add_argument(
        "--ctx-size",
        type=int,
        metavar="TOKENS",
        help="embedded server: context per slot (default 8192; 32768 when BFCL multi-turn items are run: "
        "BFCL's own prompt alone reaches ~9.3k tokens, and a conversation grows with every turn)",
    )
    add_server_options(p)
    p.add_argument(
        "--chat-format",
        default="server",
        choices=CHAT_FORMAT_CHOICES,
        help="prompt format for completion endpoints (default: the model's own, from llama.cpp)",
    )
    p.add_argument(
        "--tasks",
        help="task file (JSONL; default: the shipped suite), or bfcl:CAT[,CAT...] for "
        "BFCL's categories: single-turn (simple_python, multiple, parallel, parallel_multiple, "
        "irrelevance, live_*) and multi-turn (multi_turn_base, multi_turn_miss_func, "
        "multi_turn_miss_param, multi_turn_long_context); fetched from PyPI on first use",
    )
    p.add_argument(
        "--allow-imports",
        action="store_true",
        help="let the task file run code: its module:function tools are imported and its MCP server "
        "commands started (refused by default: a task file is data)",
    )
    p.add_argument(
        "--split",
        choices=["dev", "test", "all"],
        default="all",
        help="dev: the tasks prompts are tuned on; test: the ones reported (default: all)",
    )
    p.add_argument(
        "--limit-per-category",
        type=int,
        metavar="N",
        help="only the first N tasks of each kind / BFCL category (after --split)",
    )
    p.add_argument("--kinds", help="only tasks of these kinds (comma-separated)")
    p.add_argument("--only", help="only these task ids (comma-separated)")
    p.add_argument("--limit", type=int, help="only the first N tasks (after ordering)")
    p.add_argument(
        "--order",
        choices=["mixed", "file"],
        default="mixed",
        help="mixed (default): take the kinds in turn, so a partial or --limit run covers every "
        "kind; file: the order of the task file",
    )
    p.add_argument("--repeat", type=int, default=1, help="run every task N times per mode (seed + repeat index)")
    p.add_argument(
        "--concurrency",
        "-k",
        type=int,
        default=1,
        help="episodes at once per endpoint, each pinned to its own server slot (default 1)",
    )
    p.add_argument("--reply-tokens", type=int, default=256, help="max tokens per model reply (default 256)")
    p.add_argument("--max-steps", type=int, help="cap every task's max_steps")
    p.add_argument(
        "--max-repeats",
        type=repeat_limit,
        help="end an episode (a multi-turn item: the turn) when this many replies in a row made the same calls; "
        "textagent's modes and the proxy's client (not bfcl-prompt or baseline, which keep their own loops' "
        "rules); opt-in, default no such limit",
    )
    p.add_argument(
        "--max-call-errors",
        type=positive(int),
        help="end an episode (a multi-turn item: the turn) when this many replies in a row had a call that failed "
        "(unknown tool, bad arguments, a tool that raised or timed out); the modes --max-repeats applies to; "
        "opt-in, default no such limit",
    )
    p.add_argument(
        "--first-reply",
        action="store_true",
        help="BFCL only: stop each episode after the model's first reply, the only one BFCL scores "
        "(the report then has no feedback or agent view); the same scores, fewer requests",
    )
    p.add_argument("--max-seconds", type=float, default=300, help="wall-time limit per episode (default 300)")
    p.add_argument(
        "--checks",
        default="none",
        type=check_names,
        help="checks the Agent modes run on answers and steps: module:Name of your own "
        "textagent.checks.Check, comma-separated (default none; the baselines run none)",
    )
    p.add_argument(
        "--examples",
        choices=["per-task", "all"],
        default="per-task",
        help="worked examples of a tool set with more than it shows: the ones closest to each question "
        "(per-task, default) or all of them, the same for every question (a prompt prefix the "
        "server can keep cached)",
    )
    p.add_argument(
        "--grouped-listing",
        action="store_true",
        help="text modes: words the tools' descriptions share (BFCL's multi-turn class paragraph) are "
        "said once above them, not in every description (about half the system prompt on BFCL multi-turn)",
    )
    add_example_options(p, "the worked examples of the text modes and the proxy for tools without their own")
    add_retry_options(p, "textagent's own loop (not bfcl-prompt or baseline, which keep their own loops' rules)")
    p.add_argument(
        "--native-examples",
        action="store_true",
        help="ablation: native modes are shown the worked examples the text modes get, built around the "
        "same tools (--example-tool); by default they are asked as a function-calling client asks: no examples",
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help="text and constrained modes stream their replies, closed as soon as complete calls are "
        "followed by a line that is not another call (EarlyStop)",
    )
    p.add_argument("--temperature", type=non_negative(float), default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300, help="read timeout of one request, seconds")
    p.add_argument("--no-pin", action="store_true", help="do not send id_slot (servers that reject it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--out",
        help="directory for episodes.jsonl.gz (with every episode's trace), run.json, report.md, report.png",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on with the run already in --out: episodes there are not run again; other modes or "
        "tasks are added to it (the settings must be the same)",
    )
    p.add_argument("--report", metavar="DIR", help="only (re)write the report of an existing run directory")
    p.add_argument(
        "--trace-of",
        metavar="TASK",
        help="with --report DIR: print the trace of TASK's episodes there (JSON lines; --modes picks "
        "the modes) instead of writing the report",
    )
    p.add_argument(
        "--check-suite",
        action="store_true",
        help="no model: replay every task's reference replies and check that they pass",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="diff the tables of two runs (directories); DIR:MODE takes one mode of a run, and two different "
        "modes named so are paired with each other",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="textagent bench",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return add_arguments(p)
