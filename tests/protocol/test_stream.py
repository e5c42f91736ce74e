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
