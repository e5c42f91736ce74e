"""What textagent keeps about llama-server between runs: the server `textagent serve` started
(its state file, reused by `textagent run`), the folder of saved prompt prefixes, and the note that
llama-server crashes loading repacked weights on this machine (so later starts skip them)."""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .models import cache_dir


def prefix_dir() -> Path:
    """Where the embedded server saves the KV cache of prompt prefixes (``textagent cache`` lists
    and clears it; ``$TEXTAGENT_PREFIX_DIR`` moves it)."""
    return Path(os.environ.get("TEXTAGENT_PREFIX_DIR") or cache_dir() / "prefixes")


def served_prefix_cache(state: dict[str, str], backend: Any) -> Any:
    """The PrefixCache for ``backend`` of the server `textagent serve` runs (``state``: running_server()),
    set on it; None when that server was started without one."""
    if not state.get("prefix_identity"):
        return None
    from ..backends.prefix_cache import PrefixCache

    backend.prefix_cache = PrefixCache.of_server(
        backend, prefix_dir(), state["prefix_identity"], state.get("extra_args", "")
    )
    return backend.prefix_cache


def _state_dir() -> Path:
    # Runtime state may live apart from the model cache (``$TEXTAGENT_STATE_DIR``).
    return Path(os.environ.get("TEXTAGENT_STATE_DIR") or cache_dir())


def _state_file() -> Path:
    return _state_dir() / "server.json"


def write_state(state: Mapping[str, Any]) -> None:
    """Keep what `textagent serve` started (LocalServer.state()), for `textagent run` to find."""
    _state_file().parent.mkdir(parents=True, exist_ok=True)
    _state_file().write_text(json.dumps(dict(state)))


def clear_state() -> None:
    _state_file().unlink(missing_ok=True)


def running_server() -> dict[str, str] | None:
    """The server ``textagent serve`` is running, if it is alive and healthy."""
    import requests

    try:
        state = json.loads(_state_file().read_text())
        os.kill(int(state["pid"]), 0)
        if requests.get(state["url"] + "/health", timeout=2).status_code == 200:
            return state
    except (OSError, ValueError, KeyError, requests.RequestException):
        pass
    return None


# -- llama-server crashing on repacked weights -----------------------------------------------------
# A CPU that advertises AMX inside a VM that does not grant it kills llama-server (SIGILL) while it
# repacks the weights for the AMX kernels; --no-repack loads them as they are. The note says so for
# one binary on one CPU, so that later starts go straight to --no-repack instead of crashing first.


def _crash_file() -> Path:
    return _state_dir() / "repack-crashes.json"


@functools.cache
def cpu_flags() -> str:
    """The CPU's feature flags as the kernel lists them (x86 ``flags``, Arm ``Features``), sorted;
    the machine and processor names where there is no /proc/cpuinfo."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                return " ".join(sorted(set(value.split())))
    return f"{platform.machine()} {platform.processor()}".strip()


def _machine(binary: Path) -> dict[str, Any]:
    """What a note is kept for: the binary (path, size, modification time) and the CPU's flags."""
    st = binary.stat()
    flags = cpu_flags()
    return {
        "binary": str(binary),
        "binary_size": st.st_size,
        "binary_mtime_ns": st.st_mtime_ns,
        "cpu": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "amx": [f for f in flags.split() if f.startswith("amx")],  # what the CPU says it has, for people
    }


def repack_crashes() -> list[dict[str, Any]]:
    """Every note (``textagent cache`` shows them): the binary, the CPU, when, and the crash's log."""
    try:
        notes = json.loads(_crash_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in notes if isinstance(n, dict) and "binary" in n] if isinstance(notes, list) else []


def _same(note: dict[str, Any], machine: dict[str, Any]) -> bool:
    return all(note.get(k) == machine[k] for k in ("binary", "binary_size", "binary_mtime_ns", "cpu"))


def repack_crash(binary: Path) -> dict[str, Any] | None:
    """The note that ``binary`` crashed loading repacked weights on this CPU, if there is one."""
    machine = _machine(binary)
    return next((n for n in repack_crashes() if _same(n, machine)), None)


def remember_repack_crash(binary: Path, crash_log: Path) -> None:
    """Note that ``binary`` crashed loading repacked weights on this CPU and started without them;
    ``crash_log`` is the crashed start's log. A note that cannot be written is only a slower start."""
    machine = _machine(binary)
    note = {
        **machine,
        "when": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "log": str(crash_log),
    }
    notes = [n for n in repack_crashes() if not _same(n, machine)] + [note]
    path = _crash_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps(notes, indent=1), encoding="utf-8")
        os.replace(part, path)  # whole or not at all: another start may be reading it


def forget_repack_crashes() -> int:
    """Delete every note (the next start tries repacked weights again); how many there were."""
    count = len(repack_crashes())
    _crash_file().unlink(missing_ok=True)
    return count
