"""The run.json of a bench run: merged on --resume, read and refused with the problem named."""

from __future__ import annotations

import json

import pytest

from textagent.bench.run_file import RUN_FILE, merged, read_meta, settings_differ, write_meta
from textagent.bench.tasks import TaskFileError


def _meta(command: str, modes: list[str], tasks: list[str], **more):
    return {
        "command": command,
        "started": "2026-12-01T10:00:00+00:00",
        "modes": modes,
        "tasks": tasks,
        "n_tasks": len(tasks),
        "repeat": 1,
        "planned": len(modes) * len(tasks),
        "unavailable": {},
        **more,
    }


def test_a_resumed_run_keeps_its_first_start_and_adds_the_new_commands_modes_and_tasks():
    first = _meta("textagent bench --modes text", ["text"], ["a", "b"])
    second = {**_meta("textagent bench --modes native", ["native"], ["b", "c"]), "started": "later"}
    second["unavailable"] = {"native": "no tools"}
    meta = merged(first, second)
    assert meta["started"] == first["started"] and len(meta["resumed"]) == 1
    assert meta["commands"] == ["textagent bench --modes text", "textagent bench --modes native"]
    assert meta["modes"] == ["text", "native"] and meta["tasks"] == ["a", "b", "c"] and meta["n_tasks"] == 3
    assert meta["planned"] == 4  # (a, text), (b, text), (b, native), (c, native)
    assert meta["unavailable"] == {"native": "no tools"}
    assert merged({}, second) is second


def test_settings_differ_names_each_setting_and_reads_a_missing_one_as_its_default():
    assert settings_differ({"reply_tokens": 256}, {"reply_tokens": 512}) == "reply_tokens: 256 -> 512"
    assert settings_differ({}, {"temperature": 0.0}) == ""  # the default then and now


def test_read_meta_gives_nothing_for_a_new_run_and_refuses_a_run_json_it_cannot_use(tmp_path):
    assert read_meta(tmp_path) == {}
    write_meta(tmp_path, _meta("c", ["text"], ["a"]))
    assert read_meta(tmp_path)["modes"] == ["text"]
    (tmp_path / RUN_FILE).write_text("{not json")
    with pytest.raises(TaskFileError, match="is not JSON"):
        read_meta(tmp_path)
    (tmp_path / RUN_FILE).write_text(json.dumps({"modes": 5}))
    with pytest.raises(TaskFileError, match="modes"):
        read_meta(tmp_path)
