"""bench/bfcl/data.py: the wheel is fetched once, verified, cached, and read as a zip."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from textagent.bench.bfcl import data


def _wheel(tmp_path: Path, rows: dict[str, list[dict]]) -> Path:
    """A small stand-in for the bfcl-eval wheel with the same member layout."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for member, lines in rows.items():
            zf.writestr(member, "\n".join(json.dumps(r) for r in lines) + "\n")
    path = tmp_path / "fake.whl"
    path.write_bytes(buffer.getvalue())
    return path


ITEMS = [
    {
        "id": f"simple_python_{i}",
        "question": [[{"role": "user", "content": f"q{i}"}]],
        "function": [{"name": "math.f", "description": "d", "parameters": {"type": "dict", "properties": {}}}],
    }
    for i in range(3)
]
ANSWERS = [{"id": f"simple_python_{i}", "ground_truth": [{"math.f": {}}]} for i in range(3)]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEXTAGENT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_load_category_reads_questions_answers_and_split(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        {
            "bfcl_eval/data/BFCL_v4_simple_python.json": ITEMS,
            "bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json": ANSWERS,
        },
    )
    items = data.load_category("simple_python", wheel=wheel)
    assert [i.id for i in items] == ["simple_python_0", "simple_python_1", "simple_python_2"]
    assert [i.split for i in items] == ["dev", "test", "dev"]
    assert items[1].user_text == "q1" and items[1].ground_truth == ({"math.f": {}},)


def test_irrelevance_has_no_answers(tmp_path: Path) -> None:
    rows = [dict(ITEMS[0], id="irrelevance_0")]
    wheel = _wheel(tmp_path, {"bfcl_eval/data/BFCL_v4_irrelevance.json": rows})
    assert data.load_category("irrelevance", wheel=wheel)[0].ground_truth is None


def test_missing_answer_and_unknown_category_are_clear_errors(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path,
        {
            "bfcl_eval/data/BFCL_v4_multiple.json": [dict(ITEMS[0], id="multiple_0")],
            "bfcl_eval/data/possible_answer/BFCL_v4_multiple.json": [],
        },
    )
    with pytest.raises(data.BfclDataError, match="multiple_0: no possible answer"):
        data.load_category("multiple", wheel=wheel)
    with pytest.raises(data.BfclDataError, match="unsupported BFCL category 'multi_turn_base'"):
        data.load_category("multi_turn_base", wheel=wheel)


def test_fetch_refuses_a_wheel_that_does_not_verify(cache: Path, tmp_path: Path) -> None:
    def download(requirement: str, dest: Path) -> Path:
        assert requirement == data.BFCL_REQUIREMENT
        path = dest / "bfcl_eval-2026.3.23-py3-none-any.whl"
        path.write_bytes(b"not the wheel")
        return path

    with pytest.raises(data.BfclDataError, match="expected 1925664 bytes"):
        data.fetch_wheel(download=download)
    assert not data.wheel_path().exists()


def test_fetch_caches_and_does_not_download_twice(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content = b"wheel bytes"
    monkeypatch.setattr(data, "WHEEL_SIZE", len(content))
    monkeypatch.setattr(data, "WHEEL_SHA256", hashlib.sha256(content).hexdigest())
    calls = []

    def download(requirement: str, dest: Path) -> Path:
        calls.append(requirement)
        path = dest / "x.whl"
        path.write_bytes(content)
        return path

    first = data.fetch_wheel(download=download)
    second = data.fetch_wheel(download=download)
    assert first == second == data.wheel_path() and first.read_bytes() == content
    assert calls == [data.BFCL_REQUIREMENT]


def test_real_wheel_when_cached() -> None:
    """The pinned wheel's categories and sizes, when it is in the cache (CI fetches it)."""
    if not data._verified(data.wheel_path()):
        pytest.skip("the bfcl-eval wheel is not cached (textagent bench --tasks bfcl:... fetches it)")
    sizes = {
        c: len(data.load_category(c))
        for c in ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
    }
    assert sizes == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
    }
