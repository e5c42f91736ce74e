"""A server started by `textagent serve`, reused by `textagent run`: its state file and its prefix cache."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .models import cache_dir
from .server import LocalServer, prefix_dir


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


def _state_file() -> Path:
    # Runtime state may live apart from the model cache (``$TEXTAGENT_STATE_DIR``).
    return Path(os.environ.get("TEXTAGENT_STATE_DIR") or cache_dir()) / "server.json"


def write_state(server: LocalServer) -> None:
    assert server.process is not None
    _state_file().parent.mkdir(parents=True, exist_ok=True)
    _state_file().write_text(
        json.dumps(
            {
                "pid": server.process.pid,
                "url": server.url,
                "model": str(server.model_path),
                "chat_format": server.chat_format,
                "prefix_identity": server.model_identity() if server.use_prefix_cache else "",
                "extra_args": " ".join(server.extra_args),
            }
        )
    )


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
