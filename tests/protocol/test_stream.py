"""protocol/stream.py: the reader of a growing reply costs the same per byte at 10 KB and at 1 MB."""

from __future__ import annotations

import time

from textagent.protocol.stream import CompleteCalls, complete_calls


def _feed(text: str) -> tuple[float, list]:
    """CPU seconds to feed ``text`` line by line to one CompleteCalls, and its last answer."""
    reader, start, last = CompleteCalls(), 0, None
    started = time.process_time()
    for nl in range(len(text)):
        if text[nl] == "\n":
            last = reader.at(text, start, nl) or last
            start = nl + 1
    return time.process_time() - started, last


def _reply(size: int) -> str:
    """A reply of about ``size`` bytes: prose, a call whose object spans most of it, then more."""
    lines, body = ["Let me look that up.", "TOOL: get_weather ARGS: {"], 0
    while body < size:
        line = f'  "key_{len(lines)}": "a value of some length, {len(lines)}",'
        lines.append(line)
        body += len(line) + 1
    lines += ['  "city": "Paris"', "}", "That is the call.", ""]
    return "\n".join(lines)


def test_cpu_per_byte_is_flat_from_10_kb_to_1_mb():
    small, large = _reply(10_000), _reply(1_000_000)
    assert len(large) > 90 * len(small)
    per_byte = []
    for text in (small, large):
        seconds, calls = min(_feed(text) for _ in range(3))
        assert calls and calls[0].name == "get_weather" and calls[0].args["city"] == "Paris"
        per_byte.append(max(seconds, 1e-4) / len(text))
    # linear: the same per byte (a quadratic reader pays ~100 times more per byte at 1 MB)
    assert per_byte[1] < 3 * per_byte[0], per_byte


def test_the_incremental_answer_is_the_whole_texts():
    text = _reply(2_000)
    assert _feed(text)[1] == complete_calls(text)


# -- ReplyStream: the reply it ends with is parse_reply's ------------------------------------------

import protocolkit  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from textagent.protocol import ParseError, parse_reply  # noqa: E402
from textagent.protocol.stream import CallEnds, ReplyStream  # noqa: E402

REPLY_LINES = st.sampled_from(protocolkit.REPLY_LINES)


def _outcome(read):
    try:
        return read()
    except ParseError as err:
        return (err.label, err.line, err.column, err.excerpt, str(err))


@settings(max_examples=400, deadline=None)
@given(st.lists(REPLY_LINES, max_size=10), st.lists(st.integers(0, 300), max_size=20), st.booleans())
def test_the_reply_a_stream_ends_with_is_parse_replys(lines, cuts, strict):
    text = "\n".join(lines)
    stream = ReplyStream()
    given_calls = []
    for end in sorted({*cuts, len(text)}):
        given_calls += [e.call for e in stream.feed(text[:end]) if isinstance(e, CallEnds)]
        if stream.cut is not None:
            break
    kept = stream.kept(text)
    assert _outcome(lambda: stream.reply(kept, strict)) == _outcome(lambda: parse_reply(kept, strict=strict))
    if stream.cut is None:
        assert kept == text
    whole = _outcome(lambda: parse_reply(kept))
    if not isinstance(whole, tuple):
        assert given_calls == whole.calls[: len(given_calls)]


def test_a_stream_reads_a_long_reply_once():
    text = _reply(200_000)
    stream = ReplyStream()
    calls = []
    for nl in range(len(text)):
        if text[nl] == "\n":
            calls += [e.call for e in stream.feed(text[: nl + 1]) if isinstance(e, CallEnds)]
    assert [c.name for c in calls] == ["get_weather"]
    kept = stream.kept(text)  # cut after the call: the next line starts no other
    assert kept.endswith("}\n") and stream.reply(kept) == parse_reply(kept)
