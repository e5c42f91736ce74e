"""One loader for the files textagent ships: grammars/ is top-level in a checkout and
textagent/grammars in a wheel; both layouts read the same way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from textagent import _resources, gbnf
from textagent.protocol import grammar

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["reply.lark", "reply.gbnf"])
def test_grammars_are_read_from_the_source_checkout(name):
    assert _resources.grammar_text(name) == (ROOT / "grammars" / name).read_text(encoding="utf-8")


def test_the_protocol_and_gbnf_use_the_same_loader():
    assert grammar.grammar_text() is _resources.grammar_text("reply.lark")
    assert gbnf.static_rules() is _resources.grammar_text("reply.gbnf")


def test_a_missing_grammar_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no grammar 'nope.lark'"):
        _resources.grammar_text("nope.lark")


def test_package_data_is_read_from_the_package():
    assert '"missing_colon"' in _resources.data_text("prompts", "text", "format_hints.json")


def test_an_installed_layout_reads_the_grammars_inside_the_package(tmp_path):
    # the wheel's layout without building one: the package with grammars/ inside, no checkout around it
    site = tmp_path / "site"
    shutil.copytree(ROOT / "textagent", site / "textagent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "grammars", site / "textagent" / "grammars")
    marker = "# read from the package copy\n"
    gbnf_copy = site / "textagent" / "grammars" / "reply.gbnf"
    gbnf_copy.write_text(gbnf_copy.read_text(encoding="utf-8") + marker, encoding="utf-8")
    code = (
        "import textagent, textagent.gbnf as g, textagent.protocol as p\n"
        "assert textagent.__file__.startswith(%r), textagent.__file__\n"
        "assert g.static_rules().endswith(%r)\n"
        "print(p.parse_reply('TOOL: f ARGS: {\"a\": 1}').calls[0].args['a'])\n" % (str(site), marker)
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"
