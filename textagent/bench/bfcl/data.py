"""BFCL's data, fetched like the models: the ``bfcl-eval`` wheel from PyPI, verified, cached, read as a zip.

The Berkeley Function Calling Leaderboard ships its questions and answers inside the
``bfcl-eval`` wheel (``bfcl_eval/data/BFCL_v4_<category>.json``, one JSON object a line, and
``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json``). The package's own dependencies
are huge (torch, vendor SDKs), so only the wheel is downloaded (``pip download --no-deps``),
checked against a pinned size and sha256, and kept under ``cache_dir()/data``. Nothing of
``bfcl_eval`` is imported.

    items = load_category("simple_python")          # fetched on first use
    items[0].id, items[0].question, items[0].functions, items[0].ground_truth
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import TextagentError
from ...jsonl import JsonlError, parse_jsonl

__all__ = [
    "AST_CATEGORIES",
    "BFCL_REQUIREMENT",
    "WHEEL_SHA256",
    "WHEEL_SIZE",
    "BfclDataError",
    "BfclItem",
    "fetch_wheel",
    "language_of",
    "load_category",
    "split_of",
    "wheel_path",
]

BFCL_REQUIREMENT = "bfcl-eval==2026.3.23"
WHEEL_NAME = "bfcl_eval-2026.3.23-py3-none-any.whl"
WHEEL_SIZE = 1_925_664
WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"

#: The single-turn categories scored by BFCL's AST checker (one user turn, calls compared with
#: the possible answers; the irrelevance ones have no answers: success is making no call).
AST_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)


class BfclDataError(TextagentError):
    """BFCL's data could not be fetched, verified or read."""


@dataclass(frozen=True)
class BfclItem:
    """One BFCL question: its id, category, position in its category, the chat turns of the
    question, the functions offered (BFCL's schema dialect, as shipped) and the accepted answers
    (None for the irrelevance categories)."""

    id: str
    category: str
    index: int
    question: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    ground_truth: tuple[dict[str, Any], ...] | None

    @property
    def user_text(self) -> str:
        """The question as one user turn (system turns of the item come first, as BFCL keeps them)."""
        return "\n\n".join(str(m.get("content", "")) for m in self.question if m.get("role") == "user")

    @property
    def system_text(self) -> str:
        return "\n\n".join(str(m.get("content", "")) for m in self.question if m.get("role") == "system")

    @property
    def split(self) -> str:
        return split_of(self.index)


def split_of(index: int) -> str:
    """Items at even positions of a category are dev, odd ones test."""
    return "dev" if index % 2 == 0 else "test"


def language_of(category: str) -> str:
    return (
        "java"
        if "java" in category and "javascript" not in category
        else "javascript"
        if "javascript" in category
        else "python"
    )


def wheel_path() -> Path:
    from ...local import cache_dir

    return cache_dir() / "data" / WHEEL_NAME


def _verified(path: Path) -> bool:
    from ...local import sha256_of

    if not path.is_file() or path.stat().st_size != WHEEL_SIZE:
        return False
    stamp = path.with_name(path.name + ".sha256")
    if stamp.is_file() and stamp.read_text().strip() == WHEEL_SHA256 and stamp.stat().st_mtime >= path.stat().st_mtime:
        return True
    if sha256_of(path) != WHEEL_SHA256:
        return False
    stamp.write_text(WHEEL_SHA256 + "\n")
    return True


def fetch_wheel(
    *, progress: Callable[[str], None] = lambda _: None, download: Callable[[str, Path], Path] | None = None
) -> Path:
    """The cached, verified ``bfcl-eval`` wheel; downloaded with pip (no dependencies) the first time.
    ``download(requirement, dest_dir) -> wheel path`` replaces pip (tests)."""
    target = wheel_path()
    if _verified(target):
        return target
    from ...errors import LocalServerError
    from ...local import pip_download, sha256_of

    target.parent.mkdir(parents=True, exist_ok=True)
    progress(f"fetching BFCL data: {BFCL_REQUIREMENT} (the wheel alone, {WHEEL_SIZE / 1e6:.1f} MB) ...")
    with tempfile.TemporaryDirectory(prefix="textagent-bfcl-", dir=target.parent) as tmp:
        try:
            wheel = (download or pip_download)(BFCL_REQUIREMENT, Path(tmp))
        except LocalServerError as exc:
            raise BfclDataError(str(exc)) from exc
        size, digest = wheel.stat().st_size, sha256_of(wheel)
        if size != WHEEL_SIZE or digest != WHEEL_SHA256:
            raise BfclDataError(
                f"{BFCL_REQUIREMENT}: got {size} bytes with sha256 {digest}, expected {WHEEL_SIZE} "
                f"bytes with sha256 {WHEEL_SHA256}; nothing was cached"
            )
        os.replace(wheel, target)
    target.with_name(target.name + ".sha256").write_text(WHEEL_SHA256 + "\n")
    progress(f"BFCL data: verified and cached at {target}")
    return target


def _read_lines(zf: zipfile.ZipFile, member: str) -> list[dict[str, Any]]:
    try:
        text = zf.read(member).decode("utf-8")
    except KeyError:
        raise BfclDataError(f"{member} is not in {WHEEL_NAME}") from None
    try:
        return [line.value for line in parse_jsonl(text, member)]
    except JsonlError as exc:
        raise BfclDataError(str(exc)) from None


@lru_cache(maxsize=32)
def _load(wheel: str, category: str) -> tuple[BfclItem, ...]:
    with zipfile.ZipFile(wheel) as zf:
        rows = _read_lines(zf, f"bfcl_eval/data/BFCL_v4_{category}.json")
        answers: dict[str, Any] = {}
        scored = "irrelevance" not in category and category != "live_relevance"  # else: no answers
        if scored:
            answers = {
                r["id"]: r["ground_truth"]
                for r in _read_lines(zf, f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")
            }
    items = []
    for index, row in enumerate(rows):
        turns = row.get("question") or [[]]
        if len(turns) != 1:
            raise BfclDataError(f"{row.get('id')}: {len(turns)} turns; only single-turn categories can be run")
        truth = answers.get(row["id"])
        if scored and truth is None:
            raise BfclDataError(f"{row['id']}: no possible answer in the wheel")
        items.append(
            BfclItem(
                row["id"],
                category,
                index,
                tuple(turns[0]),
                tuple(row.get("function") or ()),
                tuple(truth) if truth is not None else None,
            )
        )
    return tuple(items)


def load_category(
    category: str, *, wheel: Path | None = None, progress: Callable[[str], None] = lambda _: None
) -> list[BfclItem]:
    """Every item of one single-turn category, in BFCL's order."""
    if category not in AST_CATEGORIES:
        raise BfclDataError(
            f"unknown or unsupported BFCL category {category!r}; single-turn categories: {', '.join(AST_CATEGORIES)}"
        )
    path = wheel or fetch_wheel(progress=progress)
    return list(_load(str(path), category))
