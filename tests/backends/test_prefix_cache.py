"""backends/prefix_cache.py: the fixed prefix saved once per model + prefix and restored after,
against a scripted llama-server whose slot saves write files as the real one does; the
wrong-cache cases (other model, other tools, corrupt file, no slots API) never restore."""

from __future__ import annotations

import json

import pytest
from httpfake import FakeServer

from textagent import Agent
from textagent.backends import LlamaCppBackend
from textagent.backends.prefix_cache import PrefixCache, server_identity
from textagent.toolkits import demo

PREFIX = "<|im_start|>system\nYou have tools: calculate, get_weather.\n" * 8 + "<|im_start|>user\n"
QUESTION = "What's 17 times 24?<|im_end|>\n<|im_start|>assistant\n"
KV = b"\x01kv-state" * 500  # what the fake server writes for a saved slot
ANSWER = {"content": "ANSWER: 408", "stop_type": "eos", "tokens_evaluated": 9, "tokens_cached": 100}


def _ask(backend, prefix=PREFIX, question=QUESTION):
    return backend.complete(prefix + question, stop=[], max_tokens=8, cache_prefix=len(prefix))


def _script_save(srv, cache, prefix=PREFIX, kv=KV):
    """The server's part of a first use: evaluate the prefix, save the slot (the file appears)."""
    path = cache.directory / (cache.key(prefix) + ".bin")
    srv.json("/completion", {"content": "", "stop_type": "limit"})
    srv.add("/slots/0", chunks=[lambda: path.write_bytes(kv), json.dumps({"n_saved": 120}).encode()])


def _kinds(srv):
    """The requests the server got, as (path, what): evaluate / ask / slots."""
    out = []
    for r in srv.requests:
        if r.path == "/completion":
            out.append("evaluate" if r.json.get("n_predict") == 0 else "ask")
        else:
            out.append(r.path)
    return out


@pytest.fixture
def srv():
    with FakeServer() as server:
        yield server


def _backend(srv, cache):
    backend = LlamaCppBackend(srv.url, retries=0)
    backend.prefix_cache = cache
    return backend


def test_the_prefix_is_evaluated_once_saved_then_restored_by_another_process(srv, tmp_path):
    first = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, first)
    srv.json("/completion", ANSWER)
    assert _ask(_backend(srv, first)).text == "ANSWER: 408"
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask"]
    assert srv.requests[0].json["prompt"] == PREFIX and srv.requests[1].json == {"filename": first.key(PREFIX) + ".bin"}
    # the same process, the same slot: it holds the prefix already
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, first))
    assert _kinds(srv)[3:] == ["ask"]
    # another process (a new cache object): restored, not evaluated
    srv.requests.clear()
    second = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    srv.json("/slots/0", {"n_restored": 120})
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, second))
    assert _kinds(srv) == ["/slots/0", "ask"]
    assert srv.requests[0].json == {"filename": second.key(PREFIX) + ".bin"}
    assert second.timing.restored == 1 and second.timing.tokens_restored == 120 and second.timing.saved == 0


def test_another_model_or_build_never_restores_the_file(srv, tmp_path):
    a = PrefixCache(tmp_path, identity=server_identity({"build_info": "b1"}, "qwen-1.5b|986|1"), min_chars=10)
    _script_save(srv, a)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, a))
    for other in (
        server_identity({"build_info": "b1"}, "qwen-0.5b|400|1"),  # another model file
        server_identity({"build_info": "b2"}, "qwen-1.5b|986|1"),  # another llama.cpp build
        server_identity({"build_info": "b1"}, "qwen-1.5b|986|1", "--cache-type-k q8_0"),  # other KV settings
        server_identity({"build_info": "b1", "total_slots": 2}, "qwen-1.5b|986|1"),  # two KV streams, not one
    ):
        srv.requests.clear()
        cache = PrefixCache(tmp_path, identity=other, min_chars=10)
        assert cache.key(PREFIX) != a.key(PREFIX)
        _script_save(srv, cache)
        srv.json("/completion", ANSWER)
        _ask(_backend(srv, cache))
        assert _kinds(srv) == ["evaluate", "/slots/0", "ask"]  # evaluated afresh, never restored
    assert len(list(tmp_path.glob("*.bin"))) == 5


def test_another_tool_list_is_another_prefix(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, cache))
    other = PREFIX.replace("get_weather", "set_light")
    srv.requests.clear()
    fresh = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, fresh, prefix=other)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, fresh), prefix=other)
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask"]
    assert srv.requests[0].json["prompt"] == other


@pytest.mark.parametrize("damage", ["flip", "truncate", "sidecar", "foreign"])
def test_a_corrupt_or_foreign_file_is_deleted_and_rebuilt_never_restored(srv, tmp_path, damage):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, cache))
    data = tmp_path / (cache.key(PREFIX) + ".bin")
    meta = tmp_path / (cache.key(PREFIX) + ".json")
    if damage == "flip":
        data.write_bytes(b"\x02" + KV[1:])  # same size, other bytes
    elif damage == "truncate":
        data.write_bytes(KV[:100])
    elif damage == "sidecar":
        meta.write_text("{not json")
    else:  # a file of another server put under this key
        record = json.loads(meta.read_text())
        meta.write_text(json.dumps({**record, "identity": "someone-else"}))
    srv.requests.clear()
    fresh = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, fresh)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, fresh))
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask"]
    assert data.read_bytes() == KV and json.loads(meta.read_text())["identity"] == "model-a"


def test_a_file_the_server_cannot_read_is_rebuilt(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, cache))
    srv.requests.clear()
    fresh = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    srv.json("/slots/0", {"error": {"code": 400, "message": "failed to restore slot"}}, status=400)
    _script_save(srv, fresh)
    srv.json("/completion", ANSWER)
    assert _ask(_backend(srv, fresh)).text == "ANSWER: 408"
    assert _kinds(srv) == ["/slots/0", "evaluate", "/slots/0", "ask"]


def test_a_server_without_the_slots_api_turns_the_cache_off_and_answers_as_before(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    srv.json("/completion", {"content": "", "stop_type": "limit"})
    refusal = {
        "error": {"code": 501, "message": "This server does not support slots action.", "type": "not_supported_error"}
    }
    srv.json("/slots/0", refusal, status=501)
    srv.json("/completion", ANSWER, repeat=True)
    backend = _backend(srv, cache)
    assert _ask(backend).text == "ANSWER: 408"
    assert not cache.enabled
    _ask(backend)
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask", "ask"]  # asked once, then left alone
    assert list(tmp_path.iterdir()) == []


def test_a_short_prefix_or_no_prefix_is_left_to_the_server(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a")  # the default minimum: 2000 characters
    srv.json("/completion", ANSWER, repeat=True)
    backend = _backend(srv, cache)
    _ask(backend)
    backend.complete(PREFIX + QUESTION, stop=[], max_tokens=8)
    assert _kinds(srv) == ["ask", "ask"]


def test_disk_use_is_bounded_the_oldest_used_go_first(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10, max_bytes=2 * len(KV) + 10)
    prefixes = [PREFIX.replace("calculate", f"tool{i}") for i in range(3)]
    for i, prefix in enumerate(prefixes):
        _script_save(srv, cache, prefix=prefix)
        srv.json("/completion", ANSWER)
        _ask(_backend(srv, cache), prefix=prefix)
        record = tmp_path / (cache.key(prefix) + ".json")
        meta = json.loads(record.read_text())
        record.write_text(json.dumps({**meta, "used": 1000.0 + i}))  # their order of use, made explicit
    kept = {m["key"] for m in cache.entries()}
    assert kept == {cache.key(prefixes[1]), cache.key(prefixes[2])}
    assert len(list(tmp_path.glob("*.bin"))) == 2
    assert cache.clear() == 2 and list(tmp_path.iterdir()) == []


def test_the_text_mode_marks_the_prompt_before_the_question_as_its_fixed_part():
    from textagent.backends.scripted import ScriptedBackend

    backend = ScriptedBackend(["ANSWER: 408", "ANSWER: 508"])
    agent = Agent(backend, demo.demo_tools())
    agent.run("What's 17 times 24?")
    fixed, prompt = backend.calls[0]["cache_prefix"], backend.prompts[0]
    assert "17 times 24" not in prompt[:fixed] and prompt[fixed:].startswith("What's 17 times 24?")
    assert fixed > 1000  # the system prompt, the tools and the worked examples
    agent.run("Now add 100 to it.")  # a follow-up: the same fixed part, so the same file is restored
    assert backend.calls[1]["cache_prefix"] == fixed and backend.prompts[1][:fixed] == prompt[:fixed]


def test_with_several_slots_only_a_request_pinned_to_one_uses_the_cache(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10, slots=2)
    srv.json("/completion", ANSWER)
    backend = _backend(srv, cache)
    _ask(backend)  # the server picks the slot: nothing to restore into
    assert _kinds(srv) == ["ask"]
    srv.requests.clear()
    path = tmp_path / (cache.key(PREFIX) + ".bin")
    srv.json("/completion", {"content": "", "stop_type": "limit"})
    srv.add("/slots/1", chunks=[lambda: path.write_bytes(KV), b'{"n_saved": 120}'])
    srv.json("/completion", ANSWER)
    backend.complete(PREFIX + QUESTION, stop=[], max_tokens=8, cache_prefix=len(PREFIX), id_slot=1)
    assert _kinds(srv) == ["evaluate", "/slots/1", "ask"] and srv.requests[0].json["id_slot"] == 1


def test_a_slot_that_holds_its_prefix_never_waits_for_another_slots_evaluation(srv, tmp_path):
    import threading
    import time

    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10, slots=2)
    backend = _backend(srv, cache)
    path = tmp_path / (cache.key(PREFIX) + ".bin")
    srv.json("/completion", {"content": "", "stop_type": "limit"})
    srv.add("/slots/1", chunks=[lambda: path.write_bytes(KV), b'{"n_saved": 120}'])
    cache.prepare(backend, 1, PREFIX)  # slot 1 holds PREFIX now
    other = PREFIX.replace("calculate", "lookup")
    srv.json("/completion", {"content": "", "stop_type": "limit"}, delay=1.5)  # slot 0: a slow evaluation
    srv.json("/slots/0", {"n_saved": 120})
    slow = threading.Thread(target=cache.prepare, args=(backend, 0, other))
    slow.start()
    time.sleep(0.3)
    started = time.monotonic()
    cache.prepare(backend, 1, PREFIX)
    assert time.monotonic() - started < 0.5  # held already: no wait for slot 0
    slow.join()


# -- hardening: the cache never fails a request for its own sake, and deletes only its own files --
OLD = 2 * 3600  # seconds ago: past ORPHAN_GRACE, a record-less slot file no one is saving any more


def _key_name(n):
    """A name of the cache's own form (40 hex digits) that no prefix of these tests has."""
    return f"{n:040x}"


def _age(path, seconds):
    import os
    import time

    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_malformed_record_fails_neither_a_save_nor_the_listing(srv, tmp_path, monkeypatch, capsys):
    from textagent.cli import main

    odd = {
        _key_name(1): {"used": "yesterday", "bytes": "big", "tokens": [1]},
        _key_name(2): {"used": 1e300, "bytes": 10**400, "tokens": "many", "chars": None},
        _key_name(3): {"used": float("nan"), "created": -5},
    }
    for name, fields in odd.items():
        (tmp_path / (name + ".bin")).write_bytes(b"x" * 10)
        (tmp_path / (name + ".json")).write_text(json.dumps({"key": name, "identity": "model-a", **fields}))
    (tmp_path / (_key_name(4) + ".json")).write_text("[" * 100_000)  # nested past the parser's recursion
    (tmp_path / (_key_name(4) + ".bin")).write_bytes(b"x" * 10)
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    assert _ask(_backend(srv, cache)).text == "ANSWER: 408"  # was ValueError out of the eviction
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask"] and cache.timing.saved == 1
    entries = {m["key"]: m for m in cache.entries()}
    assert set(entries) == {*odd, _key_name(4), cache.key(PREFIX)}
    for m in entries.values():
        assert all(isinstance(m[k], (int, float)) and m[k] >= 0 for k in ("bytes", "tokens", "used"))
        assert m["used"] < 2e9  # a time from the future falls back to the record's own time
    assert entries[_key_name(1)]["bytes"] == 10 and entries[_key_name(4)]["record"] is False
    monkeypatch.setenv("TEXTAGENT_PREFIX_DIR", str(tmp_path))
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "5 saved prefixes" in out and _key_name(1)[:12] in out


def test_eviction_and_clear_delete_only_names_of_the_caches_own_form(srv, tmp_path):
    folder = tmp_path / "prefixes"
    folder.mkdir()
    victims = [tmp_path / "victim.bin", tmp_path / "victim.json", tmp_path / "abs.bin", tmp_path / "abs.json"]
    for victim in victims:
        victim.write_text("not the cache's")
    bait = {"identity": "model-a", "bytes": 10**12, "used": 0.0}  # the first to go, were they the cache's
    (folder / (_key_name(1) + ".json")).write_text(json.dumps({**bait, "key": "../victim"}))
    (folder / "notes.json").write_text(json.dumps({**bait, "key": str(tmp_path / "abs")}))
    strangers = [
        folder / "notes.bin",
        folder / "model.bin",
        folder / "notes.json",
        folder / (_key_name(5) + ".bin.bak"),
    ]
    for stranger in strangers:
        if not stranger.exists():
            stranger.write_bytes(b"mine")
        _age(stranger, OLD)
    cache = PrefixCache(folder, identity="model-a", min_chars=10, max_bytes=10)
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    assert _ask(_backend(srv, cache)).text == "ANSWER: 408"
    assert all(victim.exists() for victim in victims)  # a record's key never names what is deleted
    assert not (folder / (_key_name(1) + ".json")).exists()  # a record of the cache's own name may go
    assert (folder / (cache.key(PREFIX) + ".bin")).exists()
    (folder / (cache.key(PREFIX) + ".77-88.tmp")).write_text("{")  # a temporary a crash left
    assert cache.clear() == 1
    assert all(victim.exists() for victim in victims)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in strangers)


class _OtherProcess:
    """A second process's backend, as seen by its PrefixCache: it records what it is asked."""

    url = "http://other"

    def __init__(self):
        self.calls = []

    def evaluate(self, prefix, id_slot=None):
        self.calls.append("evaluate")

    def slot_action(self, slot, action, filename):
        self.calls.append(action)
        return {}


def test_a_file_being_saved_is_left_to_its_saver(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    other, other_backend = PrefixCache(tmp_path, identity="model-a", min_chars=10), _OtherProcess()
    path = tmp_path / (cache.key(PREFIX) + ".bin")

    def written_then_found_by_another_process():
        path.write_bytes(KV)
        other.prepare(other_backend, 0, PREFIX)  # finds the file before its record is written
        assert other.entries() == []  # neither counted nor evicted while it is fresh

    srv.json("/completion", {"content": "", "stop_type": "limit"})
    srv.add("/slots/0", chunks=[written_then_found_by_another_process, b'{"n_saved": 120}'])
    srv.json("/completion", ANSWER)
    assert _ask(_backend(srv, cache)).text == "ANSWER: 408"
    assert cache.enabled and other.enabled and other_backend.calls == []  # it went without the cache
    assert cache.timing.saved == 1 and path.read_bytes() == KV
    assert json.loads((tmp_path / (cache.key(PREFIX) + ".json")).read_text())["bytes"] == len(KV)
    # a record-less file long past the grace period is a save cut short: deleted and rebuilt
    (tmp_path / (cache.key(PREFIX) + ".json")).unlink()
    _age(path, OLD)
    srv.requests.clear()
    fresh = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, fresh)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, fresh))
    assert _kinds(srv) == ["evaluate", "/slots/0", "ask"] and fresh.timing.saved == 1


def test_a_saver_whose_file_vanished_once_keeps_its_cache(srv, tmp_path):
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    backend = _backend(srv, cache)
    path = tmp_path / (cache.key(PREFIX) + ".bin")

    def saved_then_deleted_by_another_process():
        path.write_bytes(KV)
        path.unlink()

    srv.json("/completion", {"content": "", "stop_type": "limit"})
    srv.add("/slots/0", chunks=[saved_then_deleted_by_another_process, b'{"n_saved": 120}'])
    srv.json("/completion", ANSWER)
    assert _ask(backend).text == "ANSWER: 408"
    assert cache.enabled  # was off for the rest of the process
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    _ask(backend)
    assert cache.timing.saved == 1 and path.read_bytes() == KV
    # a server that saves elsewhere (no file, twice in a row) still turns it off
    other = PREFIX.replace("calculate", "lookup")
    for _ in range(2):
        srv.json("/completion", {"content": "", "stop_type": "limit"})
        srv.json("/slots/0", {"n_saved": 120})
        srv.json("/completion", ANSWER)
        _ask(backend, prefix=other)
    assert not cache.enabled


def test_concurrent_record_writes_never_share_a_temporary_file(srv, tmp_path, monkeypatch, caplog):
    import os
    import threading

    from textagent.backends import prefix_cache

    first = PrefixCache(tmp_path, identity="model-a", min_chars=10)
    _script_save(srv, first)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, first))
    a, b = (PrefixCache(tmp_path, identity="model-a", min_chars=10) for _ in range(2))
    srv.json("/slots/0", {"n_restored": 120}, repeat=True)
    srv.json("/completion", ANSWER)
    real_replace, interleaved = os.replace, []

    def replace(src, dst):
        if not interleaved:  # a's record is written, not yet moved into place: b restores meanwhile
            interleaved.append(src)
            other = threading.Thread(target=b.prepare, args=(_backend(srv, b), 0, PREFIX))
            other.start()
            other.join()
        real_replace(src, dst)

    monkeypatch.setattr(prefix_cache.os, "replace", replace)
    with caplog.at_level("DEBUG", logger="textagent.backends.prefix_cache"):
        assert _ask(_backend(srv, a)).text == "ANSWER: 408"
    assert a.timing.restored == b.timing.restored == 1
    assert [r.getMessage() for r in caplog.records] == []  # was FileNotFoundError out of a's request
    record = json.loads((tmp_path / (first.key(PREFIX) + ".json")).read_text())
    assert record["key"] == first.key(PREFIX) and list(tmp_path.glob("*.tmp")) == []


@pytest.mark.parametrize("where", ["save", "restore", "folder"])
def test_a_full_disk_runs_the_request_without_the_cache_and_says_so_once(srv, tmp_path, monkeypatch, caplog, where):
    import errno
    from pathlib import Path

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    folder = tmp_path
    if where == "restore":
        first = PrefixCache(tmp_path, identity="model-a", min_chars=10)
        _script_save(srv, first)
        srv.json("/completion", ANSWER)
        _ask(_backend(srv, first))
        srv.requests.clear()
        srv.json("/slots/0", {"n_restored": 120}, repeat=True)
    elif where == "folder":  # a folder that cannot be made (here: a file stands in its way)
        (tmp_path / "file").write_text("")
        folder = tmp_path / "file" / "prefixes"
    cache = PrefixCache(folder, identity="model-a", min_chars=10)
    backend = _backend(srv, cache)
    monkeypatch.setattr(Path, "write_text", full)
    with caplog.at_level("DEBUG", logger="textagent.backends.prefix_cache"):
        for _ in range(2):
            if where == "save":
                _script_save(srv, cache)
            srv.json("/completion", ANSWER)
            assert _ask(backend).text == "ANSWER: 408"  # was OSError out of the request
            backend.prefix_cache.forget()  # the next request prepares its slot again
    assert cache.enabled
    assert [r.levelname for r in caplog.records if r.levelname == "WARNING"] == ["WARNING"]  # told once
    if where == "save":  # its file without a record is not left to hold the full disk
        assert list(tmp_path.iterdir()) == []
    if where == "restore":
        assert cache.timing.restored == 2 and _kinds(srv) == ["/slots/0", "ask", "/slots/0", "ask"]
    if where == "folder":  # not even looked for
        assert _kinds(srv) == ["ask", "ask"]


def test_slot_files_without_a_record_are_counted_listed_and_evicted(srv, tmp_path, monkeypatch, capsys):
    from textagent.cli import main

    stale, fresh, stranger = (
        (tmp_path / (_key_name(7) + ".bin")),
        (tmp_path / (_key_name(8) + ".bin")),
        (tmp_path / "notes.bin"),
    )
    for path in (stale, fresh, stranger):
        path.write_bytes(KV * 3)
    _age(stale, OLD)
    _age(stranger, OLD)
    cache = PrefixCache(tmp_path, identity="model-a", min_chars=10, max_bytes=2 * len(KV) + 10)
    listed = cache.entries()
    assert [(m["key"], m["bytes"], m["record"]) for m in listed] == [(_key_name(7), 3 * len(KV), False)]
    monkeypatch.setenv("TEXTAGENT_PREFIX_DIR", str(tmp_path))
    main(["cache"])
    assert "1 saved prefixes" in capsys.readouterr().out  # was 0: no record, not shown
    _script_save(srv, cache)
    srv.json("/completion", ANSWER)
    _ask(_backend(srv, cache))
    assert not stale.exists()  # the oldest used, by its mtime, went to bound the folder
    assert fresh.exists() and stranger.exists()  # being saved by another process / not the cache's
    assert [m["key"] for m in cache.entries()] == [cache.key(PREFIX)]
