"""The repair loop: ask the upstream, read the reply with the text protocol, and send a reply
that cannot be used back to the model with textagent's feedback, up to ``max_repairs`` times.

A reply can be used when it parses, its calls name the request's tools with arguments valid
for their schemas, and it fits ``tool_choice`` (a call for ``required`` or a named function,
none for ``none``). What the client gets is a list of valid calls or a plain message; when the
repairs run out it gets the valid calls of the last reply, else its text.
"""
from __future__ import annotations

import json
import math
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..steps import Step
from ..backends.base import Usage
from ..gbnf import reply_grammar
from ..modes.text import EarlyStop, _kept
from ..protocol import ParseError, Reply, parse_reply
from ..tools import ToolSet
from ..tools.validation import _format_path
from .convert import ChatRequest
from .errors import Cancelled
from .upstream import Upstream

__all__ = ["Cancelled", "Answer", "answer", "grammar_for", "arguments_json"]

DEFAULT_REPLY_TOKENS = 1024
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Answer:
    content: str | None
    calls: list[dict[str, Any]]         # {"id", "name", "arguments" (a JSON string), "args" (the object)}
    finish_reason: str                  # tool_calls | stop | length
    usage: Usage = field(default_factory=Usage)
    repairs: int = 0
    attempts: list[dict[str, Any]] = field(default_factory=list)   # for the trace
    turns: list[dict[str, str]] = field(default_factory=list)      # what the model wrote, repairs included

    def message(self) -> dict[str, Any]:
        """The assistant message of the response."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.calls:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for c in self.calls]
        return message


def grammar_for(request: ChatRequest, constrained: bool) -> str | None:
    """The GBNF the reply is held to: the tools' grammar in constrained mode, and where
    ``tool_choice`` asks for it (answer only for ``none``; calls only for ``required`` or a
    named function) in either mode. None: free text."""
    max_calls = None if request.parallel else 1
    if request.tool_choice == "none":
        return reply_grammar(ToolSet())
    if request.tool_choice == "auto":
        return reply_grammar(request.tools, max_calls=max_calls) if constrained else None
    tools = request.tools.select(request.function) if request.function else request.tools
    grammar = reply_grammar(tools, max_calls=max_calls)
    head, rest = grammar.split("\n", 1)
    return head.replace("(calls | answer)", "calls") + "\n" + rest


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


def _problem(request: ChatRequest, reply: Reply, tools: ToolSet) -> tuple[str | None, list[dict[str, Any]]]:
    """Feedback for the model when the reply cannot be used (else None), and its valid calls."""
    if reply.is_final:
        answer = reply.answer if reply.answer is not None else reply.thought.strip()
        if request.tool_choice in ("required", "function"):
            return prompts.feedback(prompts.for_family("proxy").template("call_required.txt").substitute(
                tools=", ".join(tools))), []
        if not answer.strip():
            return prompts.feedback(prompts.template("empty_reply.txt").substitute()), []
        return None, []
    if request.tool_choice == "none":
        return prompts.feedback(prompts.for_family("proxy").template("no_call.txt").substitute()), []
    calls = reply.calls if request.parallel else reply.calls[:1]
    valid, failed = [], []
    for call in calls:
        outcome = tools.execute(call, timeout=10, limit=None)
        bad = _not_finite(outcome.args) if outcome.ok else None
        if bad is not None:   # valid for the schema, but the client must get JSON
            path, number = bad
            at = prompts.template("arg_at.txt").substitute(path=_format_path(path)) if path else ""
            problem = prompts.for_family("proxy").template("arg_not_json").substitute(at=at, value=json.dumps(number))
            failed.append(prompts.observation(outcome.name, prompts.template("tool_bad_arguments.txt").substitute(
                error=problem, usage=tools[outcome.name].signature()), failed=True))
        elif outcome.ok:
            valid.append({"id": _new_id(), "name": outcome.name, "args": outcome.args,
                          "arguments": arguments_json(outcome.args)})
        else:
            failed.append(prompts.observation(outcome.name, outcome.output, failed=True))
    if failed:
        if len(calls) > 1:
            failed.append(prompts.for_family("proxy").template("rewrite.txt").substitute())
        return "\n".join(failed), valid
    return None, valid


def answer(upstream: Upstream, request: ChatRequest, turns: list[dict[str, str]], *, constrained: bool,
           max_repairs: int, slot: int, cancelled: threading.Event) -> Answer:
    """Ask until the reply can be used or ``max_repairs`` repairs are spent. Raises Cancelled
    when ``cancelled`` is set (the stream to the upstream is closed at its next token) and
    BackendError when the upstream fails."""
    tools = request.tools.select(request.function) if request.function else request.tools
    grammar = grammar_for(request, constrained) if upstream.takes_grammar else None
    stop = [*([] if grammar else ["OBSERVATION"]), *upstream.format.stop, *request.stop]
    options: dict[str, Any] = {**upstream.options(slot), "stream": True}
    if grammar:
        options["grammar"] = grammar
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.seed is not None:
        options["seed"] = request.seed
    written: list[dict[str, str]] = []
    out = Answer(None, [], "stop")
    while True:
        if cancelled.is_set():   # the client went away: nothing more is sent upstream
            raise Cancelled()
        watcher = EarlyStop(tools)
        prompt = upstream.format.render([*turns, *written])
        completion = upstream.backend.complete(
            prompt, stop=stop, max_tokens=request.max_tokens or DEFAULT_REPLY_TOKENS,
            on_text=lambda text: cancelled.is_set() or watcher(text), **options)
        if cancelled.is_set():
            raise Cancelled()
        text = completion.text
        if completion.finish_reason == "early_stop" and watcher.cut is not None:
            text = text[:watcher.cut]
        out.usage += completion.usage
        attempt: dict[str, Any] = {"raw": completion.text, "finish_reason": completion.finish_reason}
        out.attempts.append(attempt)
        length = completion.finish_reason == "length"
        try:
            reply = parse_reply(text, tools)
        except ParseError as err:
            reply, feedback, valid = None, prompts.feedback(err.feedback(tools)), []
            attempt["parse_error"] = err.message
        else:
            feedback, valid = _problem(request, reply, tools)
        kept = _kept(Step(0, text, reply=reply))
        if feedback is None:
            written.append({"role": "assistant", "content": kept})
            out.turns = written
            if valid:
                out.calls, out.finish_reason = valid, "tool_calls"
            else:
                out.content = reply.answer if reply.answer is not None else reply.thought.strip()
                out.finish_reason = "length" if length else "stop"
            return out
        attempt["feedback"] = feedback
        if length or out.repairs >= max_repairs:
            # a reply cut by max_tokens is not asked again with the same budget
            out.turns = [*written, {"role": "assistant", "content": kept}]
            if valid:
                out.calls, out.finish_reason = valid, "tool_calls"
            else:
                out.content, out.finish_reason = text, "length" if length else "stop"
            return out
        written += [{"role": "assistant", "content": kept}, {"role": "user", "content": feedback}]
        out.repairs += 1
