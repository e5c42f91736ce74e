"""llama-server throughput under different settings: ``python -m benchmarks.server_settings``.

It informs the defaults of ``LocalServer``, ``textagent serve`` and ``textagent bench``. For each
config (threads x poll x parallel x cache-reuse) it starts its own ``LocalServer`` on a free port,
waits for health, warms up once, then for each machine state (idle, or ``loaded(N)`` with N
CPU-burning processes) runs ``--rounds`` concurrent batches: one client per slot, each pinned to
its slot with ``id_slot``, each sending ``POST /completion`` with a ~500-token prompt that no
other request shares (a unique nonce line first, then text drawn from a per-request seed, so
neither the prompt cache nor ``--cache-reuse`` chunk shifting can help), ``n_predict`` 64,
``temperature`` 0, ``ignore_eos``.

From llama.cpp's ``timings`` of each response it reports, median over rounds:

* prompt tok/s: the batch's prompt tokens (sum of ``prompt_n``) over the wall span of its prompt
  phase; gen tok/s: the batch's generated tokens (sum of ``predicted_n``) over the wall span of
  its generation phase. Each slot's phases are placed on the client's clock back from the moment
  its reply was read (``predicted_ms``, and ``prompt_ms`` before it); a span runs from the first
  slot entering the phase to the last leaving it (see ``server_figures.phase_spans``);
* gen tok/s per slot: the median ``predicted_per_second`` of the slots;
* batch s: the client's wall time of the whole batch (first request sent to last reply read).

A config whose server fails to start, or whose requests fail or time out, is a row saying so.
Servers are always stopped and burners always killed. ``--out FILE`` also writes the table to
FILE and the raw numbers to FILE with the suffix ``.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import multiprocessing
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import requests

from .server_figures import Config, Measurement, Row, render_table, summarize

__all__ = ["configs", "main", "make_prompt", "measure_config", "parse_args", "run"]

N_PREDICT = 64
PROMPT_TOKENS = 500
QUICK = {"threads": "2", "poll": "0,50", "parallel": "1,2", "cache_reuse": "0", "rounds": 1}
FULL = {"threads": "1,2", "poll": "0,50", "parallel": "1,2,4", "cache_reuse": "0", "rounds": 2}


@cache
def _words() -> list[str]:
    """Plain words, mostly one token each: a prompt of N words is about N tokens (calibrated with
    the server's /tokenize when it answers)."""
    return Path(__file__).with_name("filler_words.txt").read_text(encoding="utf-8").split()


# -- configs and arguments -----------------------------------------------------------------------


def configs(
    threads: Sequence[int], polls: Sequence[int], parallels: Sequence[int], cache_reuses: Sequence[int] = (0,)
) -> list[Config]:
    """The product, in that nesting order (threads outermost)."""
    return [Config(t, p, n, c) for t, p, n, c in itertools.product(threads, polls, parallels, cache_reuses)]


def _int_list(minimum: int) -> Callable[[str], list[int]]:
    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError("expected at least one value")
        if any(v < minimum for v in values):
            raise argparse.ArgumentTypeError(f"values must be >= {minimum}, got {text!r}")
        return list(dict.fromkeys(values))

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.server_settings",
        description="llama-server throughput under different settings, as a markdown table.",
    )
    p.add_argument("--threads", type=_int_list(1), help=f"comma list of -t values (default {FULL['threads']})")
    p.add_argument("--poll", type=_int_list(0), help=f"comma list of --poll levels 0..100 (default {FULL['poll']})")
    p.add_argument("--parallel", type=_int_list(1), help=f"comma list of -np slot counts (default {FULL['parallel']})")
    p.add_argument(
        "--cache-reuse",
        type=_int_list(0),
        help=f"comma list of --cache-reuse chunk sizes, 0 = not passed (default {FULL['cache_reuse']})",
    )
    p.add_argument(
        "--load",
        type=_int_list(0),
        default=[0],
        help="comma list of CPU-burning process counts during the measurement; 0 = idle (default 0; "
        "e.g. 0,2 measures each config idle and loaded(2))",
    )
    p.add_argument(
        "--rounds",
        type=int,
        help=f"concurrent batches per config and machine state; the median is reported (default {FULL['rounds']})",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a small matrix: threads {QUICK['threads']}, poll {QUICK['poll']}, parallel "
        f"{QUICK['parallel']}, {QUICK['rounds']} round (options given explicitly still win)",
    )
    p.add_argument("--model", default=None, help="model name or .gguf path (default: LocalServer's default model)")
    p.add_argument("--ctx-size", type=int, default=8192, help="context per slot, as LocalServer (default 8192)")
    p.add_argument("--prompt-tokens", type=int, default=PROMPT_TOKENS, help=f"prompt size (default {PROMPT_TOKENS})")
    p.add_argument(
        "--n-predict", type=int, default=N_PREDICT, help=f"tokens generated per request (default {N_PREDICT})"
    )
    p.add_argument("--timeout", type=float, default=300, help="seconds per request (default 300)")
    p.add_argument(
        "--startup-timeout", type=float, default=180, help="seconds for a server to become healthy (default 180)"
    )
    p.add_argument(
        "--out", type=Path, help="also write the markdown table here, and the raw numbers to the .json beside it"
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    base = QUICK if args.quick else FULL
    for key in ("threads", "poll", "parallel", "cache_reuse"):
        if getattr(args, key) is None:
            setattr(args, key, _int_list(0)(str(base[key])))
    if args.rounds is None:
        args.rounds = base["rounds"]
    if args.rounds < 1:
        build_parser().error("--rounds must be at least 1")
    if any(p > 100 for p in args.poll):
        build_parser().error("--poll levels are 0..100")
    return args


# -- the requests --------------------------------------------------------------------------------


def make_prompt(nonce: str, words: int) -> str:
    """A unique nonce line first, then ``words`` words drawn from a generator seeded by the nonce,
    so that no two requests share a prefix or a long chunk."""
    rng = random.Random(nonce)
    lines = [f"Request {nonce}. Continue the list of words below."]
    body = [rng.choice(_words()) for _ in range(words)]
    lines += [" ".join(body[i : i + 12]) for i in range(0, len(body), 12)]
    return "\n".join(lines) + "\n"


def _words_for(url: str, tokens: int, timeout: float) -> int:
    """How many filler words make a prompt of about ``tokens`` tokens, nonce line included,
    asked of /tokenize (one word a token when the server does not answer)."""
    probe = 400

    def count(words: int) -> int:
        r = requests.post(url + "/tokenize", json={"content": make_prompt(uuid.uuid4().hex, words)}, timeout=timeout)
        r.raise_for_status()
        return len(r.json()["tokens"])

    with contextlib.suppress(requests.RequestException, ValueError, KeyError, TypeError, ZeroDivisionError):
        fixed = count(0)
        per_word = (count(probe) - fixed) / probe
        return max(1, round((tokens - fixed) / per_word))
    return tokens


def _completion(url: str, slot: int, prompt: str, n_predict: int, timeout: float) -> dict[str, Any]:
    r = requests.post(
        url + "/completion",
        timeout=timeout,
        json={
            "prompt": prompt,
            "n_predict": n_predict,
            "temperature": 0,
            "ignore_eos": True,
            "cache_prompt": True,
            "id_slot": slot,
            "stream": False,
        },
    )
    r.raise_for_status()
    timings = r.json().get("timings")
    if not isinstance(timings, dict) or "predicted_n" not in timings:
        raise ValueError(f"the reply of slot {slot} has no llama.cpp timings")
    return timings


def measure_batch(url: str, parallel: int, words: int, n_predict: int, timeout: float) -> Measurement:
    """``parallel`` requests at once, one per slot; raises the first failure."""
    prompts = [make_prompt(uuid.uuid4().hex, words) for _ in range(parallel)]
    results: list[dict[str, float] | None] = [None] * parallel
    ends = [0.0] * parallel
    errors: list[BaseException] = []
    barrier = threading.Barrier(parallel + 1)
    start = 0.0

    def client(slot: int) -> None:
        try:
            barrier.wait()
            results[slot] = _completion(url, slot, prompts[slot], n_predict, timeout)
            ends[slot] = time.perf_counter() - start
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(parallel)]
    for w in workers:
        w.start()
    start = time.perf_counter()
    barrier.wait()
    for w in workers:
        w.join(timeout + 5)
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    if any(r is None for r in results):
        raise TimeoutError(f"a request did not finish within {timeout:.0f} s")
    return Measurement(wall, [r for r in results if r is not None], ends)


# -- load, servers, the run ----------------------------------------------------------------------


def _burn(parent: int) -> None:  # pragma: no cover - runs in a child process
    while os.getppid() == parent:  # ends by itself if the benchmark dies
        for _ in range(200_000):
            pass


@contextlib.contextmanager
def burners(n: int) -> Iterator[list[multiprocessing.process.BaseProcess]]:
    """``n`` busy-looping processes for the duration of the block; always killed."""
    ctx = multiprocessing.get_context("fork") if sys.platform == "linux" else multiprocessing.get_context("spawn")
    procs: list[multiprocessing.process.BaseProcess] = []
    try:
        for _ in range(n):
            burner = ctx.Process(target=_burn, args=(os.getpid(),), daemon=True)
            burner.start()
            procs.append(burner)
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.terminate()
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def measure_config(
    config: Config,
    loads: Sequence[int],
    *,
    model: str | None = None,
    ctx_size: int = 8192,
    rounds: int = 2,
    prompt_tokens: int = PROMPT_TOKENS,
    n_predict: int = N_PREDICT,
    timeout: float = 300,
    startup_timeout: float = 180,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Row]:
    """One server with ``config``; a row per machine state in ``loads``. Never raises for a
    server that fails to start or a request that fails: the rows say so."""
    from textagent.errors import LocalServerError
    from textagent.local import LocalServer

    server = LocalServer(
        model,
        ctx_size=ctx_size,
        parallel=config.parallel,
        threads=config.threads,
        poll=None,
        extra_args=config.server_args(),
        startup_timeout=startup_timeout,
    )
    rows: list[Row] = []
    try:
        t0 = time.perf_counter()
        try:
            server.start()
        except (LocalServerError, OSError) as exc:
            return [Row(config, load, note=f"server failed to start: {_short(exc)}") for load in loads]
        progress(f"  healthy in {time.perf_counter() - t0:.1f} s on {server.url}")
        try:
            words = _words_for(server.url, prompt_tokens, timeout)
            _completion(server.url, 0, "Warm-up: say hello.", 8, timeout)
        except Exception as exc:
            return [Row(config, load, note=f"warm-up failed: {_short(exc)}") for load in loads]
        for load in loads:
            done: list[Measurement] = []
            note = ""
            with burners(load):
                for i in range(rounds):
                    try:
                        done.append(measure_batch(server.url, config.parallel, words, n_predict, timeout))
                    except requests.Timeout:
                        note = f"timed out (round {i + 1}, {timeout:.0f} s per request)"
                        break
                    except Exception as exc:
                        note = f"failed (round {i + 1}): {_short(exc)}"
                        break
            if note and done:
                note += f"; median of {len(done)} round(s)"
            row = summarize(config, load, done, note)
            if row.numbers:
                n = row.numbers
                progress(
                    f"  {row.machine}: prompt {n['prompt_tps']:.1f} tok/s, gen {n['gen_tps']:.1f} tok/s, "
                    f"{n['gen_tps_slot']:.1f} per slot, batch {n['wall_s']:.1f} s {note}".rstrip()
                )
            else:
                progress(f"  {row.machine}: {note}")
            rows.append(row)
        return rows
    finally:
        server.stop()


def run(args: argparse.Namespace, progress: Callable[[str], None] = lambda _: None) -> list[Row]:
    rows: list[Row] = []
    matrix = configs(args.threads, args.poll, args.parallel, args.cache_reuse)
    for index, config in enumerate(matrix, 1):
        progress(f"[{index}/{len(matrix)}] {config.label()}")
        rows += measure_config(
            config,
            args.load,
            model=args.model,
            ctx_size=args.ctx_size,
            rounds=args.rounds,
            prompt_tokens=args.prompt_tokens,
            n_predict=args.n_predict,
            timeout=args.timeout,
            startup_timeout=args.startup_timeout,
            progress=progress,
        )
    return rows


def header(args: argparse.Namespace) -> str:
    model = args.model or "the default model"
    return (
        f"llama-server settings, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
        f"{model}, prompt ~{args.prompt_tokens} tokens (unique), n_predict {args.n_predict}, "
        f"ctx {args.ctx_size} per slot, median of {args.rounds} round(s)"
    )


def json_path(out: Path) -> Path:
    """Where ``--out FILE`` puts the raw numbers: FILE with the suffix .json (never FILE itself)."""
    return out.with_suffix(".json") if out.suffix != ".json" else out.with_name(out.stem + ".raw.json")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    rows = run(args, progress=lambda line: print(line, file=sys.stderr, flush=True))
    title = header(args)
    table = title + "\n\n" + render_table(rows)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table + "\n")
        raw = {
            "header": title,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "elapsed_s": round(time.perf_counter() - started, 1),
            "rows": [r.to_json() for r in rows],
        }
        json_path(args.out).write_text(json.dumps(raw, indent=2) + "\n")
    print(f"\n{len(rows)} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0 if any(r.numbers for r in rows) or not rows else 1


if __name__ == "__main__":
    sys.exit(main())
