"""bench/mode_table.py: the bench's modes in one table; nothing else in the bench (or the CLI)
compares a mode's name with one of the table's names, and every mode is built for a task."""

from __future__ import annotations

import ast
import pathlib

import pytest

import textagent
from textagent.bench.mode_table import BENCH_MODES, MODES, bench_mode
from textagent.modes import mode_needs

PACKAGE = pathlib.Path(textagent.__file__).resolve().parent


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def test_no_switch_on_a_bench_modes_name_outside_the_table():
    found = []
    for path in sorted((PACKAGE / "bench").rglob("*.py")):
        if path.name == "mode_table.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops
            ):
                named = set().union(*map(_names, [node.left, *node.comparators])) & set(MODES)
                if named:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert not found


def test_the_agents_modes_are_the_tables_with_their_own_needs():
    for name in ("text", "constrained", "native", "native+fallback"):
        assert BENCH_MODES[name].needs == mode_needs(name) and BENCH_MODES[name].family == "agent"
    assert [m for m in MODES if BENCH_MODES[m].native_names] == ["native", "native+fallback", "proxy"]
    assert [m for m in MODES if BENCH_MODES[m].reads_native_calls] == ["native", "native+fallback"]
    assert [m for m in MODES if not BENCH_MODES[m].checks_calls] == ["bfcl-prompt"]
    assert [m for m in MODES if not BENCH_MODES[m].multi_turn] == ["baseline"]


@pytest.mark.parametrize("name", MODES)
def test_every_mode_is_built_for_a_task(name):
    made = bench_mode(name).build([{"name": "f", "description": "", "parameters": {}}], "")
    assert made == name or getattr(made, "needs", None) is not None


def test_an_unknown_mode_is_named_with_the_others():
    with pytest.raises(ValueError, match="unknown mode 'bogus'; choose from text, "):
        bench_mode("bogus")
