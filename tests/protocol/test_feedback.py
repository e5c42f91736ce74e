"""What the model reads about a format error."""
from __future__ import annotations

import json
import pickle

from protocolkit import CALC, ROOT, TOOLS, error

from textagent.protocol import ERROR_CLASSES, ParseError


def test_error_fields_and_feedback():
    text = 'I will check.\n- TOOL: get_wether ARGS: {"city": Paris}'
    err = error(text, tools=TOOLS)
    assert isinstance(err, ValueError)
    assert err.label == "unquoted_string"
    assert (err.line, err.column) == (2, 35)
    assert err.name == "get_wether"
    assert "a string" in err.expected
    assert err.excerpt == '- TOOL: get_wether ARGS: {"city": Paris}\n' + " " * 34 + "^"
    assert str(err) == "line 2, column 35: a text value is not quoted: found `Paris`"
    assert "\n" not in str(err)
    fb = err.feedback()
    assert "line 2, column 35" in fb.lower()
    assert 'TOOL: get_weather ARGS: {"city": "text"}' in fb  # the closest real tool, its required parameter
    assert "ANSWER:" not in fb   # no way out offered: small models took it instead of fixing the call
    assert err.excerpt.split("\n")[0] in fb
    assert "Put text values in double quotes" in fb
    # no tools known: an example with the name the model tried
    plain = error('TOOL: get_wether ARGS: {"city": Paris}')
    assert 'TOOL: get_wether ARGS: {"key": "value"}' in plain.feedback()
    assert 'TOOL: calculate ARGS: {"expression": "text"}' in plain.feedback([CALC])
    d = err.to_dict()
    assert set(d) >= {"message", "line", "column", "expected", "feedback", "label"}
    json.dumps(d)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.label, copy.line, copy.column, copy.message) == (err.label, err.line, err.column, err.message)


def test_feedback_comes_from_the_template_file():
    template = (ROOT / "textagent" / "prompts" / "text" / "format_error.txt").read_text(encoding="utf-8")
    fixed = [ln for ln in template.splitlines() if ln.strip() and "$" not in ln]
    fb = error("TOOL:").feedback()
    for line in fixed:
        assert line in fb


def test_long_lines_get_a_window_in_the_excerpt():
    text = "TOOL: f ARGS: {\"a\": " + "1, \"b\": " * 40 + "oops}"
    err = error(text)
    first, caret = err.excerpt.split("\n")
    assert len(first) <= 102
    assert first.startswith("\u2026")
    assert first[len(caret) - 1:].startswith("oops")


def test_every_hint_comes_from_the_hints_file():
    hints = json.loads((ROOT / "textagent" / "prompts" / "text" / "format_hints.json").read_text(encoding="utf-8"))
    assert set(hints) == {c.label for c in ERROR_CLASSES}
    for cls in ERROR_CLASSES:
        assert cls.hint == hints[cls.label]
    err = error('TOOL: search ARGS: {"q": cats}')
    assert err.hint == hints["unquoted_string"] and hints["unquoted_string"] in err.feedback()


def test_an_error_without_excerpt_says_the_reply_was_empty():
    fb = ParseError("nothing to read", label="bad_call").feedback()
    assert "    (empty reply)" in fb and "nothing to read" in fb
