"""One loader of the ``module:attr`` references a user names (``--tools``, ``--checks``, a bench
task's tools): textagent._lazy.load_reference; no other module splits such a reference itself."""

from __future__ import annotations

import pathlib

import pytest

import textagent
from textagent._lazy import load_reference

PACKAGE = pathlib.Path(textagent.__file__).resolve().parent


def test_a_reference_loads_its_object_and_a_bad_one_says_why():
    assert load_reference("textagent.toolkits.demo:demo_tools").__name__ == "demo_tools"
    for bad, why in (
        ("nomodule_xyz:f", "No module named 'nomodule_xyz'"),
        ("textagent:nothing_here", "nothing_here"),
        ("textagent", "not a module:name reference"),
        (":f", "not a module:name reference"),
    ):
        with pytest.raises(ValueError, match=why):
            load_reference(bad)


def test_no_other_module_loads_a_module_attr_reference_itself():
    own = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "_lazy.py"
        and 'partition(":")' in (text := p.read_text(encoding="utf-8"))
        and "import_module(" in text
    ]
    assert not own
