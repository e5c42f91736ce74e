"""ReplyStream's events. The answer's text it gives while a reply arrives is always the start of
the content of the whole reply, however the reply is cut into pieces, and it cuts a reply at a
line that would change that. Every call it gives while the reply arrives is the call the whole
reply has at that place. It reads in time linear in the reply."""

from __future__ import annotations

import protocolkit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textagent.protocol import AnswerText, CallEnds, ParseError, ReplyStream, parse_reply

LINES = st.sampled_from(
    [
        "plain words of the answer",
        "",
        "  indented line",
        "```python",
        "```",
        "x = {'a': 1}",
        "- a list item",
        "> quoted",
        "Thought: not a keyword here",
        "**bold** text",
        "ARGS: {}",
        "1. first",
        "the word tool in prose",
        "tail   ",
        "TOOL: f",
        'TOOL: f ARGS: {"a": 1}',
        "OBSERVATION: made up",
    ]
)


def feed(text: str, cuts: list[int], **kw) -> tuple[ReplyStream, list[str], str]:
    sent: list[str] = []
    stream = ReplyStream(None, answers=True, release=True, **kw)
    for end in sorted({*cuts, len(text)}):
        sent += [e.piece for e in stream.feed(text[:end]) if isinstance(e, AnswerText)]
        if stream.cut is not None:
            break
    return stream, sent, stream.kept(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=8), st.text(alphabet="ab ", max_size=30), st.lists(st.integers(0, 400), max_size=30))
def test_what_is_sent_is_the_start_of_the_final_content(lines, first, cuts):
    text = "Thought: hm\nANSWER: " + first + "\n" + "\n".join(lines)
    stream, sent, kept = feed(text, cuts)
    if not sent:  # nothing sent, nothing promised: the reply may still be calls (or not parse)
        return
    reply = parse_reply(kept)
    content = reply.answer
    assert reply.is_final and content.startswith("".join(sent))
    sent.append(stream.rest(content))
    assert "".join(sent) == content


def test_a_call_line_ends_the_answer_and_nothing_of_it_is_sent():
    text = 'ANSWER: it is sunny in Paris today\nTOOL: get_weather ARGS: {"city": "Paris"}\nmore'
    stream, sent, _kept = feed(text, list(range(0, len(text), 3)))
    assert stream.cut == len("ANSWER: it is sunny in Paris today\n") and "".join(sent) == "it is sunny in Paris today"


def test_a_reply_that_calls_first_sends_nothing():
    text = "TOOL: f ARGS: {}\nANSWER: then this answer, dropped by the parser"
    _stream, sent, kept = feed(text, list(range(0, len(text), 5)))
    assert sent == [] and kept == "TOOL: f ARGS: {}\n"  # cut after the calls


def error_label(stream: ReplyStream, kept: str) -> str:
    with pytest.raises(ParseError) as err:
        stream.reply(kept)
    return err.value.label


def test_a_call_written_with_another_keyword_sends_nothing():
    # the reply does not parse (wrong_keyword): its client must not have got the answer already
    text = 'CALL: get_weather ARGS: {"city": "Paris"}\nANSWER: it is sunny in Paris today'
    stream, sent, kept = feed(text, list(range(0, len(text), 4)))
    assert sent == [] and error_label(stream, kept) == "wrong_keyword"
    # the same call after ANSWER: nothing of it is sent, however the text arrives
    for text in ('ANSWER: get_weather ARGS: {"city": "Paris"}', "ANSWER: `get_weather` **ARGS**: {}"):
        stream, sent, kept = feed(text, list(range(len(text))))
        assert sent == [] and error_label(stream, kept) == "wrong_keyword"
    # an answer that starts like one is sent once it cannot become one
    stream, sent, kept = feed("ANSWER: Paris is sunny today", list(range(28)))
    assert "".join(sent).startswith("Paris i") and "Paris is sunny today".startswith("".join(sent))
    # inside an answer the same line is the answer's text, streamed and parsed alike
    text = "ANSWER:\nCALL: get_weather ARGS: {}\nis what I would write"
    stream, sent, kept = feed(text, list(range(0, len(text), 4)))
    assert "".join(sent) + stream.rest(parse_reply(kept).answer) == parse_reply(kept).answer


def test_a_prefill_is_not_sent_again():
    stream, sent, _ = feed(" Paris, the capital.", [3, 9], prefix="ANSWER: The capital is", skip="The capital is")
    sent.append(stream.rest(" Paris, the capital."))
    assert "".join(sent) == " Paris, the capital."


CALL_LINES = st.sampled_from(protocolkit.CALL_LINES)


def judged_calls(text: str, cuts: list[int]) -> tuple[ReplyStream, list, str]:
    judged: list = []
    stream = ReplyStream(None)
    for end in sorted({*cuts, len(text)}):
        judged += [e.call for e in stream.feed(text[:end]) if isinstance(e, CallEnds)]
        if stream.cut is not None:
            break
    return stream, judged, stream.kept(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(CALL_LINES, max_size=8), st.lists(st.integers(0, 300), max_size=30))
def test_a_call_judged_while_the_reply_arrives_is_the_whole_replys_call(lines, cuts):
    text = "\n".join(lines)
    stream, judged, kept = judged_calls(text, cuts)
    early = list(judged)
    try:
        reply = parse_reply(kept)
    except ParseError:
        return  # the repair loop sends the rest back; the calls judged stay
    assert early == reply.calls[: len(early)] and stream.reply(stream.kept(text)) == reply


def test_calls_are_given_at_their_line_ends_in_order():
    text = 'TOOL: f ARGS: {"a": 1}\nTOOL: g\nARGS: {\n  "b": 2\n}\nTOOL: h ARGS: {}'
    stream, given = ReplyStream(None), []
    for end in range(len(text) + 1):
        given += [(e.call.name, e.end) for e in stream.feed(text[:end]) if isinstance(e, CallEnds)]
        if end == text.index("\n") + 1:
            assert given == [("f", end)]
    assert [name for name, _ in given] == ["f", "g"]  # h has no line end yet
    assert [c.name for c in stream.reply(stream.kept(text)).calls] == ["f", "g", "h"]


# -- linear in the reply (hardening round 4: S1-S3) --------------------------------------------------


def _cpu(watch, text: str, chunk: int) -> float:
    import time

    started = time.process_time()
    for end in range(chunk, len(text) + chunk, chunk):
        if watch(text[:end]):
            break
    return time.process_time() - started


def _watch(stream: ReplyStream):
    """``stream`` as an on_text callback: True once it cuts the reply."""
    return lambda text: bool(stream.feed(text)) and stream.cut is not None


def _growth(make, build, sizes=(300, 1200), chunk=8) -> float:
    """CPU of the larger reply over the smaller's: ~4 when linear, ~16 when quadratic."""
    small, large = (min(_cpu(make(), build(n), chunk) for _ in range(3)) for n in sizes)
    return large / max(small, 1e-4)


def test_call_streaming_reads_a_long_pretty_printed_call_in_linear_time():
    def build(n):
        body = "{\n" + "".join(f'  "k{i}": {i},\n' for i in range(n)) + '  "city": "Paris"\n}'
        return "TOOL: get_weather ARGS: " + body + "\nANSWER: x\n"

    assert _growth(lambda: _watch(ReplyStream(None)), build) < 8  # 1,600 lines took 9.1 s


def test_early_stop_reads_a_repeated_call_line_in_linear_time():
    from textagent.modes.text import EarlyStop

    def build(n):
        return 'TOOL: get_weather ARGS: {"city": "Paris"}\n' * (n // 3) + "ANSWER: done\n"

    assert _growth(lambda: EarlyStop(None), build) < 8  # 400 lines took 3.9 s


def test_answer_streaming_reads_a_long_answer_in_linear_time():
    def build(n):
        return "ANSWER: " + ("word " * 10 + "\n") * (n // 5)

    stream = lambda: _watch(ReplyStream(None, answers=True, release=True))  # noqa: E731
    assert _growth(stream, build, sizes=(3_000, 12_000), chunk=4) < 8  # 128 KB: 3.1 s
