"""The repair loop: ask the upstream, read the reply with the text protocol, and send a reply
that cannot be used back to the model with textagent's feedback, up to ``max_repairs`` times.

A reply can be used when it parses, its calls name the request's tools with arguments valid
for their schemas, and it fits ``tool_choice`` (a call for ``required`` or a named function,
none for ``none``) and, under ``response_format``, its answer is JSON of the schema. What the
client gets is a list of valid calls or a message whose content is the answer (no keyword of
the protocol in it). When the repairs run out it gets the valid calls of the last reply; else,
where ``tool_choice`` or ``response_format`` demanded something, an error (422), and otherwise
the reply's words without its protocol lines.

Streamed, each valid call is sent as soon as it is complete (watch.CallStream). From then on the
answer is calls: the ones sent stay, a reply's failing calls (or a rest that does not parse) go
back to the model alone, told which were accepted, and the valid calls of its new reply are
added; when the repairs run out, the calls sent are the answer.

Each upstream completion is recorded as a ``Step`` (``Answer.attempts``, the trace's records):
what the upstream wrote, how it was read, its usage, the feedback as its observations, and in
``details`` the calls of it the client got (``accepted``, ``streamed`` when each went out as soon
as it was complete), and ``feedback_sent: false`` where the feedback was not sent (the repairs
were spent, or max_tokens cut the reply).
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..backends.base import Usage
from ..gbnf import reply_grammar
from ..modes import fixed_part
from ..modes.text import EarlyStop, kept_text
from ..protocol import ParseError, Reply, ToolCall, parse_reply
from ..protocol.lines import classify, unwrap
from ..protocol.stream import complete_calls
from ..steps import Step
from ..tools import ToolSet
from ..tools.validation import format_path
from .convert import ChatRequest
from .errors import Cancelled, ModelFailed, ProxyError
from .upstream import Upstream
from .watch import AnswerStream, CallStream, answer_content, answer_cut, words_only

__all__ = ["Answer", "Cancelled", "answer", "arguments_json", "grammar_for"]

DEFAULT_REPLY_TOKENS = 1024
MAX_CALLS_PER_REPLY = 16  # the Agent's default max_calls_per_reply
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Answer:
    content: str | None
    calls: list[dict[str, Any]]  # {"id", "name", "arguments" (a JSON string), "args" (the object)}
    finish_reason: str  # tool_calls | stop | length
    usage: Usage = field(default_factory=Usage)
    repairs: int = 0
    attempts: list[Step] = field(default_factory=list)  # one per upstream completion
    turns: list[dict[str, str]] = field(default_factory=list)  # what the model wrote, repairs included

    def message(self) -> dict[str, Any]:
        """The assistant message of the response."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in self.calls
            ]
        return message


def grammar_for(request: ChatRequest, constrained: bool) -> str | None:
    """The GBNF the reply is held to: the tools' grammar in constrained mode, and where
    ``tool_choice`` asks for it (answer only for ``none``; calls only for ``required`` or a
    named function) in either mode; an answer under ``response_format`` held to its JSON.
    None: free text."""
    max_calls = None if request.parallel else 1
    grammar: str | None
    if request.tool_choice == "none":
        grammar = reply_grammar(ToolSet())
    elif request.tool_choice == "auto":
        grammar = reply_grammar(request.tools, max_calls=max_calls) if constrained else None
    else:
        tools = request.tools.select(request.function) if request.function else request.tools
        head, rest = reply_grammar(tools, max_calls=max_calls).split("\n", 1)
        return head.replace("(calls | answer)", "calls") + "\n" + rest
    if grammar is not None and request.format is not None:
        grammar = request.format.grammar(grammar)
    return grammar


def _new_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _not_finite(value: Any) -> tuple[list[Any], float] | None:
    """The path to the first NaN or infinity in ``value`` (JSON data), if any; no recursion."""
    stack: list[tuple[Any, list[Any]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path, node
        if isinstance(node, dict):
            stack.extend((v, [*path, k]) for k, v in reversed(list(node.items())))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, [*path, i]) for i, v in reversed(list(enumerate(node))))
    return None


def arguments_json(args: Any) -> str:
    """The ``arguments`` string of a tool call: RFC 8259 JSON (ValueError for NaN or an infinity),
    and text UTF-8 can carry (a lone surrogate the model wrote is kept as its ``\\uXXXX`` escape,
    which reads back as the same string)."""
    text = json.dumps(args, ensure_ascii=False, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


def _call_key(call: dict[str, Any]) -> tuple[str, str]:
    """A call as the client would run it: the same name and arguments, whatever the order of
    their keys or the spacing of the JSON the model wrote."""
    return call["name"], json.dumps(call["args"], sort_keys=True, ensure_ascii=False, default=str)


def _judge(call: ToolCall, tools: ToolSet) -> tuple[dict[str, Any] | None, str]:
    """One call as the client gets it (None when it is not valid), or the observation telling the
    model why not. Validated only (``ToolSet.check``): the client runs its tools."""
    outcome = tools.check(call, limit=None)
    bad = _not_finite(outcome.args) if outcome.ok else None
    if bad is not None:  # valid for the schema, but the client must get JSON
        path, number = bad
        at = prompts.template("arg_at.txt").substitute(path=format_path(path)) if path else ""
        problem = prompts.for_family("proxy").template("arg_not_json").substitute(at=at, value=json.dumps(number))
        return None, prompts.observation(
            outcome.name,
            prompts.template("tool_bad_arguments.txt").substitute(error=problem, usage=tools[outcome.name].signature()),
            failed=True,
        )
    if outcome.ok:
        return {
            "id": _new_id(),
            "name": outcome.name,
            "args": outcome.args,
            "arguments": arguments_json(outcome.args),
        }, ""
    return None, prompts.observation(outcome.name, outcome.output, failed=True)


def _problem(request: ChatRequest, reply: Reply, tools: ToolSet) -> tuple[str | None, list[dict[str, Any]]]:
    """Feedback for the model when the reply cannot be used (else None), and its valid calls
    (exact repeats collapsed, at most MAX_CALLS_PER_REPLY)."""
    if reply.is_final:
        answer = reply.answer if reply.answer is not None else reply.thought.strip()
        if request.tool_choice in ("required", "function"):
            return prompts.feedback(
                prompts.for_family("proxy").template("call_required.txt").substitute(tools=", ".join(tools))
            ), []
        if not answer.strip():
            return prompts.feedback(prompts.template("empty_reply.txt").substitute()), []
        if request.format is not None:
            problem, _ = request.format.check(answer)
            if problem is not None:
                return prompts.feedback(problem), []
        return None, []
    if request.tool_choice == "none":
        return prompts.feedback(prompts.for_family("proxy").template("no_call.txt").substitute()), []
    calls = reply.calls if request.parallel else reply.calls[:1]
    valid, failed = _judged(calls, tools, set())
    if failed:
        if len(calls) > 1:
            failed.append(prompts.for_family("proxy").template("rewrite.txt").substitute())
        return "\n".join(failed), valid
    return None, valid


def _judged(
    calls: list[ToolCall], tools: ToolSet, seen: set[tuple[str, str]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """(the valid calls, the observations on the others) of a reply's ``calls``: a call the same
    as one in ``seen`` (sent already, or earlier in the reply) is not taken again, and at most
    MAX_CALLS_PER_REPLY are (a model looping on one call line wrote 38 calls, 7 of them distinct)."""
    valid: list[dict[str, Any]] = []
    failed: list[str] = []
    for call in calls:
        ok, failure = _judge(call, tools)
        if ok is None:
            failed.append(failure)
        elif _call_key(ok) not in seen and len(valid) < MAX_CALLS_PER_REPLY:
            seen.add(_call_key(ok))
            valid.append(ok)
    return valid, failed


_THOUGHT = re.compile(r"^\s*thought\s*:\s*", re.I | re.A | re.M)


def _content(reply: Reply, request: ChatRequest) -> str:
    """The client's content of a usable answer: no protocol keyword, the JSON under response_format."""
    text = reply.answer if reply.answer is not None else reply.thought.strip()
    if text == reply.thought.strip():  # prose without ANSWER: its thought lines are not the answer
        said = "\n".join(line for line in text.split("\n") if not _THOUGHT.match(line)).strip()
        text = said or _THOUGHT.sub("", text).strip()
    text = answer_content(text)  # a model that wrote "ANSWER: ANSWER: ..."
    return request.format.check(text)[1] if request.format is not None else text


def _prose(text: str, reply: Reply | None) -> str:
    """What a reply that could not be used says in words: its answer or prose, never a call
    line, an ARGS line or a keyword."""
    if reply is not None:
        text = reply.answer if reply.is_final and reply.answer is not None else reply.thought
        return _THOUGHT.sub("", answer_content(text)).strip()
    kept = []
    for line in text.split("\n"):
        info = classify(line)
        if info.kind == "obs":
            break
        if info.kind in ("call", "args"):
            continue
        kept.append(unwrap(line, info)[info.end :] if info.kind == "answer" else line)
    return _THOUGHT.sub("", "\n".join(kept)).strip()


def _not_met(request: ChatRequest, repairs: int) -> ProxyError | None:
    """The error for a request whose demand no reply met after ``repairs`` repairs, if it has one."""
    after = f"after {repairs} repair{'s' if repairs != 1 else ''}"
    if request.tool_choice in ("required", "function"):
        wanted = f"a call of {request.client_name(request.function)}" if request.function else "a tool call"
        return ProxyError(
            422,
            f"tool_choice asked for {wanted}; the model wrote none that is valid {after}",
            param="tool_choice",
            code="tool_choice_not_met",
        )
    if request.format is not None:
        return ProxyError(
            422,
            f"response_format asked for JSON{' of its schema' if request.format.schema else ''}; "
            f"the model's answer was not that {after}",
            param="response_format",
            code="response_format_not_met",
        )
    return None


def answer(  # noqa: C901
    upstream: Upstream,
    request: ChatRequest,
    turns: list[dict[str, str]],
    *,
    constrained: bool,
    max_repairs: int,
    slot: int,
    cancelled: threading.Event,
    on_content: Callable[[str, int], Any] | None = None,
    on_call: Callable[[dict[str, Any], int], Any] | None = None,
) -> Answer:
    """Ask until the reply can be used or ``max_repairs`` repairs are spent. A conversation
    ending with an assistant turn is a prefill: the first reply continues it, and the content
    is what the model added to it. ``on_content(piece, repairs)`` gets the answer's content in
    pieces, some while the model writes it (see watch.AnswerStream); ``on_call(call, repairs)``
    each valid call as soon as its line is complete (watch.CallStream): such a call stays in the
    answer, and a later call that fails goes back to the model alone (``_committed``). Raises
    Cancelled when ``cancelled`` is set (the stream to the upstream is closed at its next token),
    BackendError when the upstream fails, ProxyError when ``tool_choice`` or ``response_format``
    cannot be met."""
    tools = request.tools.select(request.function) if request.function else request.tools
    backend = upstream.backend_for(request.sampling)
    grammar = grammar_for(request, constrained) if upstream.takes_grammar else None
    stop = [*([] if grammar else ["OBSERVATION"]), *upstream.format.stop, *request.stop]
    options: dict[str, Any] = {**upstream.options(slot), "stream": True}
    if grammar:
        options["grammar"] = grammar
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.seed is not None:
        options["seed"] = request.seed
    prefill = turns[-1]["content"] if turns[-1]["role"] == "assistant" else ""
    base = turns[:-1] if prefill else turns
    fixed = _fixed(upstream.format, turns)
    if fixed:
        options["cache_prefix"] = fixed  # the system prompt and tools: restored, not evaluated (prefix_cache.py)
    streams = on_content is not None and request.format is None and request.tool_choice in ("auto", "none")
    streams_calls = on_call is not None and request.tool_choice != "none"
    written: list[dict[str, str]] = []
    out = Answer(None, [], "stop")
    send = None if on_content is None else (lambda piece: on_content(piece, out.repairs))
    while True:
        if cancelled.is_set():  # the client went away: nothing more is sent upstream
            raise Cancelled()
        lead = "" if written else prefill  # only the first reply continues the prefill
        skip = _prefilled_answer(lead, tools)
        watcher = EarlyStop(tools) if tools else None  # with no tools no line is a call to stop after
        streamer = (
            AnswerStream(send, tools, prefix=lead, skip=skip, calls=bool(tools))
            if streams and send and not out.calls
            else None
        )
        failures: list[str] = []
        repeats = {_call_key(c) for c in out.calls}  # sent before this reply
        before = len(out.calls)

        def judge(call: ToolCall) -> bool:
            if streamer is not None and streamer.started:
                return True  # the reply is an answer, and the client has its start
            valid, failure = _judge(call, tools)
            if valid is None:
                failures.append(failure)
            elif _call_key(valid) not in repeats:  # a repair may repeat an accepted call, keys in any order
                repeats.add(_call_key(valid))  # ... and a reply the same call twice
                out.calls.append(valid)
                assert on_call is not None
                on_call(valid, out.repairs)
            return len(out.calls) - before >= MAX_CALLS_PER_REPLY

        calls = CallStream(judge, tools, prefix=lead, limit=None if request.parallel else 1) if streams_calls else None
        prompt = upstream.format.render([*base, *written] if written else turns)
        completion = backend.complete(
            prompt,
            stop=stop,
            max_tokens=request.max_tokens or DEFAULT_REPLY_TOKENS,
            on_text=lambda text: (
                cancelled.is_set()
                or bool(calls and not (streamer and streamer.started) and calls(text))  # (an answer's lines: no calls)
                or bool(watcher and watcher(lead + text))
                or bool(streamer and not out.calls and streamer(text))
            ),
            **options,
        )
        if cancelled.is_set():
            raise Cancelled()
        text = completion.text
        if streamer is not None and streamer.started:
            text = streamer.close(text)
        elif completion.finish_reason == "early_stop" and calls is not None and calls.cut is not None:
            text = text[: calls.cut]
        elif completion.finish_reason == "early_stop" and watcher is not None and watcher.cut is not None:
            text = (lead + text)[: watcher.cut][len(lead) :]
        text = lead + text
        if tools and (streamer is None or not streamer.started):
            cut = answer_cut(text)  # an answer then a call: the answer, as streaming reads it
            if cut is not None and cut >= len(lead):
                text = text[:cut]
        out.usage += completion.usage
        attempt = Step(
            len(out.attempts) + 1,
            completion.text,
            usage=completion.usage,
            timings=dict(completion.timings),
            finish_reason=completion.finish_reason,
            retries=completion.retries,
        )
        out.attempts.append(attempt)
        length = completion.finish_reason == "length"
        try:  # with no tools nothing is a call: a line "Tool: a hammer" is words
            parsed = parse_reply(text, tools) if tools else words_only(text)
            reply, unparsed = parsed, None
        except ParseError as err:
            reply, unparsed = None, prompts.feedback(prompts.parse_feedback(err, tools))
            attempt.parse_error = err
            if length and calls is None and tools:
                # cut by max_tokens inside a call: the complete calls before it are the reply, as
                # streaming would have taken them
                before_cut = complete_calls(text[: max(0, text.rfind("\n"))], tools)
                if before_cut:
                    reply, unparsed = Reply(list(before_cut), None, ""), None
        else:
            if calls is not None:
                calls.finish(parsed)  # the calls the reply's end completed
        attempt.reply = reply
        kept = kept_text(Step(attempt.index, text, reply=reply))  # of the text read (prefill, cut), not raw
        if out.calls:  # the client has calls: they stay, and only what failed goes back
            if calls is None and reply is not None:  # not streamed: this reply's calls are judged now
                more, failed = _judged(reply.calls if request.parallel else [], tools, repeats)
                out.calls += more
                failures += failed
            feedback = _committed(out, failures, unparsed)
            _accepted(attempt, out.calls[before:], streamed=True)
            if feedback is None or length or out.repairs >= max_repairs:
                if feedback is not None:
                    _unsent(attempt, feedback)
                out.turns = [*written, {"role": "assistant", "content": kept}]
                out.content, out.finish_reason = None, "length" if length else "tool_calls"
                return out
            attempt.observations.append(feedback)
            written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
            out.repairs += 1
            continue
        feedback, valid = (unparsed, []) if reply is None else _problem(request, reply, tools)
        if streamer is not None and streamer.started:
            feedback, valid = None, []  # the client has this answer's start: it is the answer
        if feedback is not None and valid and not length and out.repairs < max_repairs:
            # some calls are valid: they are kept (as streaming keeps them), only the others go back
            out.calls = valid
            _accepted(attempt, valid)
            assert reply is not None
            failed = _judged(reply.calls, tools, set())[1]
            feedback = _committed(out, failed, None)
            assert feedback is not None  # the calls that failed in _problem() fail again here
            attempt.observations.append(feedback)
            written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
            out.repairs += 1
            continue
        if feedback is None:
            written.append({"role": "assistant", "content": kept})
            out.turns = written
            if valid:  # a reply cut by max_tokens says so: finish_reason "length"
                out.calls, out.finish_reason = valid, "length" if length else "tool_calls"
                _accepted(attempt, valid)
            else:
                if reply is not None:
                    content = _content(reply, request)
                else:
                    assert streamer is not None  # a reply that did not parse is kept only when its start was streamed
                    content = skip + streamer.sent
                out.content = content[len(skip) :] if skip and content.startswith(skip) else content
                out.finish_reason = "length" if length else "stop"
                if streamer is not None:
                    streamer.finish(out.content)
                elif send is not None and out.content:
                    send(out.content)
            return out
        if length or out.repairs >= max_repairs:
            # a reply cut by max_tokens is not asked again with the same budget
            _unsent(attempt, feedback)
            out.turns = [*written, {"role": "assistant", "content": kept}]
            if valid:
                out.calls, out.finish_reason = valid, "length" if length else "tool_calls"
                _accepted(attempt, valid)
                return out
            error = _not_met(request, out.repairs)
            if error is not None and not (length and request.format is not None):
                raise ModelFailed(error, out)
            out.content, out.finish_reason = _prose(text, reply), "length" if length else "stop"
            if not out.content:
                raise ModelFailed(
                    ProxyError(
                        422, f"the model wrote no usable reply after {out.repairs} repairs", code="no_usable_reply"
                    ),
                    out,
                )
            if send is not None:
                send(out.content)
            return out
        attempt.observations.append(feedback)
        written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
        out.repairs += 1


def _fixed(fmt: Any, turns: list[dict[str, str]]) -> int:
    """The characters of the rendered conversation before its first user message's text: the
    client's system prompt and tools, the same in each of its requests."""
    first = next((i for i, t in enumerate(turns) if t["role"] == "user"), None)
    if first is None:
        return 0
    fixed = fixed_part(fmt, turns[: first + 1])
    return fixed if fmt.render(turns)[:fixed] == fmt.render(turns[: first + 1])[:fixed] else 0


def _accepted(attempt: Step, calls: list[dict[str, Any]], streamed: bool = False) -> None:
    """Note on ``attempt`` the calls of it the client got (``streamed``: each as soon as it was complete)."""
    if calls:
        attempt.extra["accepted"] = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in calls]
        if streamed:
            attempt.extra["streamed"] = True


def _unsent(attempt: Step, feedback: str) -> None:
    """Note the feedback on a reply that was not sent back (the repairs were spent, or max_tokens cut it)."""
    attempt.observations.append(feedback)
    attempt.extra["feedback_sent"] = False


def _committed(out: Answer, failures: list[str], parse_feedback: str | None) -> str | None:
    """The feedback on a reply once the client has calls (``out.calls``): the calls of the reply
    that failed and why (``failures``), or why it did not parse, and which calls were accepted;
    None when nothing failed (an answer or nothing more is no failure: the calls are the answer)."""
    problems = [*failures, *([parse_feedback] if parse_feedback else [])]
    if not problems:
        return None
    accepted = "; ".join(f"{c['name']} {c['arguments']}" for c in out.calls)
    return "\n".join(
        [*problems, prompts.for_family("proxy").template("rewrite_failed.txt").substitute(accepted=accepted)]
    )


def _prefilled_answer(prefill: str, tools: Any) -> str:
    """The answer text a prefill already holds (the client has it)."""
    if not prefill:
        return ""
    try:
        reply = parse_reply(prefill, tools)
    except ParseError:
        return ""
    return reply.answer or "" if reply.is_final else ""
