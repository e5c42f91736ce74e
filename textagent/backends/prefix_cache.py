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
is bounded (``max_bytes``): the files used longest ago go first, slot files without a record
among them once they are older than ``ORPHAN_GRACE`` (a younger one is being saved by another
process). Only names of the cache's own form (``KEY.bin``, ``KEY.json``, their temporaries) are
ever read as the cache's or deleted. A fault of the disk or the folder (full, over quota, a
malformed record) is logged once and the request goes on without the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BackendHTTPError

__all__ = ["DEFAULT_MAX_BYTES", "MIN_PREFIX_CHARS", "ORPHAN_GRACE", "PrefixCache", "server_identity"]

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 4_000_000_000  # ~40 BFCL tool sets, or ~90 demo prefixes, of the 1.5B
MIN_PREFIX_CHARS = 2000  # a shorter prefix evaluates in about the time a file takes to read
_SUFFIX, _META = ".bin", ".json"
# the names the cache writes: KEY.bin (the server's slot file), KEY.json (its record) and the
# record's temporary KEY.PID-THREAD.tmp (KEY.tmp: an older textagent's); nothing else is the cache's
_KEY = re.compile(r"[0-9a-f]{40}")
_OWN = re.compile(r"([0-9a-f]{40})(\.bin|\.json|(?:\.\d+-\d+)?\.tmp)")
# a slot file is written before its record: one younger than this without a record (seconds, by
# its mtime) is being saved by another process, not cut short, so it is neither deleted nor counted
ORPHAN_GRACE = 600.0


def server_identity(props: dict[str, Any], model: str, extra: str = "") -> str:
    """What a saved KV cache is valid for: the model file (``model``: its digest, or its path,
    size and time), the llama.cpp build (``/props`` build_info), the slots (a file saved by a
    server with one KV stream does not load into one with two: "n_stream mismatch"), and the
    server settings that shape the cache (``extra``: e.g. the KV cache types given to the server)."""
    build = str(props.get("build_info") or props.get("build") or "?")
    slots = props.get("total_slots")
    return hashlib.sha256(json.dumps([model, build, slots, extra]).encode()).hexdigest()[:32]


def _number(value: Any, default: float, high: float = 1e15) -> float:
    """``value`` if it is a number from 0 to ``high``, else ``default``: a record may have been
    written by anything (``"used": "yesterday"``, ``1e999``, ``NaN``); finite bounds keep ``float``
    and ``int`` from overflowing."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= high:
        return float(value)
    return default


class _Busy(Exception):
    """Another process is saving this prefix's file: the request goes without the cache."""


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
        self._told: set[str] = set()  # the faults logged already (a full disk is told once)
        self._vanished = 0  # saves in a row whose file was not there after the server wrote it

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
                if self._make_ready(backend, slot, key, prefix):
                    with self._lock:
                        self._held[slot] = key
            except _Busy:
                log.debug("prefix cache: another process is saving %s; this request goes without it", key)
            except BackendHTTPError as exc:
                if exc.status in (404, 405, 501):  # no slots API here, or no --slot-save-path
                    log.info("prefix cache off for %s: the server refused %s", backend.url, exc)
                    self.enabled = False
                else:
                    log.info("prefix cache: %s", exc)
            except (OSError, ValueError, RecursionError) as exc:
                # a full disk, a quota, a folder gone read-only or unreadable: this request goes
                # without the cache, and the next one tries again
                self._log_once("disk", "prefix cache: %s; requests go without it while this lasts", exc)
            finally:
                self.timing.seconds += time.perf_counter() - started

    def _make_ready(self, backend: Any, slot: int, key: str, prefix: str) -> bool:
        """Restore ``key`` into ``slot``, else evaluate and save it; whether the slot holds it now."""
        if self._restore(backend, slot, key):
            self.timing.restored += 1
            return True
        if self._save(backend, slot, key, prefix):
            self.timing.saved += 1
            return True
        return False

    def _log_once(self, kind: str, message: str, *args: Any) -> None:
        """A fault that may come back on every request is a warning once, then a debug line."""
        level = logging.DEBUG if kind in self._told else logging.WARNING
        self._told.add(kind)
        log.log(level, message, *args)

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
        (and both are deleted: a corrupt or foreign file is never restored). Raises _Busy for a
        file without a record younger than ORPHAN_GRACE: another process is saving it."""
        data_path, meta_path = self._paths(key)
        if not meta_path.exists():
            try:
                age = time.time() - data_path.stat().st_mtime
            except FileNotFoundError:
                return None  # never saved
            if age < ORPHAN_GRACE:
                raise _Busy
        meta = self._read_record(meta_path)
        try:
            ok = (
                meta is not None
                and meta.get("identity") == self.identity
                and meta.get("key") == key
                and data_path.stat().st_size == meta.get("bytes")
                and _digest(data_path) == meta.get("sha256")
            )
        except OSError:
            ok = False
        if not ok:
            log.info("prefix cache: %s does not match its record; deleted, to be rebuilt", data_path.name)
            self._delete(key)
            return None
        return meta

    @staticmethod
    def _read_record(path: Path) -> dict[str, Any] | None:
        """The record in ``path`` if it is a JSON object, else None (missing, unreadable, malformed)."""
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return meta if isinstance(meta, dict) else None

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
        self.timing.tokens_restored += int(_number(answer.get("n_restored"), 0.0))
        meta["used"] = time.time()
        try:
            self._write_meta(meta_path, meta)
        except OSError as exc:
            # the slot holds the prefix all the same: only the time of its use is not recorded
            self._log_once("disk", "prefix cache: could not record the use of %s: %s", data_path.name, exc)
        return True

    def _save(self, backend: Any, slot: int, key: str, prefix: str) -> bool:
        """Evaluate ``prefix`` in ``slot`` and have the server save it, then write its record;
        whether the slot holds it (False: the file was not there after the save)."""
        backend.evaluate(prefix, id_slot=slot)
        data_path, meta_path = self._paths(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        answer = backend.slot_action(slot, "save", data_path.name)
        try:
            size = data_path.stat().st_size
        except FileNotFoundError:
            self._file_vanished(backend, data_path)
            return False
        self._vanished = 0
        try:
            meta = {
                "key": key,
                "identity": self.identity,
                "bytes": size,
                "sha256": _digest(data_path),
                "tokens": int(_number(answer.get("n_saved"), 0.0)),
                "chars": len(prefix),
                "created": time.time(),
                "used": time.time(),
            }
            self._write_meta(meta_path, meta)
        except OSError:
            self._delete(key)  # a slot file without its record would hold the disk for the grace period
            raise
        self._evict(keep=key)
        return True

    def _file_vanished(self, backend: Any, data_path: Path) -> None:
        """The server saved, and ``data_path`` is not there: once, another process may have deleted
        it (an older textagent took it for corrupt); twice in a row, the server saves elsewhere."""
        self._vanished += 1
        if self._vanished >= 2:
            log.info("prefix cache off for %s: its slot files are not in %s", backend.url, self.directory)
            self.enabled = False
        else:
            log.info("prefix cache: %s was gone right after its save; this request goes without it", data_path.name)

    @staticmethod
    def _write_meta(path: Path, meta: dict[str, Any]) -> None:
        # a temporary of this process and thread: two writers of one record never share one
        # (one would move the other's away, or move its half-written one into place)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            tmp.write_text(json.dumps(meta), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            raise

    def _delete(self, key: str) -> None:
        if not _KEY.fullmatch(key):  # only the cache's own names, whatever a record says
            return
        for path in self._paths(key):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.info("prefix cache: could not delete %s: %s", path, exc)

    def _scan(self) -> tuple[dict[str, dict[str, os.stat_result]], list[tuple[Path, float]]]:
        """The cache's own files in the directory: slot files and records by key and suffix, and
        the records' temporaries with their mtimes. Other names (and anything not a plain file)
        are not the cache's and never read or deleted."""
        files: dict[str, dict[str, os.stat_result]] = {}
        temporaries: list[tuple[Path, float]] = []
        try:
            with os.scandir(self.directory) as found:
                for item in found:
                    match = _OWN.fullmatch(item.name)
                    try:
                        info = item.stat(follow_symlinks=False) if match else None
                    except OSError:
                        continue  # deleted meanwhile
                    if match is None or info is None or not stat.S_ISREG(info.st_mode):
                        continue
                    if match[2].endswith(".tmp"):
                        temporaries.append((Path(item.path), info.st_mtime))
                    else:
                        files.setdefault(match[1], {})[match[2]] = info
        except FileNotFoundError:
            pass  # nothing saved yet
        return files, temporaries

    def _entry(self, key: str, files: dict[str, os.stat_result], now: float) -> dict[str, Any] | None:
        """What ``entries`` shows of ``key``, its numbers sound whatever its record holds; None for
        a slot file without a record younger than ORPHAN_GRACE (being saved)."""
        data, record = files.get(_SUFFIX), files.get(_META)
        size = data.st_size if data is not None else 0
        if record is None:
            if data is None or now - data.st_mtime < ORPHAN_GRACE:
                return None
            return {"key": key, "identity": "", "bytes": size, "tokens": 0, "used": data.st_mtime, "record": False}
        meta = self._read_record(self._paths(key)[1])
        known = meta is not None and meta.get("key") == key
        meta = meta or {}
        identity = meta.get("identity")
        return {
            "key": key,  # the file's name, never the record's word: that name is what may be deleted
            "identity": identity if isinstance(identity, str) else "",
            "bytes": size,  # the disk the file takes, whatever the record says
            "tokens": int(_number(meta.get("tokens"), 0.0)),
            "chars": int(_number(meta.get("chars"), 0.0)),
            # a time from the future would keep a file from eviction for ever
            "created": _number(meta.get("created"), record.st_mtime, now + 86400),
            "used": _number(meta.get("used"), record.st_mtime, now + 86400),
            "record": known,
        }

    def _entries(self, files: dict[str, dict[str, os.stat_result]]) -> list[dict[str, Any]]:
        now = time.time()
        found = [entry for key in files if (entry := self._entry(key, files[key], now)) is not None]
        return sorted(found, key=lambda m: m["used"])

    def entries(self) -> list[dict[str, Any]]:
        """The saved prefixes in the directory (any identity), oldest use first: ``key``, ``bytes``
        (of the slot file on disk), ``tokens``, ``used``... as numbers whatever the record holds,
        ``record``: False for a slot file without a sound record (shown once older than
        ORPHAN_GRACE)."""
        return self._entries(self._scan()[0])

    def _evict(self, keep: str) -> None:
        """Delete the files used longest ago until the directory holds at most ``max_bytes``
        (the file just saved stays, whatever its size, and so does one another slot is reading),
        and the records' temporaries a crash left behind."""
        with self._lock:
            files, temporaries = self._scan()
            entries = self._entries(files)
            total = sum(m["bytes"] for m in entries)
            for meta in entries:
                if total <= self.max_bytes:
                    break
                busy = self._key_locks.get(meta["key"])
                if meta["key"] == keep or (busy is not None and busy.locked()):
                    continue
                self._delete(meta["key"])
                total -= meta["bytes"]
            now = time.time()
            for path, mtime in temporaries:
                if now - mtime >= ORPHAN_GRACE:
                    path.unlink(missing_ok=True)

    def clear(self) -> int:
        """Delete every prefix file in the directory (names of the cache's own form only: slot
        files, records and their temporaries); the number of prefixes deleted."""
        files, temporaries = self._scan()
        for key in files:
            self._delete(key)
        for path, _ in temporaries:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.info("prefix cache: could not delete %s: %s", path, exc)
        self.forget()
        return len(files)
