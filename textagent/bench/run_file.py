"""The run.json of a bench run: what the run was (command, machine, model, endpoints, modes,
tasks, settings), how it is merged when ``--resume`` adds to it, and reading and writing it
(a run.json that does not fit is refused with the field named: records.meta_problem)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._redact import redact
from .episode import Settings
from .records import meta_problem
from .tasks import TaskFileError, default_suite_path

__all__ = ["RUN_FILE", "machine", "merged", "new_meta", "now", "read_meta", "settings_differ", "write_meta"]

RUN_FILE = "run.json"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu or platform.machine(),
        "cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "host": platform.node(),
    }


def now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def new_meta(
    args: argparse.Namespace,
    tasks: list[Any],
    modes: list[str],
    unavailable: dict[str, str],
    endpoints: list[str],
    model: str,
    settings: Settings,
) -> dict[str, Any]:
    from .. import __version__

    return {  # endpoint URLs without their credentials (http://user:password@host)
        "command": redact(
            ("textagent bench " + shlex.join(args._argv))
            if getattr(args, "_argv", None) is not None
            else "textagent " + shlex.join(sys.argv[1:]),
            [args.api_key or ""],
        ),
        "started": now(),
        "finished": None,
        "machine": machine(),
        "model": model,
        "endpoints": [redact(e) for e in endpoints],
        "api": args.api,
        "modes": modes,
        "unavailable": unavailable,
        "tasks_file": args.tasks or str(default_suite_path().name) + " (shipped suite)",
        "split": getattr(args, "split", "all"),
        "limit_per_category": getattr(args, "limit_per_category", None),
        "n_tasks": len(tasks),
        "tasks": [t.id for t in tasks],
        "repeat": args.repeat,
        "concurrency": args.concurrency,
        "settings": asdict(settings),
        "planned": len(tasks) * len(modes) * args.repeat,
        "textagent": __version__,
    }


def settings_differ(before: dict[str, Any], now: dict[str, Any]) -> str:
    """The settings two runs set differently, as ``name: before -> now`` (a setting a run of an
    older version lacks had its default then)."""
    defaults = asdict(Settings())
    return ", ".join(
        f"{k}: {before.get(k, defaults.get(k))!r} -> {now[k]!r}"
        for k in now
        if (k in before or k in defaults) and before.get(k, defaults.get(k)) != now[k]
    )


def merged(previous: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The run.json of a resumed run: its first start, every command that added to it, and the
    modes, tasks and planned episodes of all of them."""
    if not previous:
        return meta
    modes = list(dict.fromkeys([*previous.get("modes", []), *meta["modes"]]))
    tasks = list(dict.fromkeys([*previous.get("tasks", []), *meta["tasks"]]))
    planned = {
        (t, m, r)
        for run in (previous, meta)
        for t in run.get("tasks", [])
        for m in run.get("modes", [])
        for r in range(run.get("repeat", 1))
    }
    commands = previous.get("commands") or ([previous["command"]] if previous.get("command") else [])
    return {
        **meta,
        "started": previous.get("started", meta["started"]),
        "resumed": [*previous.get("resumed", []), now()],
        "commands": list(dict.fromkeys([*commands, meta["command"]])),
        "modes": modes,
        "tasks": tasks,
        "n_tasks": len(tasks),
        "planned": len(planned),
        "unavailable": {**previous.get("unavailable", {}), **meta["unavailable"]},
    }


def read_meta(out: Path) -> dict[str, Any]:
    """The run.json of ``out`` ({} when there is none); TaskFileError when it cannot be used."""
    try:
        data = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    except OSError:
        return {}
    except ValueError as exc:
        raise TaskFileError(f"{out / RUN_FILE} is not JSON ({exc}); move it away to start the run afresh") from None
    problem = meta_problem(data)
    if problem is not None:
        raise TaskFileError(f"{out / RUN_FILE}: {problem}; fix it or move it away to start the run afresh")
    return dict(data)


def write_meta(out: Path, meta: dict[str, Any]) -> None:
    (out / RUN_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
