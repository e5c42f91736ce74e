"""The Lark grammar: LALR, loaded once, ASCII keywords, the only importer of lark."""

from __future__ import annotations

import re

import pytest
from protocolkit import ROOT

from textagent.protocol import grammar


def test_grammar_file_is_lalr_and_loaded_once():
    text = (ROOT / "grammars" / "reply.lark").read_text(encoding="utf-8")
    assert grammar.grammar_text() == text
    assert grammar._parser() is grammar._PARSER
    assert grammar._PARSER.options.parser == "lalr"


def test_only_the_grammar_module_imports_lark():
    own = ROOT / "textagent" / "protocol" / "grammar.py"
    offenders = [
        p
        for p in (ROOT / "textagent").rglob("*.py")
        if p != own and re.search(r"^\s*(from|import)\s+lark\b", p.read_text(encoding="utf-8"), re.M)
    ]
    assert offenders == []


def test_the_grammar_keywords_are_ascii_only():
    import lark

    parser = lark.Lark(grammar.grammar_text(), parser="lalr", lexer="contextual")
    parser.parse('tool: f args: {"a": 1}')
    with pytest.raises(lark.exceptions.UnexpectedInput):
        parser.parse('tool: f argſ: {"a": 1}')
