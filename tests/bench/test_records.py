"""bench/records.py: an episode as a typed record, read back as it was written."""

from __future__ import annotations

from dataclasses import replace


def test_an_episode_reads_back_from_its_record_and_writes_the_same_record():
    from textagent.bench.records import Episode, record_problem

    episode = Episode("t1", "single", "dev", "text", 0, success=False, stop_reason="format_errors", trace=[])
    record = episode.to_record()
    assert record_problem(record) is None and record["failure"] is not None  # classified: no scorer named it
    assert {"format_errors", "tool_errors", "loop"} <= set(record)  # the counts the metrics derive
    again = Episode.from_record(record)
    assert again.to_record() == record and replace(again, failure=None) == episode  # the class is kept
    scored = Episode("t2", "bfcl", "test", "text", 0, success=True, failure="wrong_value", bfcl={"first": {}})
    assert scored.to_record()["failure"] is None and scored.to_record()["bfcl"] == {"first": {}}
    assert "multi_turn" not in scored.to_record()
