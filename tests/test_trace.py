import json

import pytest

from textagent.trace import TraceWriter, load_trace, load_traces


def test_load_trace_takes_the_newest_run_and_skips_a_cut_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.start(task="one", tools=[])
        w.write({"type": "result", "answer": "1", "stop_reason": "answer"})
    with TraceWriter(path) as w:
        w.start(task="two", tools=[])
        w.write({"type": "step", "step": 1})
    with open(path, "a") as f:
        f.write('{"type": "step", "st')  # a crash mid-write
    runs = load_traces(path)
    assert [r.start["task"] for r in runs] == ["one", "two"]
    assert runs[0].complete and not runs[1].complete
    assert load_trace(path).steps == [{"type": "step", "step": 1}]


def test_writer_accepts_open_files_and_none(tmp_path):
    TraceWriter(None).write({"x": 1})  # no-op
    path = tmp_path / "f.jsonl"
    with open(path, "w") as f:
        w = TraceWriter(f)
        w.write({"type": "start", "task": "é"})
        w.close()
        assert not f.closed  # not ours to close
    assert json.loads(path.read_text())["task"] == "é"


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(ValueError, match="no trace records"):
        load_trace(path)
