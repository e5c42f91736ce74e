"""protocol.words: what the start of a reply says."""

from __future__ import annotations

import pytest

from textagent.protocol import begins_call


@pytest.mark.parametrize("token", ["TOOL", "TO", " TOOL", "\nTOOL:", "tool:", "**TOOL", "T"])
def test_a_first_token_that_may_begin_a_call(token):
    assert begins_call(token)


@pytest.mark.parametrize("token", ["ANSWER", "To", "The", "Tool", "TOOLS", "Thought", "-", "\n", "", " "])
def test_a_first_token_that_begins_no_call(token):
    assert not begins_call(token)
