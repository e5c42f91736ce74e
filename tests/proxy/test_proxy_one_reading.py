"""One reading of each reply: on the proxy's path a reply is read by one ReplyStream (one
incremental reader), which gives its calls as they complete, where to cut it and, at the end, the
Reply itself; nothing parses the reply again."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from test_proxy_round5 import ASK, GREP, _sse, events_of, post

from textagent import protocol
from textagent.protocol import stream as stream_module

REPLY = (
    'TOOL: grep ARGS: {"file_name": "a.py", "pattern": "TODO"}\n'
    'TOOL: grep ARGS: {"file_name": "b.py", "pattern": "TODO"}\n'
    "That is all I need to look at for now.\n"
    "ANSWER: done\n"
)


@pytest.fixture
def counted(monkeypatch):
    """How many readers of a reply were made and how many whole replies parse_reply read."""
    counts = {"ReplyStream": 0, "CompleteCalls": 0, "parse_reply": 0}
    for name in ("ReplyStream", "CompleteCalls"):
        cls = getattr(stream_module, name)
        original = cls.__init__

        def init(self, *args, _original=original, _name=name, **kw):
            counts[_name] += 1
            _original(self, *args, **kw)

        monkeypatch.setattr(cls, "__init__", init)
    parse_reply = protocol.parse_reply

    def counting(*args, **kw):
        counts["parse_reply"] += 1
        return parse_reply(*args, **kw)

    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("textagent")
            and getattr(module, "parse_reply", None) is parse_reply
        ):
            monkeypatch.setattr(module, "parse_reply", counting)
    return counts


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_with_two_calls_and_text_after_them_is_read_once(upstream, proxy, counted, stream):
    upstream.sse("/completion", _sse(REPLY, "eos"))  # the proxy streams from its upstream either way
    resp = post(proxy, {"messages": ASK, "tools": [GREP], "stream": stream})
    assert resp.status_code == 200, resp.text
    if stream:
        events = events_of(resp)
        deltas = [d for e in events[:-1] for c in e["choices"] for d in c["delta"].get("tool_calls", [])]
        arguments = [d["function"]["arguments"] for d in deltas if d["function"].get("arguments")]
    else:
        arguments = [c["function"]["arguments"] for c in resp.json()["choices"][0]["message"]["tool_calls"]]
    assert [json.loads(a)["file_name"] for a in arguments] == ["a.py", "b.py"]
    assert counted == {"ReplyStream": 1, "CompleteCalls": 1, "parse_reply": 0}
