"""The fixed prefix of a prompt (system prompt, tool list, worked examples), evaluated once, ever.

llama-server keeps a prompt's KV cache only while it runs, and only in the slot that evaluated
it. Started with ``--slot-save-path DIR``, it writes a slot's KV cache to a file in DIR and reads
it back (``POST /slots/{id}?action=save|restore``). A :class:`PrefixCache` over that DIR keeps
one file per model + prefix: the first request with a new prefix has the server evaluate the
prefix alone and save it; every later request with that prefix, in this process or another,
restores the file instead of evaluating the prefix again, unless the slot holds it already.

What a file may be restored for is keyed, in the file's sidecar (``KEY.json``), by the prefix's
text and an ``identity``: the model file, the llama.cpp build and the server's KV settings
(:func:`server_identity`). Another model, build, tool list or prompt finds no file. A file whose
bytes are not those its sidecar records (corrupt, cut short, replaced) is deleted and rebuilt,
never sent. A server without the slots API (no ``--slot-save-path``, or an older build) turns
the cache off for that server after one refusal, and requests go on as without it. Disk use
is bounded (``max_bytes``): the files used longest ago go first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BackendHTTPError

__all__ = ["DEFAULT_MAX_BYTES", "MIN_PREFIX_CHARS", "PrefixCache", "server_identity"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 4_000_000_000  # ~40 BFCL tool sets, or ~90 demo prefixes, of the 1.5B
MIN_PREFIX_CHARS = 2000  # a shorter prefix evaluates in about the time a file takes to read
_SUFFIX, _META = ".bin", ".json"


def server_identity(props: dict[str, Any], model: str, extra: str = "") -> str:
    """What a saved KV cache is valid for: the model file (``model``: its digest, or its path,
    size and time), the llama.cpp build (``/props`` build_info), the slots (a file saved by a
    server with one KV stream does not load into one with two: "n_stream mismatch"), and the
    server settings that shape the cache (``extra``: e.g. the KV cache types given to the server)."""
    build = str(props.get("build_info") or props.get("build") or "?")
    slots = props.get("total_slots")
    return hashlib.sha256(json.dumps([model, build, slots, extra]).encode()).hexdigest()[:32]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class _Timing:
    """Where a prefix's time went, for ``run -v`` and the trace."""

    restored: int = 0  # restores done
    saved: int = 0  # prefixes evaluated and saved
    seconds: float = 0.0  # spent restoring, evaluating and saving
    tokens_restored: int = 0


@dataclass
class PrefixCache:
    """Prefix files in ``directory`` (a llama-server's ``--slot-save-path``) for one server
    (``identity``: :func:`server_identity`). Thread-safe; one per server."""

    directory: Path
    identity: str
    max_bytes: int = DEFAULT_MAX_BYTES
    min_chars: int = MIN_PREFIX_CHARS
    enabled: bool = True
    slots: int = 1  # the server's slots: with several, only requests pinned to one (id_slot) use the cache
    timing: _Timing = field(default_factory=_Timing)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        self._lock = threading.Lock()  # the bookkeeping: which slot holds what, the files' records
        self._slot_locks: dict[int, threading.Lock] = {}  # one prefix made ready at a time per slot
        self._key_locks: dict[str, threading.Lock] = {}  # one save or restore of a file at a time
        self._held: dict[int, str] = {}  # slot -> key of the prefix this process put there

    @classmethod
    def of_server(cls, backend: Any, directory: Path, model: str, extra: str = "") -> PrefixCache:
        """The cache for the server ``backend`` talks to, whose slots save into ``directory``:
        its identity and slots read from its ``/props`` (``model``, ``extra``: server_identity)."""
        props = backend.props()
        return cls(directory, server_identity(props, model, extra), slots=int(props.get("total_slots") or 1))

    def key(self, prefix: str) -> str:
        return hashlib.sha256(f"{self.identity}\0{prefix}".encode()).hexdigest()[:40]

    # -- the one entry point --------------------------------------------------------------------
    def prepare(self, backend: Any, slot: int, prefix: str) -> None:
        """Make ``slot`` of ``backend``'s server hold ``prefix``'s KV cache: nothing when this
        process put it there last, else restored from its file, else evaluated once and saved.
        Never raises for the cache's own sake: a failure leaves the request to evaluate the
        prefix as it would have without a cache (a BackendError of the server is raised as is
        only when the server is down, which the request itself would meet)."""
        if not self.enabled or len(prefix) < self.min_chars:
            return
        key = self.key(prefix)
        with self._lock:
            if self._held.get(slot) == key:
                return
            slot_lock = self._slot_locks.setdefault(slot, threading.Lock())
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        # another slot's prefix (its evaluation takes seconds) never holds this one up
        with slot_lock, key_lock:
            started = time.perf_counter()
            try:
                if self._restore(backend, slot, key):
                    self.timing.restored += 1
                else:
                    self._save(backend, slot, key, prefix)
                    self.timing.saved += 1
                with self._lock:
                    self._held[slot] = key
            except BackendHTTPError as exc:
                if exc.status in (404, 405, 501):  # no slots API here, or no --slot-save-path
                    log.info("prefix cache off for %s: the server refused %s", backend.url, exc)
                    self.enabled = False
                else:
                    log.info("prefix cache: %s", exc)
            finally:
                self.timing.seconds += time.perf_counter() - started

    def forget(self, slot: int | None = None) -> None:
        """The slot (every slot: None) may hold something else now (another client used it)."""
        with self._lock:
            if slot is None:
                self._held.clear()
            else:
                self._held.pop(slot, None)

    # -- files ------------------------------------------------------------------------------------
    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.directory / (key + _SUFFIX), self.directory / (key + _META)

    def _meta(self, key: str) -> dict[str, Any] | None:
        """The sidecar of ``key`` if it and its file agree (identity, size, digest), else None
        (and both are deleted: a corrupt or foreign file is never restored)."""
        data_path, meta_path = self._paths(key)
        if not meta_path.exists() and not data_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            ok = (
                isinstance(meta, dict)
                and meta.get("identity") == self.identity
                and meta.get("key") == key
                and data_path.stat().st_size == meta.get("bytes")
                and _digest(data_path) == meta.get("sha256")
            )
        except (OSError, ValueError):
            ok, meta = False, None
        if not ok:
            log.info("prefix cache: %s does not match its record; deleted, to be rebuilt", data_path.name)
            self._delete(key)
            return None
        return meta

    def _restore(self, backend: Any, slot: int, key: str) -> bool:
        meta = self._meta(key)
        if meta is None:
            return False
        data_path, meta_path = self._paths(key)
        try:
            answer = backend.slot_action(slot, "restore", data_path.name)
        except BackendHTTPError as exc:
            if exc.status in (404, 405, 501):
                raise
            log.info("prefix cache: the server could not restore %s (%s); rebuilt", data_path.name, exc)
            self._delete(key)
            return False
        self.timing.tokens_restored += int(answer.get("n_restored") or 0)
        meta["used"] = time.time()
        self._write_meta(meta_path, meta)
        return True

    def _save(self, backend: Any, slot: int, key: str, prefix: str) -> None:
        backend.evaluate(prefix, id_slot=slot)
        data_path, meta_path = self._paths(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        answer = backend.slot_action(slot, "save", data_path.name)
        try:
            size = data_path.stat().st_size
        except OSError:
            # the server saved elsewhere (its --slot-save-path is not this directory): no cache
            log.info("prefix cache off for %s: its slot files are not in %s", backend.url, self.directory)
            self.enabled = False
            return
        meta = {
            "key": key,
            "identity": self.identity,
            "bytes": size,
            "sha256": _digest(data_path),
            "tokens": int(answer.get("n_saved") or 0),
            "chars": len(prefix),
            "created": time.time(),
            "used": time.time(),
        }
        self._write_meta(meta_path, meta)
        self._evict(keep=key)

    @staticmethod
    def _write_meta(path: Path, meta: dict[str, Any]) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp, path)

    def _delete(self, key: str) -> None:
        for path in self._paths(key):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.info("prefix cache: could not delete %s: %s", path, exc)

    def entries(self) -> list[dict[str, Any]]:
        """The sidecars in the directory (any identity), oldest use first."""
        found = []
        for meta_path in self.directory.glob("*" + _META):
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and isinstance(meta.get("key"), str):
                found.append(meta)
        return sorted(found, key=lambda m: float(m.get("used") or 0))

    def _evict(self, keep: str) -> None:
        """Delete the files used longest ago until the directory holds at most ``max_bytes``
        (the file just saved stays, whatever its size, and so does one another slot is reading)."""
        with self._lock:
            entries = self.entries()
            total = sum(int(m.get("bytes") or 0) for m in entries)
            for meta in entries:
                if total <= self.max_bytes:
                    break
                busy = self._key_locks.get(meta["key"])
                if meta["key"] == keep or (busy is not None and busy.locked()):
                    continue
                self._delete(meta["key"])
                total -= int(meta.get("bytes") or 0)

    def clear(self) -> int:
        """Delete every prefix file in the directory; the number of files deleted."""
        entries = self.entries()
        for meta in entries:
            self._delete(meta["key"])
        for stray in self.directory.glob("*" + _SUFFIX):  # a file whose sidecar was never written
            stray.unlink(missing_ok=True)
        self.forget()
        return len(entries)
