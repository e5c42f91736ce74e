"""tools/ modules share their helpers by public names: no module imports another's private one."""

from __future__ import annotations

import ast
import pathlib

import textagent.tools

TOOLS = pathlib.Path(textagent.tools.__file__).parent


def test_no_module_of_tools_imports_a_private_name_of_another():
    private = [
        f"{path.name}: from .{node.module} import {alias.name}"
        for path in sorted(TOOLS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.level
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert not private
