"""``textagent bench``: run the task suite in several modes side by side and write a report.

    textagent bench --modes text,baseline --out bench-run/             # embedded llama-server
    textagent bench --modes text,native --endpoint http://a:8080 --endpoint http://b:8080 --out run/
    textagent bench --compare before/ after/

``main(argv)`` takes the arguments after ``bench``. Exit codes: 0 done, 1 error, 2 usage,
130 interrupted (finished episodes are kept; the same command with ``--resume`` goes on).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._argtypes import Refused
from .._redact import redact
from ..conventions import apply_conventions
from ..errors import BackendError, TextagentError
from ..retry import Retry
from . import run_file
from .backends import BackendFactory, Slot, mode_availability
from .compare import compare_runs
from .episode import Settings
from .health import check_endpoint
from .metrics import summarize
from .mode_table import MODES, bench_mode
from .options import DEFAULT_MODES, build_parser
from .report import metric_rows, write_report
from .runner import episodes_file, load_episodes, run_bench
from .tasks import TaskFileError, load_tasks

__all__ = ["build_parser", "main", "run"]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_selected(args: argparse.Namespace) -> list[Any]:
    """The tasks ``--tasks`` names (a file, the shipped suite, or ``bfcl:...``), selected."""
    from .bfcl.tasks import bfcl_tasks, is_bfcl_spec

    tasks = (
        bfcl_tasks(args.tasks, progress=_say)
        if is_bfcl_spec(args.tasks)
        else load_tasks(args.tasks, allow_imports=getattr(args, "allow_imports", False))
    )
    return _select(tasks, args)


def _select(tasks: list[Any], args: argparse.Namespace) -> list[Any]:
    split = getattr(args, "split", "all")
    if split != "all":
        tasks = [t for t in tasks if t.split == split]
    if getattr(args, "limit_per_category", None) is not None:
        taken: dict[str, int] = {}
        kept = []
        for t in tasks:
            taken[t.kind] = taken.get(t.kind, 0) + 1
            if taken[t.kind] <= args.limit_per_category:
                kept.append(t)
        tasks = kept
    if args.kinds:
        kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
        tasks = [t for t in tasks if t.kind in kinds]
    if args.only:
        ids = [i.strip() for i in args.only.split(",") if i.strip()]
        unknown = [i for i in ids if i not in {t.id for t in tasks}]
        if unknown:
            raise TaskFileError(f"unknown task ids: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in ids]
    if getattr(args, "order", "mixed") == "mixed":
        tasks = mix_kinds(tasks)
    if args.limit is not None:
        tasks = tasks[: max(0, args.limit)]
    return tasks


def mix_kinds(tasks: list[Any]) -> list[Any]:
    """Round-robin over the kinds (each kind keeps its file order): single, chain, parallel, ..."""
    by_kind: dict[str, list[Any]] = {}
    for t in tasks:
        by_kind.setdefault(t.kind, []).append(t)
    queues = list(by_kind.values())
    out: list[Any] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def print_table(out_dir: Path, modes: Sequence[str]) -> None:
    summaries = summarize(load_episodes(out_dir), modes)
    shown = [m for m in modes if summaries.get(m) and summaries[m].episodes]
    if not shown:
        return
    rows = [dict(metric_rows(summaries[m])) for m in shown]
    names = list(rows[0])
    width = max(len(n) for n in names)
    cols = [max(len(m), *(len(r[n].replace("**", "")) for n in names)) for m, r in zip(shown, rows)]
    print(" " * width + "  " + "  ".join(m.rjust(c) for m, c in zip(shown, cols)))
    for n in names:
        print(n.ljust(width) + "  " + "  ".join(r[n].replace("**", "").rjust(c) for r, c in zip(rows, cols)))


def run(args: argparse.Namespace) -> int:
    done_otherwise = _not_a_run(args)
    if done_otherwise is not None:
        return done_otherwise
    try:
        modes, unavailable, tasks, settings = _what_to_run(args)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        previous, done = run_file.read_meta(out), load_episodes(out)
        _check_resume(args, out, previous, done, settings)
    except Refused as refused:
        _say(f"textagent bench: {refused}")
        return refused.code
    factory = BackendFactory(
        api=args.api, chat_format=args.chat_format, model_name=args.model, api_key=args.api_key, timeout=args.timeout
    )
    server = None
    proxies: list[Any] = []
    try:
        endpoints = list(args.endpoint)
        for url in endpoints:  # before any episode is sent into a dead one
            check_endpoint(url, args.api, api_key=args.api_key, on_wait=_say)
        model = args.model or ""
        if not endpoints:
            server, model = _embedded_server(args, tasks)
            assert server.url is not None
            endpoints = [server.url]
            factory.endpoints[server.url] = server
        workers = _workers(args, endpoints, factory)
        if not model:
            model = factory.endpoint(endpoints[0]).served_model()
        if any(bench_mode(m).starts_proxy for m in modes):  # a proxy in front of each worker's slot, on its server
            proxies += _start_proxies(args, workers, factory)
        meta = run_file.new_meta(args, tasks, modes, unavailable, endpoints, model, settings)
        if done:
            meta = run_file.merged(previous, meta)
        run_file.write_meta(out, meta)
        _say(
            f"textagent bench: {len(tasks)} tasks x {len(modes)} modes ({', '.join(modes)}) x {args.repeat} "
            f"on {len(endpoints)} endpoint(s), {len(workers)} at once; results in {out}/"
        )
        with _sigterm_as_interrupt():
            outcome = run_bench(
                tasks,
                modes,
                out,
                workers=workers,
                backend_for=factory,
                settings=settings,
                repeat=args.repeat,
                progress=not args.no_progress,
            )
        if outcome.skipped:
            _say(f"textagent bench: resumed; {outcome.skipped} episodes were already done")
        meta["finished"] = None if outcome.interrupted else run_file.now()
        meta["interrupted"] = outcome.interrupted
        run_file.write_meta(out, meta)
        if outcome.interrupted and not episodes_file(out).exists():  # before the first episode ended
            _say(f"textagent bench: interrupted before any episode finished; the same command goes on from {out}/")
            return 130
        report = write_report(out)
        print_table(out, modes)
        _say(f"textagent bench: report at {report}")
        if outcome.interrupted:
            _say(
                f"textagent bench: interrupted; {len(outcome.episodes)} episodes finished this time and are kept "
                f"in {episodes_file(out).name}; the same command with --resume goes on"
            )
            return 130
        return 0
    except KeyboardInterrupt:
        _say("textagent bench: interrupted before the run started")
        return 130
    finally:
        from .tools import MCP_POOL

        MCP_POOL.close()
        for proxy in proxies:
            proxy.stop()
        if server is not None:
            server.stop()


def _not_a_run(args: argparse.Namespace) -> int | None:
    """The exit code of --compare, --check-suite, --trace-of or --report, which run no episode;
    None when a run is asked for."""
    if args.compare:
        print(compare_runs(*args.compare), end="")
        return 0
    if args.check_suite:
        return _check_suite(args)
    if args.trace_of:
        return _print_trace(args)
    if args.report:
        _say(f"wrote {write_report(args.report)}")
        return 0
    return None


def _what_to_run(args: argparse.Namespace) -> tuple[list[str], dict[str, str], list[Any], Settings]:
    """The modes that can run (and why the others cannot), the tasks and the settings; Refused
    when the command line asks for something that cannot run."""
    if not args.out:
        raise Refused("--out DIR is required (or --compare A B, or --report DIR)")
    if args.concurrency < 1 or args.repeat < 1:
        raise Refused("--concurrency and --repeat must be at least 1")
    requested = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in requested if m not in MODES]
    if unknown:
        raise Refused(f"unknown mode {', '.join(unknown)}; choose from {', '.join(MODES)}")
    apply_conventions(args)
    if args.api == "ollama" and not args.model:
        raise Refused("--api ollama needs --model, the Ollama model name (e.g. qwen2.5-coder:0.5b)")
    if not args.endpoint and args.api != "llamacpp":
        raise Refused("the embedded server speaks llamacpp; pass --endpoint for other APIs")
    modes, unavailable = mode_availability(requested, api=args.api)
    for mode, why in unavailable.items():
        _say(f"textagent bench: skipping mode {mode}: {why}")
    if not modes:
        raise Refused("no mode can run", code=1)
    tasks = load_selected(args)
    if not tasks:
        raise Refused("no tasks selected")
    if args.first_reply and any(t.bfcl is None for t in tasks):
        raise Refused(
            "--first-reply is for BFCL tasks (--tasks bfcl:...): the suite's tasks are solved only by a final answer"
        )
    settings = Settings(
        reply_tokens=args.reply_tokens,
        max_steps=args.max_steps,
        max_repeats=args.max_repeats,
        max_call_errors=args.max_call_errors,
        max_seconds=args.max_seconds,
        temperature=args.temperature,
        seed=args.seed,
        pin_slots=not args.no_pin,
        checks=args.checks,
        examples=args.examples,
        stream=args.stream,
        first_reply=args.first_reply,
        native_examples=args.native_examples,
        example_style=args.example_style,
        example_tool=args.example_tool,
        grouped_listing=args.grouped_listing,
        retry=args.retry,
        retry_temperature=args.retry_temperature,
        retry_odds=args.retry_odds,
        retry_verify=args.retry_verify,
    )
    return modes, unavailable, tasks, settings


def _check_resume(
    args: argparse.Namespace, out: Path, previous: dict[str, Any], done: list[Any], settings: Settings
) -> None:
    """Refused when ``out`` holds episodes that this run would not go on with."""
    if done and not args.resume:
        raise Refused(
            f"{out} holds {len(done)} episodes of an earlier run "
            f"(`{previous.get('command', '?')}`); --resume goes on with it (episodes already there are not "
            "run again, new modes and tasks are added), or choose another --out"
        )
    differ = run_file.settings_differ(previous.get("settings") or {}, asdict(settings)) if done else ""
    if differ:
        raise Refused(
            f"--resume: {out} was run with other settings ({differ}); its episodes and "
            "these would not be comparable: choose another --out"
        )


def _workers(args: argparse.Namespace, endpoints: Sequence[str], factory: BackendFactory) -> list[Slot]:
    """--concurrency workers an endpoint, or as many as it has slots; on llama.cpp each pinned to its slot."""
    workers: list[Slot] = []
    for url in endpoints:
        slots = factory.slots(url)
        k = args.concurrency
        if slots is not None and k > slots:
            _say(f"textagent bench: {url} has {slots} slots; running {slots} episodes at once there, not {k}")
            k = slots
        workers += [Slot(url, i if args.api == "llamacpp" else None) for i in range(k)]
    return workers


def _embedded_server(args: argparse.Namespace, tasks: Sequence[Any]) -> tuple[Any, str]:
    """A llama-server of the run's own, sized for its tasks and open, and how the report names it."""
    from ..endpoint import Endpoint
    from ..local import DEFAULT_MODEL
    from .bfcl.tasks import is_multi_turn

    ctx = args.ctx_size or (32768 if any(is_multi_turn(t) for t in tasks) else 8192)
    server = Endpoint(
        gguf=args.gguf,
        chat_format=None if args.chat_format == "server" else args.chat_format,
        timeout=args.timeout,
        reuse_served=False,  # a server of the run's own, sized for it
        server={
            "parallel": args.concurrency,
            "threads": args.threads or None,
            "poll": args.poll,
            "extra_args": args.server_arg,
            "ctx_size": ctx,
        },
        prefix_cache=args.prefix_cache,
        progress=_say,
    )
    server.open()
    model = (
        f"{args.gguf or DEFAULT_MODEL} (embedded llama-server, -np {args.concurrency}, -c {ctx} per slot"
        + (f", -t {args.threads}" if args.threads else "")
        + (f", --poll {args.poll}" if args.poll is not None else "")
        + "".join(f" {a}" for a in args.server_arg)
        + ")"
    )
    return server, model


def _print_trace(args: argparse.Namespace) -> int:
    """``--report DIR --trace-of TASK``: the trace lines of that task's episodes, one JSON line each."""
    from ..trace import json_line

    if not args.report:
        _say("textagent bench: --trace-of needs --report DIR, the run to read")
        return 2
    modes = {m.strip() for m in args.modes.split(",") if m.strip()} if args.modes != DEFAULT_MODES else None
    found = [e for e in load_episodes(args.report) if e.task == args.trace_of and (modes is None or e.mode in modes)]
    if not found:
        _say(
            f"textagent bench: no episode of {args.trace_of!r} in {args.report}"
            + (f" in {', '.join(sorted(modes))}" if modes else "")
        )
        return 1
    for episode in found:
        for line in episode.trace:
            print(json_line({"mode": episode.mode, "repeat": episode.repeat, **line}))
    return 0


def _start_proxies(args: argparse.Namespace, workers: Sequence[Slot], factory: BackendFactory) -> list[Any]:
    """A ``textagent proxy`` (text mode, default repairs, the run's example style) for the ``proxy`` mode: one per worker
    pinned to a slot, using that slot alone (so its conversations keep their KV cache while the
    other modes' episodes run on the other slots, as every mode's do), else one per endpoint;
    the factory learns their URLs."""
    try:
        from ..proxy import ProxyConfig, ProxyServer, Upstream, UpstreamConfig
    except ImportError as exc:
        raise TextagentError(f"mode proxy needs the proxy extra (pip install 'textagent[proxy]'): {exc}") from None
    started = []
    for worker in dict.fromkeys((w.endpoint, w.slot) for w in workers):
        url, slot = worker
        upstream = Upstream(
            UpstreamConfig(
                endpoint=url,
                api=args.api,
                model=args.model,
                api_key=args.api_key,
                chat_format=None if args.chat_format == "server" else args.chat_format,
                timeout=args.timeout,
                # a proxy on one slot sends one request at a time; one on all slots, as many as they
                parallel=factory.slots(url) if slot is None else None,
                slots=() if slot is None else (slot,),
            )
        )
        proxy = ProxyServer(
            upstream,
            ProxyConfig(
                example_style=args.example_style,
                example_tool=args.example_tool,
                retry=Retry.from_parts(
                    args.retry,
                    temperature=args.retry_temperature,
                    seed=args.seed,
                    odds=args.retry_odds,
                    verify=args.retry_verify,
                ),
            ),
        ).start()
        started.append(proxy)
        if not upstream.wait(120) or upstream.state != "ready":
            for p in started:
                p.stop()
            raise BackendError(f"the textagent proxy in front of {redact(url)} did not become ready: {upstream.detail}")
        factory.proxies[worker] = proxy.url
        where = redact(url) + ("" if slot is None else f", slot {slot}")
        _say(f"textagent bench: mode proxy talks to a textagent proxy at {proxy.url} in front of {where}")
    return started


def _check_suite(args: argparse.Namespace) -> int:
    from .reference import check_suite

    tasks = load_selected(args)
    bad = 0
    for task, episode in check_suite(tasks):
        if episode is None:
            print(f"{task.id}: no reference replies (not checked)")
        elif not episode.success:
            bad += 1
            why = "; ".join(c.detail or c.type for c in episode.checks if not c.ok) or episode.stop_reason
            print(f"{task.id}: FAILED ({episode.failure}): {why}{' / ' + episode.error if episode.error else ''}")
    print(f"{len(tasks) - bad}/{len(tasks)} tasks: reference replies pass their checks")
    return 1 if bad else 0


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM ends the run like Ctrl-C: finished episodes kept, report written, server stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    args._argv = argv
    try:
        return run(args)
    except (TaskFileError, FileNotFoundError) as exc:
        _say(f"textagent bench: {exc}")
        return 2
    except BackendError as exc:
        _say(f"textagent bench: {exc}")
        return 7
    except TextagentError as exc:
        _say(f"textagent bench: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
