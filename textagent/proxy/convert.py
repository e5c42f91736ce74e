"""OpenAI chat requests in: ``parse_request`` checks a ``/v1/chat/completions`` body (a
ProxyError 400 naming the parameter otherwise) and gives a ``ChatRequest``: its tools as a
ToolSet under names the text protocol can write, its messages, tool choice, sampling and
response format. ``proxy.transcript`` writes it as text-protocol turns.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..gbnf import reply_grammar
from ..protocol import ToolCall, render_call
from ..protocol.types import is_tool_name
from ..tools import Tool, ToolSet
from ..tools.mcp import writable_name
from ..tools.schema import deeper_than
from ..tools.validation import MAX_ARG_DEPTH
from .errors import ProxyError
from .structured import Format, parse_format

__all__ = ["ChatRequest", "TooDeep", "loads", "parse_request"]

ROLES = ("system", "developer", "user", "assistant", "tool")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


class TooDeep(ValueError):
    """JSON nested too deeply to read."""


def loads(text: str | bytes | bytearray) -> Any:
    """JSON as RFC 8259 has it: NaN, Infinity and numbers out of float range (``1e999``) are
    refused (ValueError), like any other invalid JSON; nesting deep enough for a RecursionError
    is TooDeep (a ValueError)."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise TooDeep("nested too deeply") from None


def _accept(**kwargs: Any) -> dict[str, Any]:
    """The tools' function: the proxy only validates calls, the client runs them."""
    return kwargs


@dataclass
class ChatRequest:
    messages: list[dict[str, Any]]
    tools: ToolSet
    tool_choice: str = "auto"  # auto | none | required | function
    function: str | None = None  # the named function of tool_choice
    parallel: bool = True
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    model: str = ""
    names: dict[str, str] = field(default_factory=dict)  # tool name in the text protocol -> the client's
    format: Format | None = None  # response_format: the answer is JSON (of a schema)
    sampling: dict[str, Any] = field(default_factory=dict)  # top_p, penalties, logit_bias: for the upstream
    echo: dict[str, Any] = field(default_factory=dict)  # what a Responses answer repeats of its request

    def client_name(self, name: str) -> str:
        """The client's name of a tool the model called (the text protocol writes fewer names)."""
        return self.names.get(name, name)

    @property
    def last_results(self) -> list[tuple[str, str]]:
        """The results the client sent after the model's last calls, the model's next reply's to
        answer: (tool name in the text protocol, content) of the tool messages after the last
        assistant message ("" for a name neither the message nor its call gives)."""
        at = max((i for i, m in enumerate(self.messages) if m["role"] == "assistant"), default=-1)
        calls = {c["id"]: c["name"] for c in self.messages[at].get("tool_calls", ())} if at >= 0 else {}
        return [
            (m.get("name") or calls.get(m.get("tool_call_id", ""), ""), m["content"])
            for m in self.messages[at + 1 :]
            if m["role"] == "tool"
        ]

    @property
    def called_tools(self) -> set[str]:
        """The tools (names in the text protocol) the model called earlier in the client's
        conversation: an answer may say they ran."""
        return {c["name"] for m in self.messages if m["role"] == "assistant" for c in m.get("tool_calls", ())}

    @property
    def callable_tools(self) -> ToolSet:
        """The tools a call may name: the named function of ``tool_choice``, else all."""
        return self.tools.select(self.function) if self.function else self.tools

    def not_met(self, repairs: int) -> ProxyError | None:
        """The error for this request when no reply met its demand (a call for ``tool_choice``,
        JSON for ``response_format``) after ``repairs`` repairs; None when it demands neither."""
        after = f"after {repairs} repair{'s' if repairs != 1 else ''}"
        if self.tool_choice in ("required", "function"):
            wanted = f"a call of {self.client_name(self.function)}" if self.function else "a tool call"
            return ProxyError(
                422,
                f"tool_choice asked for {wanted}; the model wrote none that is valid {after}",
                param="tool_choice",
                code="tool_choice_not_met",
            )
        if self.format is not None:
            return ProxyError(
                422,
                f"response_format asked for JSON{' of its schema' if self.format.schema else ''}; "
                f"the model's answer was not that {after}",
                param="response_format",
                code="response_format_not_met",
            )
        return None

    def grammar(self, constrained: bool) -> str | None:
        """The GBNF the reply is held to: the tools' grammar in constrained mode, and where
        ``tool_choice`` asks for it (answer only for ``none``; calls only for ``required`` or a
        named function) in either mode; an answer under ``response_format`` held to its JSON.
        None: free text."""
        max_calls = None if self.parallel else 1
        grammar: str | None
        if self.tool_choice == "none":
            grammar = reply_grammar(ToolSet())
        elif self.tool_choice == "auto":
            grammar = reply_grammar(self.tools, max_calls=max_calls) if constrained else None
        else:
            head, rest = reply_grammar(self.callable_tools, max_calls=max_calls).split("\n", 1)
            return head.replace("(calls | answer)", "calls") + "\n" + rest
        if grammar is not None and self.format is not None:
            grammar = self.format.grammar(grammar)
        return grammar


class _Names:
    """The client's tool names and the names the text protocol writes for them
    (``protocol.types.is_tool_name``): a writable name is kept, any other gets a writable one
    (``tools.mcp.writable_name``) that no other tool has."""

    def __init__(self, client_names: list[str]):
        self.taken = {n for n in client_names if is_tool_name(n)}
        self.internal: dict[str, str] = {n: n for n in self.taken}
        self.client: dict[str, str] = {}
        # per writable form, the next number to try: ``tool_2``, ``tool_3``, ... are counted from
        # where the last name of that form stopped, not from 2 for each (8,000 names took 3.5 s);
        # ``taken`` only grows, so every number below it is still taken
        self._next: dict[str, int] = {}
        for name in client_names:
            self.written(name)

    def written(self, name: str) -> str:
        if name not in self.internal:
            made = base = writable_name(name)  # its writable form, as writable_name numbers it
            n = self._next.get(base, 2)
            while made in self.taken:
                made, n = f"{base}_{n}", n + 1
            self._next[base] = n
            self.taken.add(made)
            self.internal[name], self.client[made] = made, name
        return self.internal[name]


def _bad(message: str, param: str | None = None, code: str | None = None) -> ProxyError:
    return ProxyError(400, message, param=param, code=code)


def _number(body: Mapping[str, Any], key: str, kind: type, *, low: float | None = None) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float) if kind is float else int)
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise _bad(f"'{key}' must be {'a number' if kind is float else 'an integer'}, got {_shown(value)}", key)
    if low is not None and value < low:
        raise _bad(f"'{key}' must be at least {low:g}, got {value}", key)
    return kind(value)


def _shown(value: Any, limit: int = 60) -> str:
    """A short JSON rendering of a client's value for an error message."""
    try:
        return json.dumps(value, ensure_ascii=True)[:limit]
    except (TypeError, ValueError, RecursionError):
        return type(value).__name__


def _text(content: Any, param: str) -> str:
    """A message's content as text: a string, or a list of text parts (anything else is refused,
    not dropped: the model must not answer a question it was only partly shown)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _bad("content must be a string or a list of text parts", param)
    for i, part in enumerate(content):
        if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise _bad('only text content parts are supported ({"type": "text", "text": ...})', f"{param}[{i}]")
    return "\n".join(part["text"] for part in content)


def _tools(body: Mapping[str, Any]) -> tuple[ToolSet, _Names]:
    raw = body.get("tools")
    if raw is None:
        return ToolSet(), _Names([])
    if not isinstance(raw, list):
        raise _bad("'tools' must be a list of function definitions", "tools")
    functions = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("function"), Mapping):
            raise _bad(
                'each tool must be {"type": "function", "function": {"name": ..., "parameters": {...}}}', f"tools[{i}]"
            )
        function = item["function"]
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise _bad(
                f"a tool's name must be a non-empty string, got {_shown(function.get('name'))}",
                f"tools[{i}].function.name",
                "invalid_tool_schema",
            )
        if function.get("description") is not None and not isinstance(function["description"], str):
            raise _bad(
                f"a tool's description must be a string, got {_shown(function['description'])}",
                f"tools[{i}].function.description",
                "invalid_tool_schema",
            )
        functions.append(function)
    given, seen = [f["name"] for f in functions], set()
    for name in given:
        if name in seen:
            raise _bad(f"two tools are named {_shown(name, 80)}", "tools")
        seen.add(name)
    names = _Names(given)
    tools = []
    for i, (item, function) in enumerate(zip(raw, functions)):
        written = names.written(function["name"])
        spec = dict(function, name=written)
        if written != function["name"]:  # the model reads the client's name in the description
            spec["description"] = (
                prompts.for_family("proxy")
                .template("renamed_tool")
                .substitute(description=function.get("description") or "", name=function["name"])
                .strip()
            )
        try:  # Tool checks the schema against JSON Schema's meta-schema (and its depth)
            tools.append(Tool.from_openai({**item, "function": spec}, _accept))
        except (TypeError, ValueError) as exc:
            raise _bad(str(exc), f"tools[{i}].function", "invalid_tool_schema") from None
    try:  # a name the client's schema does not take is repaired (told to the model), never dropped
        return ToolSet(tools, extra_args="error"), names
    except ValueError as exc:
        raise _bad(str(exc), "tools") from None


def _tool_choice(body: Mapping[str, Any], tools: ToolSet, names: _Names) -> tuple[str, str | None]:
    choice = body.get("tool_choice")
    if choice is None:
        return ("auto" if tools else "none"), None
    if isinstance(choice, str) and choice in ("auto", "none", "required"):
        if choice == "required" and not tools:
            raise _bad("tool_choice 'required' needs tools", "tool_choice")
        return choice, None
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        name = choice["function"].get("name")
        if not isinstance(name, str):
            raise _bad(
                f"tool_choice's function name must be a string, got {_shown(name, 80)}", "tool_choice.function.name"
            )
        if name not in names.internal or names.internal[name] not in tools:
            raise _bad(f"tool_choice names the function {_shown(name, 80)}, which is not in 'tools'", "tool_choice")
        return "function", names.internal[name]
    raise _bad(
        'tool_choice must be \'auto\', \'none\', \'required\' or {"type": "function", "function": {"name": ...}}',
        "tool_choice",
    )


def _messages(body: Mapping[str, Any], names: _Names) -> list[dict[str, Any]]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list", "messages")
    out = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise _bad("each message must be an object", where)
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"unknown role {json.dumps(role)[:40]}; roles are {', '.join(ROLES)}", f"{where}.role")
        clean: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text(message.get("content"), f"{where}.content"),
        }
        if role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            if not isinstance(calls, list):
                raise _bad("tool_calls must be a list", f"{where}.tool_calls")
            clean["tool_calls"] = [_call(call, f"{where}.tool_calls[{j}]", names) for j, call in enumerate(calls)]
        if role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise _bad("a tool message needs the tool_call_id it answers", f"{where}.tool_call_id")
            clean["tool_call_id"] = message["tool_call_id"]
            if isinstance(message.get("name"), str) and message["name"]:
                clean["name"] = names.written(message["name"])
        out.append(clean)
    return _text_histories(out, names)


# smolagents writes its calls into an assistant message's text and the results into user messages
_CALLING = re.compile(r"^Calling tools:\n(\[.*\])\s*\Z", re.M | re.S)
_OBSERVED = re.compile(r"\A(?:Call id: (\S+)\n)?(?:Observation:|(?=Error:))", re.S)


def _text_calls(text: str, names: _Names) -> tuple[str, list[dict[str, Any]]] | None:
    """The prose and the calls of an assistant text ending ``Calling tools:\n[{...}, ...]`` (a
    Python literal), or None when it is not that."""
    found = _CALLING.search(text)
    if found is None:
        return None
    try:
        items = ast.literal_eval(found.group(1))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(items, list) or not items:
        return None
    calls = []
    for j, item in enumerate(items):
        if not isinstance(item, Mapping):
            return None
        try:
            call = _call(item, "", names)
        except ProxyError:
            return None
        calls.append({**call, "id": call["id"] or f"text_call_{j}"})
    return text[: found.start()].strip(), calls


def _text_histories(messages: list[dict[str, Any]], names: _Names) -> list[dict[str, Any]]:
    """Text-serialised calls and results read as what they are: an assistant text with
    ``Calling tools: [...]`` as its tool_calls, the user ``Observation:`` (or ``Error:``) text
    after it as the tool message answering them."""
    out: list[dict[str, Any]] = []
    open_calls: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "assistant" and not message.get("tool_calls"):
            read = _text_calls(message["content"], names)
            if read is not None:
                message = {**message, "content": read[0], "tool_calls": read[1]}
                open_calls = read[1]
                out.append(message)
                continue
        if role == "user" and open_calls:
            seen = _OBSERVED.match(message["content"])
            if seen is not None:
                call = next((c for c in open_calls if c["id"] == seen.group(1)), open_calls[0])
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "name": call["name"],
                        "content": message["content"][seen.end() :].strip(),
                    }
                )
                continue
        if role != "system":
            open_calls = []
        out.append(message)
    return out


def _call(call: Any, where: str, names: _Names) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) or not function["name"]:
        raise _bad('a tool call needs {"id", "type": "function", "function": {"name", "arguments"}}', where)
    arguments = function.get("arguments") or "{}"
    try:
        args = loads(arguments) if isinstance(arguments, str) else arguments
    except TooDeep:
        args = None  # refused below, with the depth
    except ValueError:
        raise _bad(
            "the arguments of a tool call must be a JSON object as a string (RFC 8259 JSON: no NaN or Infinity)",
            f"{where}.function.arguments",
        ) from None
    if args is None or deeper_than(args, MAX_ARG_DEPTH):  # what the proxy would refuse from the model, too
        raise _bad(
            f"the arguments of a tool call are nested too deeply (more than {MAX_ARG_DEPTH} levels)",
            f"{where}.function.arguments",
        )
    if not isinstance(args, Mapping):
        raise _bad("the arguments of a tool call must be a JSON object", f"{where}.function.arguments")
    name = names.written(function["name"])
    try:
        render_call(ToolCall(name, dict(args)))
    except (ValueError, TypeError) as exc:
        raise _bad(str(exc), f"{where}.function.arguments") from None
    return {"id": str(call.get("id") or ""), "name": name, "args": dict(args)}


def _sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling fields the upstream is asked to honour (checked here; which upstream takes
    which is the upstream's business: ``Upstream.sampling``). ``logprobs`` cannot be honoured:
    the content is the model's text after the protocol's keywords, not its tokens."""
    if body.get("logprobs") not in (None, False) or body.get("top_logprobs") not in (None, 0):
        raise _bad(
            "logprobs are not available through textagent proxy: the content is read out of the model's "
            "text-protocol reply, so its tokens are not the content's",
            "logprobs",
            "unsupported_parameter",
        )
    out: dict[str, Any] = {}
    for key, low, high in (("top_p", 0, 1), ("frequency_penalty", -2, 2), ("presence_penalty", -2, 2)):
        value = _number(body, key, float, low=low)
        if value is not None:
            if value > high:
                raise _bad(f"'{key}' must be at most {high}, got {value}", key)
            out[key] = value
    bias = body.get("logit_bias")
    if bias is not None:
        if not isinstance(bias, Mapping) or not all(
            isinstance(k, str)
            and k.isdigit()
            and isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and -100 <= v <= 100
            for k, v in bias.items()
        ):
            raise _bad("'logit_bias' must map token ids (strings of digits) to numbers from -100 to 100", "logit_bias")
        if bias:
            out["logit_bias"] = dict(bias)
    return out


def parse_request(body: Any) -> ChatRequest:
    """Check a chat completions body; ProxyError(400) names what is wrong."""
    if not isinstance(body, Mapping):
        raise _bad("the request body must be a JSON object")
    n = _number(body, "n", int)
    if n is not None and n != 1:
        raise _bad("only n=1 is supported", "n")
    tools, names = _tools(body)
    choice, function = _tool_choice(body, tools, names)
    messages = _messages(body, names)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)):
        raise _bad("'stop' must be a string or a list of non-empty strings", "stop")
    max_tokens = _number(body, "max_completion_tokens", int, low=1)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", int, low=1)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, Mapping):
        raise _bad("'stream_options' must be an object", "stream_options")
    return ChatRequest(
        format=parse_format(body.get("response_format")),
        sampling=_sampling(body),
        messages=messages,
        tools=tools,
        tool_choice=choice,
        function=function,
        parallel=body.get("parallel_tool_calls") is not False,
        temperature=_number(body, "temperature", float, low=0),
        max_tokens=max_tokens,
        stop=list(stop or []),
        seed=_number(body, "seed", int),
        stream=body.get("stream") is True,
        include_usage=stream_options.get("include_usage") is True,
        model=body["model"] if isinstance(body.get("model"), str) else "",
        names=dict(names.client),
    )
