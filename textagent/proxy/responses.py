"""``POST /v1/responses`` for function tools: OpenAI's Responses API as the Agents SDK's default
model uses it, on the same conversion and repair loop as chat completions.

A request's ``input`` (a string, or items ``message``, ``function_call``,
``function_call_output``; ``reasoning`` items are skipped), ``instructions``, function
``tools``, ``tool_choice``, ``parallel_tool_calls``, ``text.format``, ``max_output_tokens``,
``temperature``, ``top_p`` and ``stream`` are read as the chat request they amount to; the answer
is a ``response`` object whose ``output`` holds a ``message`` item or ``function_call`` items,
or, streamed, the Responses events (``response.created`` ... ``response.completed``). The proxy
keeps no responses: ``previous_response_id`` and ``conversation`` are refused (400)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from .answer import Answer
from .convert import ChatRequest, parse_request
from .errors import ProxyError
from .streaming import dump

__all__ = ["ResponsesShape", "parse_responses", "response_object"]

_TEXT_PARTS = ("input_text", "output_text", "text")


def _bad(message: str, param: str | None = None) -> ProxyError:
    return ProxyError(400, message, param=param)


def _parts(content: Any, where: str) -> Any:
    """A Responses content (a string or parts) as chat content."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _bad("content must be a string or a list of input_text parts", where)
    out = []
    for i, part in enumerate(content):
        if (
            not isinstance(part, Mapping)
            or part.get("type") not in _TEXT_PARTS
            or not isinstance(part.get("text"), str)
        ):
            raise _bad("only text content parts are supported (input_text, output_text)", f"{where}[{i}]")
        out.append({"type": "text", "text": part["text"]})
    return out


class _Origins:
    """Where each chat message (and each of its tool calls) came from in the Responses body, so
    an error names the Responses parameter (``input[0].role``), not the chat one."""

    def __init__(self) -> None:
        self.messages: dict[int, str] = {}
        self.calls: dict[tuple[int, int], str] = {}

    def translate(self, text: str) -> str:
        def call(m: re.Match[str]) -> str:
            where = self.calls.get((int(m.group(1)), int(m.group(2))))
            if where is None:
                return m.group(0)
            return where + {"function.name": ".name", "function.arguments": ".arguments", "id": ".call_id"}.get(
                (m.group(3) or "").lstrip("."), m.group(3) or ""
            )

        text = re.sub(r"messages\[(\d+)\]\.tool_calls\[(\d+)\]((?:\.[\w.]+)?)", call, text)
        text = re.sub(r"messages\[(\d+)\]", lambda m: self.messages.get(int(m.group(1)), m.group(0)), text)
        text = re.sub(r"response_format\.json_schema", "text.format", text)
        text = re.sub(r"\bresponse_format\b", "text.format", text)
        text = re.sub(r"tools\[(\d+)\]\.function\b", r"tools[\1]", text)
        # a Responses tool_choice names its function at the top: {"type": "function", "name": ...}
        text = text.replace("tool_choice.function.name", "tool_choice.name")
        text = text.replace('"function": {"name": ...}}', '"name": ...}')
        text = re.sub(r"'messages'|^messages$", lambda m: m.group(0).replace("messages", "input"), text)
        return re.sub(r"\bmax_tokens\b", "max_output_tokens", text)


def _messages(body: Mapping[str, Any], origins: _Origins | None = None) -> list[dict[str, Any]]:
    origins = origins or _Origins()
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _bad("'input' must be a string or a non-empty list of items", "input")
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"].strip():
        origins.messages[len(messages)] = "instructions"
        messages.append({"role": "system", "content": body["instructions"]})
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise _bad("each input item must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            origins.messages[len(messages)] = where
            messages.append({"role": item.get("role"), "content": _parts(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise _bad("a function_call item needs 'call_id' and 'name'", where)
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and (last.get("tool_calls") or not last["content"]):
                last.setdefault("tool_calls", []).append(call)  # the calls of one turn, together
            else:
                origins.messages[len(messages)] = where
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            origins.calls[(len(messages) - 1, len(messages[-1]["tool_calls"]) - 1)] = where
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise _bad("a function_call_output item needs the 'call_id' it answers", where)
            output = item.get("output")
            origins.messages[len(messages)] = where
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item["call_id"],
                    "content": output if isinstance(output, str) else _parts(output, f"{where}.output"),
                }
            )
        elif kind == "reasoning":
            continue  # a reasoning model's notes: nothing the text protocol has a turn for
        else:
            raise _bad(
                f"input items of type {json.dumps(kind)[:40]} are not supported (message, function_call, "
                "function_call_output)",
                f"{where}.type",
            )
    return messages


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _bad("'tools' must be a list of function tools", "tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise _bad('only function tools are supported ({"type": "function", "name", "parameters"})', f"tools[{i}]")
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _format(body: Mapping[str, Any]) -> Any:
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}


def parse_responses(body: Any) -> ChatRequest:
    """The chat request a Responses body amounts to; ProxyError 400 names what is wrong."""
    if not isinstance(body, Mapping):
        raise _bad("the request body must be a JSON object")
    for key in ("previous_response_id", "conversation"):
        if body.get(key) is not None:
            raise _bad(
                f"'{key}' is not supported: the proxy keeps no responses; send the whole conversation as 'input'", key
            )
    origins = _Origins()
    chat: dict[str, Any] = {
        "messages": _messages(body, origins),
        "tools": _tools(body),
        "tool_choice": _tool_choice(body.get("tool_choice")),
        "response_format": _format(body),
    }
    for key in ("model", "temperature", "top_p", "parallel_tool_calls", "stream", "top_logprobs"):
        if key in body:
            chat[key] = body[key]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    try:
        request = parse_request({k: v for k, v in chat.items() if v is not None})
    except ProxyError as exc:  # named as the Responses body has it
        raise ProxyError(
            exc.status,
            origins.translate(exc.message),
            code=exc.code,
            param=None if exc.param is None else origins.translate(exc.param),
        ) from None
    request.include_usage = True
    request.echo = {
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "max_output_tokens": body.get("max_output_tokens"),
        "text": body.get("text") or {"format": {"type": "text"}},
    }
    return request


def _usage(answer: Answer) -> dict[str, Any]:
    prompt, completion = answer.usage.prompt_tokens or 0, answer.usage.completion_tokens or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": answer.usage.prompt_cached or 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _message_item(id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": id, "status": status, "role": "assistant", "content": content}


def _call_item(call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_" + call["id"].removeprefix("call_"),
        "call_id": call["id"],
        "name": call["name"],
        "arguments": call["arguments"] if status == "completed" else "",
        "status": status,
    }


def response_object(
    answer: Answer | None, *, id: str, model: str, request: ChatRequest, created: int, message_id: str
) -> dict[str, Any]:
    """The ``response`` object: ``in_progress`` with no output while ``answer`` is None."""
    out: dict[str, Any] = {
        "id": id,
        "object": "response",
        "created_at": created,
        "model": model,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "output": [],
        "usage": None,
        "store": False,
        "truncation": "disabled",
        **request.echo,
    }
    if answer is None:
        return out
    if answer.calls:
        out["output"] = [_call_item(call) for call in answer.calls]
    else:
        out["output"] = [_message_item(message_id, answer.content or "")]
    out["usage"] = _usage(answer)
    if answer.finish_reason == "length":
        out.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    else:
        out.update(status="completed", completed_at=int(time.time()))
    return out


class _Events:
    """The Responses events of one streamed answer (see streaming.EventStream for the calls):
    each ``function_call`` item as soon as the call is known valid, the rest at the end."""

    def __init__(self, *, id: str, model: str, request: ChatRequest):
        self.id, self.model, self.request = id, model, request
        self.created = int(time.time())
        self.message_id = "msg_" + uuid.uuid4().hex[:24]
        self.sequence = 0
        self.text = ""
        self.message = False
        self.calls = 0  # function_call items sent

    def event(self, kind: str, **data: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + dump(data) + b"\n\n"

    def response(self, answer: Answer | None) -> dict[str, Any]:
        return response_object(
            answer, id=self.id, model=self.model, request=self.request, created=self.created, message_id=self.message_id
        )

    def start(self, content: bool) -> list[bytes]:
        out = [
            self.event("response.created", response=self.response(None)),
            self.event("response.in_progress", response=self.response(None)),
        ]
        if content:
            self.message = True
            out += [
                self.event(
                    "response.output_item.added", output_index=0, item=_message_item(self.message_id, "", "in_progress")
                ),
                self.event(
                    "response.content_part.added",
                    item_id=self.message_id,
                    output_index=0,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                ),
            ]
        return out

    def content(self, piece: str) -> list[bytes]:
        self.text += piece
        return [
            self.event(
                "response.output_text.delta",
                item_id=self.message_id,
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        ]

    def call(self, call: dict[str, Any]) -> list[bytes]:
        """One ``function_call`` item, whole: added, its arguments, done."""
        index, self.calls = self.calls, self.calls + 1
        item = _call_item(call)
        return [
            self.event("response.output_item.added", output_index=index, item=_call_item(call, "in_progress")),
            self.event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=call["arguments"],
            ),
            self.event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=call["name"],
                arguments=call["arguments"],
            ),
            self.event("response.output_item.done", output_index=index, item=item),
        ]

    def end(self, answer: Answer) -> list[bytes]:
        out = []
        if self.message:
            text = answer.content or self.text
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            out += [
                self.event(
                    "response.output_text.done",
                    item_id=self.message_id,
                    output_index=0,
                    content_index=0,
                    text=text,
                    logprobs=[],
                ),
                self.event(
                    "response.content_part.done", item_id=self.message_id, output_index=0, content_index=0, part=part
                ),
                self.event("response.output_item.done", output_index=0, item=_message_item(self.message_id, text)),
            ]
        for call in answer.calls[self.calls :]:  # those not sent yet
            out += self.call(call)
        kind = "response.incomplete" if answer.finish_reason == "length" else "response.completed"
        return [*out, self.event(kind, response=self.response(answer))]

    def error(self, body: dict[str, Any]) -> list[bytes]:
        error = body.get("error", {})
        return [self.event("error", code=error.get("code"), message=error.get("message"), param=error.get("param"))]


class ResponsesShape:
    """The answer as a ``response`` object, or streamed as Responses events."""

    @staticmethod
    def complete(result: Answer, *, id: str, model: str, request: ChatRequest) -> dict[str, Any]:
        return response_object(
            result,
            id=id,
            model=model,
            request=request,
            created=int(time.time()),
            message_id="msg_" + uuid.uuid4().hex[:24],
        )

    @staticmethod
    def writer(*, id: str, model: str, request: ChatRequest) -> _Events:
        return _Events(id=id, model=model, request=request)
