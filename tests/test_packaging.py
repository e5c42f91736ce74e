"""The wheel carries the grammar: build it, install it in a fresh venv, run `textagent parse` there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import venv
import zipfile
from pathlib import Path

import pytest

import textagent

ROOT = Path(__file__).resolve().parent.parent


def test_public_surface_is_exactly_all():
    # Submodules show up as attributes once imported; everything else public must be in __all__.
    public = {
        name
        for name in dir(textagent)
        if not name.startswith("_") and not isinstance(getattr(textagent, name), types.ModuleType)
    }
    assert public == set(textagent.__all__) - {"__version__"}
    for name in textagent.__all__:
        assert getattr(textagent, name) is not None


def test_the_package_is_marked_typed_and_exports_example():
    assert (Path(textagent.__file__).parent / "py.typed").is_file()
    from textagent.tools import Example

    assert textagent.Example is Example and "Example" in textagent.__all__


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_finds_the_grammar(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(dist.glob("textagent-*.whl"))
    shipped = zipfile.ZipFile(wheel).namelist()
    # the sweeps are run from a checkout (python -m benchmarks.parse_speed), never installed
    assert not [n for n in shipped if n.startswith("benchmarks/") or n.endswith("filler_words.txt")]
    assert "textagent/fuzz.py" in shipped and not [n for n in shipped if n.startswith("textagent/bench/parse_speed")]
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    # Run from an empty folder so the source checkout cannot be imported by accident.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(env_dir / "bin" / "textagent"), "parse"],
        input='TOOL: calculate(expression="17 * 24")\n',
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["calls"] == [{"name": "calculate", "args": {"expression": "17 * 24"}}]
    where = subprocess.run(
        [str(python), "-c", "import textagent, pathlib; print(pathlib.Path(textagent.__file__).parent)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert (Path(where.stdout.strip()) / "grammars" / "reply.lark").is_file()
    # the GBNF rules and the model-facing error text come from the package too
    grammar = subprocess.run(
        [str(env_dir / "bin" / "textagent"), "grammar", "--tools", "demo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert grammar.returncode == 0 and "root ::=" in grammar.stdout, grammar.stderr
    bad = subprocess.run(
        [str(env_dir / "bin" / "textagent"), "parse"],
        input='TOOL: f ARGS: {"q": cats}\n',
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert "Put text values in double quotes" in bad.stdout, (bad.stdout, bad.stderr)
    # the fuzz corpus ships as package data; without the `fuzz` extra, one line says what to install
    assert len(list((Path(where.stdout.strip()) / "fuzz_corpus").glob("*.txt"))) >= 20
    fuzz = subprocess.run(
        [str(env_dir / "bin" / "textagent"), "fuzz", "--seconds", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert fuzz.returncode == 1 and len(fuzz.stderr.strip().splitlines()) == 1, fuzz.stderr
    assert "pip install 'textagent[fuzz]'" in fuzz.stderr
    assert (Path(where.stdout.strip()) / "py.typed").is_file()  # type checkers read the hints
