"""textagent.jsonl: the one JSON Lines reader."""

from __future__ import annotations

import gzip
import json

import pytest

from textagent.jsonl import JsonlAppender, JsonlError, is_gzip, parse_jsonl, read_jsonl


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


def _gz_lines(path, bad="keep"):
    return [line.value if line.error is None else "bad" for line in read_jsonl(path, bad=bad)]


def test_a_gzip_file_is_read_whatever_its_name_in_one_member_or_many(tmp_path):
    one = tmp_path / "one.jsonl"  # as `gzip` writes a whole file, under a name that does not say so
    one.write_bytes(gzip.compress(b'{"a": 1}\n\n[2]\n'))
    assert _gz_lines(one) == [{"a": 1}, [2]] and is_gzip(one) and not is_gzip(tmp_path / "missing")
    many = tmp_path / "many.jsonl.gz"
    with JsonlAppender(many) as sink:
        sink.append('{"a": 1}')
        sink.append('"é"\n')
    assert gzip.decompress(many.read_bytes()) == '{"a": 1}\n"é"\n'.encode()
    assert [line.where for line in read_jsonl(many)] == [f"{many}:1", f"{many}:2"]
    padded = tmp_path / "padded.gz"  # zero bytes after the members, which gunzip passes over
    padded.write_bytes(many.read_bytes() + b"\0" * 10)
    assert _gz_lines(padded, bad="raise") == [{"a": 1}, "é"]


def test_a_gzip_file_cut_off_reads_as_a_plain_file_cut_off_and_is_mended_by_the_next_append(tmp_path):
    path = tmp_path / "e.jsonl.gz"
    with JsonlAppender(path) as sink:
        for i in range(3):
            sink.append(json.dumps({"i": i, "pad": "x" * 200}))
    data = path.read_bytes()
    last = len(data) - len(gzip.compress(b'{"i": 2, "pad": "' + b"x" * 200 + b'"}\n', mtime=0))
    for cut in range(last, len(data)):
        path.write_bytes(data[:cut])
        read = _gz_lines(path)
        assert read[:2] == [{"i": 0, "pad": "x" * 200}, {"i": 1, "pad": "x" * 200}]
        assert read[2:] in ([], ["bad"], [{"i": 2, "pad": "x" * 200}])  # nothing yet, a cut line, or all of it
        with JsonlAppender(path) as sink:
            sink.append('{"next": true}')
        assert _gz_lines(path) == [*read, {"next": True}]
        gzip.decompress(path.read_bytes())  # every member whole again


def test_bytes_after_the_last_member_that_are_not_gzip(tmp_path):
    path = tmp_path / "e.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n') + b"not gzip")
    with pytest.raises(JsonlError, match=r"e\.jsonl\.gz: byte \d+: not gzip data"):
        list(read_jsonl(path))
    assert _gz_lines(path, bad="skip") == [{"a": 1}] and _gz_lines(path) == [{"a": 1}, "bad"]
    with JsonlAppender(path) as sink:  # dropped: nothing could read them
        sink.append("2")
    assert _gz_lines(path, bad="raise") == [{"a": 1}, 2]


def test_an_appender_keeps_the_files_form_and_ends_a_cut_plain_line(tmp_path):
    plain = tmp_path / "old.jsonl.gz"  # plain text under a .gz name: still appended to as plain
    plain.write_text('{"a": 1}\n{"cut', encoding="utf-8")
    with JsonlAppender(plain) as sink:
        sink.append("2")
    assert plain.read_text(encoding="utf-8") == '{"a": 1}\n{"cut\n2\n'
    new = tmp_path / "new.jsonl"
    sink = JsonlAppender(new)
    sink.append("1")
    sink.close()
    assert new.read_text() == "1\n" and sink.closed
    with pytest.raises(ValueError, match="after close"):
        sink.append("2")
