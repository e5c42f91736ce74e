"""textagent.jsonl: the one JSON Lines reader."""

from __future__ import annotations

import pytest

from textagent.jsonl import JsonlError, parse_jsonl, read_jsonl


def test_values_with_their_line_numbers_and_blank_lines_ignored(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2]\r\n"three"', encoding="utf-8")
    lines = list(read_jsonl(path))
    assert [(line.number, line.value) for line in lines] == [(1, {"a": 1}), (4, [2]), (5, "three")]
    assert lines[1].where == f"{path}:4" and lines[1].text == "[2]"


def test_only_a_newline_ends_a_line():
    # U+2028 is a line separator to str.splitlines() but may stand raw inside a JSON string
    assert [line.value for line in parse_jsonl('{"s": "a\u2028b"}\n{"s": "\x85"}')] == [
        {"s": "a\u2028b"},
        {"s": "\x85"},
    ]


def test_a_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{not json\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=r"t\.jsonl:2: not valid JSON \(Expecting property name"):
        list(read_jsonl(path))
    with pytest.raises(JsonlError, match=r"^x:1: JSON nested too deeply"):
        list(parse_jsonl("[" * 100_000, "x"))


def test_bad_lines_can_be_skipped_or_kept():
    text = '{"a": 1}\n{"cut'
    assert [line.value for line in parse_jsonl(text, bad="skip")] == [{"a": 1}]
    kept = list(parse_jsonl(text, bad="keep"))
    assert kept[1].value is None and kept[1].text == '{"cut' and kept[1].error.startswith("not valid JSON")
    assert kept[0].error is None


def test_an_unreadable_file_says_what_it_was(tmp_path):
    with pytest.raises(JsonlError, match=r"^cannot read task file .*missing\.jsonl: No such file"):
        list(read_jsonl(tmp_path / "missing.jsonl", what="task file"))
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'"caf\xe9"\n')
    with pytest.raises(JsonlError, match="not UTF-8"):
        list(read_jsonl(bad))
    assert [line.value for line in read_jsonl(bad, encoding_errors="replace")] == ["caf\ufffd"]


def test_a_line_cut_inside_a_multibyte_character_is_a_bad_line_not_a_broken_file(tmp_path):
    from textagent.jsonl import JsonlError, read_jsonl

    path = tmp_path / "cut.jsonl"
    whole = '{"task": "a", "answer": "caf\u00e9"}\n'.encode()
    path.write_bytes(whole + '{"task": "b", "answer": "caf\u00e9'.encode()[:-1])  # cut between é's bytes
    assert [line.value["task"] for line in read_jsonl(path, bad="skip")] == ["a"]
    kept = list(read_jsonl(path, bad="keep"))
    assert kept[1].value is None and "not UTF-8" in kept[1].error and kept[1].where.endswith(":2")
    with pytest.raises(JsonlError, match=r"cut.jsonl:2: not UTF-8"):
        list(read_jsonl(path))
