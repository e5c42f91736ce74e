"""Speculative decoding on real tool-call replies: ``python -m benchmarks.speculative``.

    python -m benchmarks.speculative --model qwen2.5-coder-1.5b \\
        --configs none,draft,ngram-simple,ngram-mod --tasks bfcl:simple_python,multiple,parallel \\
        --split dev --limit-per-category 4 --out docs/perf/speculative.md

For each config it starts its own ``LocalServer`` (the same model, threads and slots; only the
speculative arguments differ), runs every selected task's **first reply** in one mode (text by
default) at temperature 0, one request at a time, and reports from llama.cpp's ``timings``:
generation tokens/s (tokens generated over the milliseconds spent generating them, summed over
all replies), prompt tokens/s, seconds per item (client wall time), the draft acceptance rate,
the BFCL/suite score of the replies, and how many replies are **identical** to the first
config's (the reference, normally ``none``). Speculative decoding at temperature 0 is meant to
change speed, not text; the last column says whether it did.

Configs (``--draft`` names the draft model; default qwen2.5-coder-0.5b, same tokenizer family):

* ``none``: no speculative decoding;
* ``draft`` / ``draft:N``: the draft model (``--spec-type draft-simple -md``), ``--spec-draft-n-max N``
  (default 8), n-min 0;
* ``ngram-simple``, ``ngram-mod``, ``ngram-map-k``, ``ngram-cache``: drafts from n-grams of the
  prompt and reply (tool arguments mostly copy words of the question), no second model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ConfigResult", "ReplyStats", "SpecConfig", "main", "parse_config", "render_table", "run", "server_args"]

DEFAULT_DRAFT = "qwen2.5-coder-0.5b"
DEFAULT_DRAFT_MAX = 8
NGRAM_TYPES = ("ngram-simple", "ngram-mod", "ngram-map-k", "ngram-map-k4v", "ngram-cache")


@dataclass(frozen=True)
class SpecConfig:
    name: str  # as given on the command line
    kind: str  # none | draft | an n-gram --spec-type
    draft_max: int | None = None


def parse_config(text: str) -> SpecConfig:
    """``none``, ``draft``, ``draft:N`` or an n-gram type; ValueError otherwise."""
    text = text.strip()
    if text == "none":
        return SpecConfig(text, "none")
    if text == "draft" or text.startswith("draft:"):
        _, _, n = text.partition(":")
        try:
            draft_max = int(n) if n else DEFAULT_DRAFT_MAX
        except ValueError:
            raise ValueError(f"draft:N needs a number of tokens, got {text!r}") from None
        if draft_max < 1:
            raise ValueError(f"draft:N needs N >= 1, got {text!r}")
        return SpecConfig(text, "draft", draft_max)
    if text in NGRAM_TYPES:
        return SpecConfig(text, text)
    raise ValueError(f"unknown config {text!r}: none, draft, draft:N, or one of {', '.join(NGRAM_TYPES)}")


def server_args(config: SpecConfig, draft_path: str | None) -> list[str]:
    """llama-server arguments of one config (beyond LocalServer's own)."""
    if config.kind == "none":
        return []
    if config.kind == "draft":
        if not draft_path:
            raise ValueError("a draft config needs a draft model path")
        # -md alone loads the draft model but does not use it: the type must be named as well
        return [
            "--spec-type",
            "draft-simple",
            "-md",
            draft_path,
            "--spec-draft-n-max",
            str(config.draft_max),
            "--spec-draft-n-min",
            "0",
        ]
    return ["--spec-type", config.kind]


@dataclass
class ReplyStats:
    """What one first reply cost and said."""

    task: str
    text: str
    success: bool
    seconds: float
    predicted_n: float = 0.0
    predicted_ms: float = 0.0
    prompt_n: float = 0.0
    prompt_ms: float = 0.0
    draft_n: float = 0.0
    draft_accepted: float = 0.0


@dataclass
class ConfigResult:
    config: str
    args: list[str]
    replies: list[ReplyStats] = field(default_factory=list)
    error: str = ""

    def total(self, name: str) -> float:
        return sum(getattr(r, name) for r in self.replies)

    @property
    def gen_tps(self) -> float | None:
        ms = self.total("predicted_ms")
        return self.total("predicted_n") / ms * 1000 if ms else None

    @property
    def prompt_tps(self) -> float | None:
        ms = self.total("prompt_ms")
        return self.total("prompt_n") / ms * 1000 if ms else None

    @property
    def seconds_per_item(self) -> float | None:
        return statistics.fmean(r.seconds for r in self.replies) if self.replies else None

    @property
    def acceptance(self) -> float | None:
        drafted = self.total("draft_n")
        return self.total("draft_accepted") / drafted if drafted else None

    @property
    def solved(self) -> int:
        return sum(r.success for r in self.replies)


def measure(
    config: SpecConfig,
    tasks: Sequence[Any],
    *,
    model: str,
    draft_path: str | None,
    mode: str,
    threads: int | None,
    reply_tokens: int,
    progress: Callable[[str], None],
) -> ConfigResult:
    """Start a server with this config, run every task's first reply, stop the server."""
    from textagent.bench.backends import BackendFactory, Slot
    from textagent.bench.episode import Settings, run_episode
    from textagent.errors import TextagentError
    from textagent.local import LocalServer
    from textagent.steps import Step

    args = server_args(config, draft_path)
    result = ConfigResult(config.name, args)
    server = LocalServer(model, parallel=1, threads=threads, extra_args=args, progress=progress)
    try:
        server.start()
    except TextagentError as exc:
        result.error = f"server did not start: {str(exc).splitlines()[0]}"
        return result
    try:
        factory = BackendFactory(api="llamacpp")
        settings = Settings(reply_tokens=reply_tokens, first_reply=True, temperature=0.0)
        for i, task in enumerate(tasks):
            backend, chat_format = factory(mode, Slot(server.url, 0))
            started = time.monotonic()
            episode = run_episode(task, mode, backend, chat_format=chat_format, settings=settings, slot=0)
            seconds = time.monotonic() - started
            # the first reply of the episode's run: its text, usage and server timings
            steps = episode.result.steps
            if episode.error and not steps:
                result.error = f"{task.id}: {episode.error}"
                break
            first = steps[0] if steps else Step(0, "")
            timings = first.timings
            result.replies.append(
                ReplyStats(
                    task.id,
                    first.raw,
                    episode.success,
                    seconds,
                    predicted_n=float(timings.get("predicted_n") or first.usage.completion_tokens or 0),
                    predicted_ms=float(timings.get("predicted_ms") or 0),
                    prompt_n=float(first.usage.prompt_evaluated or 0),
                    prompt_ms=float(timings.get("prompt_ms") or 0),
                    draft_n=float(timings.get("draft_n") or 0),
                    draft_accepted=float(timings.get("draft_n_accepted") or 0),
                )
            )
            progress(f"{config.name}: {i + 1}/{len(tasks)} {task.id} {seconds:.1f} s")
    finally:
        server.stop()
    return result


def _f(x: float | None, digits: int = 1, suffix: str = "") -> str:
    return "—" if x is None else f"{x:.{digits}f}{suffix}"


def render_table(results: Sequence[ConfigResult]) -> str:
    """Markdown: a row per config, the first config the reference for speed-up and identical replies."""
    ref = next((r for r in results if r.replies and not r.error), None)
    ref_text = {x.task: x.text for x in ref.replies} if ref else {}
    lines = [
        "| config | server arguments | gen tok/s | prompt tok/s | s per item | speed-up (s per item) | "
        "draft accepted | solved | replies identical to the first |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if not r.replies:
            lines.append(f"| {r.config} | `{' '.join(r.args) or '—'}` | {r.error or 'no replies'} | | | | | | |")
            continue
        same = sum(1 for x in r.replies if x.task in ref_text and ref_text[x.task] == x.text)
        ref_seconds = ref.seconds_per_item if ref else None
        speedup = (ref_seconds / r.seconds_per_item) if ref_seconds is not None and r.seconds_per_item else None
        acc = "—" if r.acceptance is None else f"{r.acceptance:.0%} of {r.total('draft_n'):.0f}"
        lines.append(
            f"| {r.config} | `{' '.join(_short_args(r.args)) or '—'}` | {_f(r.gen_tps)} | {_f(r.prompt_tps)} | "
            f"{_f(r.seconds_per_item, 2)} | {_f(speedup, 2, '×')} | {acc} | {r.solved}/{len(r.replies)} | "
            f"{same}/{len(r.replies)}{' (' + r.error + ')' if r.error else ''} |"
        )
    return "\n".join(lines) + "\n"


def _short_args(args: Sequence[str]) -> list[str]:
    return [Path(a).name if a.endswith(".gguf") else a for a in args]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.speculative",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="qwen2.5-coder-1.5b", help="target model: a name or .gguf path")
    p.add_argument("--draft", default=DEFAULT_DRAFT, help=f"draft model for draft configs (default {DEFAULT_DRAFT})")
    p.add_argument(
        "--configs",
        default="none,draft:3,draft:8,ngram-simple,ngram-mod",
        help="comma list: none, draft, draft:N, " + ", ".join(NGRAM_TYPES) + " (the first is the reference)",
    )
    p.add_argument(
        "--mode",
        default="text",
        choices=["text", "constrained", "baseline", "bfcl-prompt"],
        help="the mode whose first replies are measured (default text)",
    )
    p.add_argument(
        "--tasks",
        default="bfcl:simple_python,multiple,parallel,parallel_multiple,irrelevance",
        help="as textagent bench --tasks",
    )
    p.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    p.add_argument("--limit-per-category", type=int, default=4)
    p.add_argument("--threads", type=int, default=None, help="-t (default: llama-server's own, all cores)")
    p.add_argument("--reply-tokens", type=int, default=256)
    p.add_argument(
        "--out", type=Path, help="also write the table here (markdown) and the raw numbers beside it (.json)"
    )
    return p


def run(args: argparse.Namespace, progress: Callable[[str], None] = lambda _: None) -> list[ConfigResult]:
    from textagent.bench.bfcl.tasks import bfcl_tasks, is_bfcl_spec
    from textagent.bench.cli import _select
    from textagent.bench.tasks import load_tasks
    from textagent.local import resolve_model

    configs = [parse_config(c) for c in args.configs.split(",") if c.strip()]
    draft_path = (
        str(resolve_model(args.draft, progress=progress)[0]) if any(c.kind == "draft" for c in configs) else None
    )
    tasks = bfcl_tasks(args.tasks, progress=progress) if is_bfcl_spec(args.tasks) else load_tasks(args.tasks)
    selection = argparse.Namespace(
        split=args.split, limit_per_category=args.limit_per_category, kinds=None, only=None, order="mixed", limit=None
    )
    tasks = _select(tasks, selection)
    return [
        measure(
            c,
            tasks,
            model=args.model,
            draft_path=draft_path,
            mode=args.mode,
            threads=args.threads,
            reply_tokens=args.reply_tokens,
            progress=progress,
        )
        for c in configs
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        [parse_config(c) for c in args.configs.split(",") if c.strip()]
    except ValueError as exc:
        print(f"speculative: {exc}", file=sys.stderr)
        return 2
    results = run(args, progress=lambda s: print(s, file=sys.stderr, flush=True))
    head = (
        f"{args.model}, mode {args.mode}, first replies of `{args.tasks}` ({args.split} split, "
        f"{args.limit_per_category} per category), one slot, temperature 0, "
        f"{datetime.datetime.now().astimezone().isoformat(timespec='minutes')}\n\n"
    )
    table = head + render_table(results)
    print(table, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table, encoding="utf-8")
        args.out.with_suffix(".json").write_text(
            json.dumps([asdict(r) for r in results], indent=1) + "\n", encoding="utf-8"
        )
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
