"""The values a parse gives are frozen and serialisable."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from textagent.protocol import parse_reply


def test_data_is_frozen_and_serialisable():
    reply = parse_reply('hm\nTOOL: f ARGS: {"a": 1}\nOBSERVATION: x')
    with pytest.raises(FrozenInstanceError):
        reply.answer = "x"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        reply.calls[0].name = "g"  # type: ignore[misc]
    assert json.loads(json.dumps(reply.to_dict())) == {
        "calls": [{"name": "f", "args": {"a": 1}}],
        "answer": None,
        "thought": "hm",
        "dropped": [{"kind": "observation", "line": 3, "text": "OBSERVATION: x"}],
    }
