"""What the proxy makes of a reply: whether it can be used, and the feedback when it cannot. The
proxy's mode (relay.py) asks, hands usable replies to the client and sends the feedback back.

A reply can be used when it parses, its calls name the request's tools with arguments valid for
their schemas, and it fits ``tool_choice`` (a call for ``required`` or a named function, none for
``none``) and, under ``response_format``, its answer is JSON of the schema. A call the client gets
is a dict: ``{"id", "name", "arguments" (a JSON string), "args" (the object)}`` (answer.Answer).
"""

from __future__ import annotations

import json
from typing import Any

from .. import prompts
from ..protocol import Reply, ToolCall, content_of
from ..tools import ToolSet
from ..tools.validation import format_path
from .answer import arguments_json, new_call_id, non_finite
from .convert import ChatRequest

__all__ = [
    "MAX_CALLS_PER_REPLY",
    "call_key",
    "committed_feedback",
    "content_for",
    "judge_call",
    "judge_calls",
    "problem",
]

MAX_CALLS_PER_REPLY = 16  # the Agent's default max_calls_per_reply


def call_key(call: dict[str, Any]) -> tuple[str, str]:
    """A call as the client would run it: the same name and arguments, whatever the order of
    their keys or the spacing of the JSON the model wrote."""
    return call["name"], json.dumps(call["args"], sort_keys=True, ensure_ascii=False, default=str)


def judge_call(call: ToolCall, tools: ToolSet) -> tuple[dict[str, Any] | None, str]:
    """One call as the client gets it (None when it is not valid), or the observation telling the
    model why not. Validated only (``ToolSet.check``): the client runs its tools."""
    outcome = tools.check(call, limit=None)
    bad = non_finite(outcome.args) if outcome.ok else None
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
        args = outcome.args
        return {"id": new_call_id(), "name": outcome.name, "args": args, "arguments": arguments_json(args)}, ""
    return None, prompts.observation(outcome.name, outcome.output, failed=True)


def problem(request: ChatRequest, reply: Reply, tools: ToolSet) -> tuple[str | None, list[dict[str, Any]]]:
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
    valid, failed = judge_calls(calls, tools, set())
    if failed:
        if len(calls) > 1:
            failed.append(prompts.for_family("proxy").template("rewrite.txt").substitute())
        return "\n".join(failed), valid
    return None, valid


def judge_calls(
    calls: list[ToolCall], tools: ToolSet, seen: set[tuple[str, str]], room: int = MAX_CALLS_PER_REPLY
) -> tuple[list[dict[str, Any]], list[str]]:
    """(the valid calls, the observations on the others) of a reply's ``calls``: a call the same
    as one in ``seen`` (sent already, or earlier in the reply) is not taken again, and at most
    ``room`` are: what MAX_CALLS_PER_REPLY leaves beside the calls already in the answer (a model
    looping on one call line wrote 38 calls, 7 of them distinct)."""
    valid: list[dict[str, Any]] = []
    failed: list[str] = []
    for call in calls:
        ok, failure = judge_call(call, tools)
        if ok is None:
            failed.append(failure)
        elif call_key(ok) not in seen and len(valid) < room:
            seen.add(call_key(ok))
            valid.append(ok)
    return valid, failed


def content_for(reply: Reply, request: ChatRequest) -> str:
    """The client's content of a usable answer: its words (no keyword of the protocol), the JSON
    under response_format."""
    text = content_of(reply)
    return request.format.check(text)[1] if request.format is not None else text


def committed_feedback(
    accepted_calls: list[dict[str, Any]], failures: list[str], parse_feedback: str | None
) -> str | None:
    """The feedback on a reply once the client has calls (``accepted_calls``): the calls of the reply
    that failed and why (``failures``), or why it did not parse, and which calls were accepted;
    None when nothing failed (an answer or nothing more is no failure: the calls are the answer)."""
    problems = [*failures, *([parse_feedback] if parse_feedback else [])]
    if not problems:
        return None
    accepted = "; ".join(f"{c['name']} {c['arguments']}" for c in accepted_calls)
    return "\n".join(
        [*problems, prompts.for_family("proxy").template("rewrite_failed.txt").substitute(accepted=accepted)]
    )
