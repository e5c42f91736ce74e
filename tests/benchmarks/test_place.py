"""The sweeps live beside the package: each runs on its own, and the package never imports them
(the wheel does not carry them; tests/test_packaging.py checks the wheel)."""

from __future__ import annotations

import ast
import importlib
import pathlib

import textagent

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWEEPS = ("parse_speed", "loop", "server_settings", "server_figures", "speculative")


def test_each_sweep_is_in_benchmarks_and_those_run_have_a_main():
    for name in SWEEPS:
        module = importlib.import_module(f"benchmarks.{name}")
        assert pathlib.Path(module.__file__).parent == ROOT / "benchmarks"
        assert name == "server_figures" or callable(module.main)
        assert not (pathlib.Path(textagent.__file__).parent / "bench" / f"{name}.py").exists()


def test_the_package_never_imports_benchmarks():
    offenders = []
    for path in pathlib.Path(textagent.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "benchmarks" or n.startswith("benchmarks.") for n in names):
                offenders.append(str(path))
    assert offenders == []
