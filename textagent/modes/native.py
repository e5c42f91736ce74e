"""``mode="native"``: the server's own function calling, for comparison with the text modes.

Each step is one ``POST /v1/chat/completions`` with ``tools`` (``ToolSet.to_openai()``) and
``tool_choice: "auto"``. The assistant's ``tool_calls`` are run and answered with ``role: "tool"``
messages carrying their ``tool_call_id``; a reply without tool calls is the final answer. The
limits, stop reasons, Step/Result/trace format and usage accounting are the other modes'.

Every step records in ``step.facts`` (NativeFacts) what the server returned: ``native`` is ``"tool_calls"``
or ``"content"``; when the content holds something that looks like a call (JSON with a tool
name, a fenced JSON block of arguments, ``<tool_call>`` tags, ``TOOL:`` lines) the step records
a **native decode failure** (``decode_failure``: its kind; ``content_calls``: what it held).
Native mode does not repair it: the content is the final answer, as it would be for any
function-calling client. ``mode="native+fallback"`` reads such content with the text parser
instead, runs the calls, and records ``fallback=True``.

Arguments that are not a JSON object (a broken JSON string) become an error observation for
that call; the others in the same reply still run.

Needs a backend with ``chat(messages, tools=..., tool_choice=..., max_tokens=...)``, i.e.
ChatAsTextBackend. Given a LlamaCppBackend, the mode talks to the same server's chat endpoint
(llama-server must run with ``--jinja``; ``textagent serve`` and LocalServer do).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .. import prompts
from ..backends.base import Completion
from ..errors import ModeNotSupported
from ..prompts import Worked
from ..protocol import ParseError, Reply, ToolCall, has_call_line, parse_reply, render_call
from ..steps import NativeFacts, Note, Step
from ..tools import ToolOutcome, ToolSet
from .base import Conversation, FormatError, ModeContext, Needs
from .text import RETRYABLE

log = logging.getLogger(__name__)

__all__ = ["NativeFacts", "NativeMode", "chat_backend", "content_calls"]

_FENCE = re.compile(r"(`{3,}|~{3,})[^\n]*\n(.*?)(?:\1|\Z)", re.S)
_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_MAX_SCANS = 64  # `{` positions tried per content
# A call written as JSON that does not even decode: {"name": "...", "arguments": ...
_BROKEN_JSON_CALL = re.compile(r'\{\s*"name"\s*:\s*"[^"\n]+"\s*,\s*"(?:arguments|parameters)"\s*:')


def chat_backend(backend: Any) -> Any:
    """The backend native mode talks to: ``backend`` itself when it has ``chat()``, else the
    chat backend it offers (``chat_backend()``: llama.cpp's own chat endpoint). Raises
    ModeNotSupported otherwise."""
    if callable(getattr(backend, "chat", None)):
        return backend
    if getattr(getattr(backend, "capabilities", None), "chat", False) and callable(
        getattr(backend, "chat_backend", None)
    ):
        return backend.chat_backend()
    raise ModeNotSupported(
        f"mode='native' needs a backend with chat(messages, tools=...) such as ChatAsTextBackend(url) "
        f"(function calling on /v1/chat/completions); {type(backend).__name__} has none"
    )


# -- call-like content ----------------------------------------------------------------------------


def _json_values(text: str) -> list[Any]:
    """JSON objects and arrays in ``text`` (outermost only)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    pos = scans = 0
    while scans < _MAX_SCANS:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i != -1]
        if not starts:
            break
        i = min(starts)
        scans += 1
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            pos = i + 1
            continue
        found.append(value)
        pos = end
    return found


def _as_calls(value: Any, tools: Any) -> list[tuple[str, Any]]:
    """(name, arguments) pairs in a decoded JSON value shaped like a call, else []."""
    if isinstance(value, list):
        out = []
        for item in value:
            out.extend(_as_calls(item, tools))
        return out
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("tool_calls"), list):
        return _as_calls(value["tool_calls"], tools)
    if isinstance(value.get("function"), dict):
        return _as_calls(value["function"], tools)
    name = value.get("name")
    if isinstance(name, str):
        for key in ("arguments", "parameters", "args", "input"):
            if key in value:
                return [(name, value[key])]
        if name in tools:
            return [(name, {k: v for k, v in value.items() if k != "name"})]
        return []
    # bare arguments: exactly the parameters of one tool, all of its required ones present
    keys = set(value)
    matches = [t.name for t in tools.values() if keys and keys <= set(t.properties) and set(t.required) <= keys]
    return [(matches[0], value)] if len(matches) == 1 else []


def content_calls(content: str, tools: Any) -> tuple[str | None, list[tuple[str, Any]]]:
    """What in ``content`` looks like a tool call: ``(kind, [(name, arguments), ...])``.

    Kinds: ``"tool_call_tag"`` (JSON in ``<tool_call>`` tags), ``"fenced_json"`` (in a code
    fence), ``"json"`` (bare in the text), ``"text_protocol"`` (``TOOL:`` lines),
    ``"invalid_json"`` (``{"name": ..., "arguments": ...`` that does not decode; no calls);
    ``(None, [])`` when nothing does.
    """

    def json_calls(pieces: list[str]) -> list[tuple[str, Any]]:
        return [c for piece in pieces for value in _json_values(piece) for c in _as_calls(value, tools)]

    calls = json_calls([m.group(1) for m in _TAG.finditer(content)])
    if calls:
        return "tool_call_tag", calls
    try:
        reply = parse_reply(content, tools)
    except ParseError:
        reply = None
    if reply is not None and reply.calls:
        return "text_protocol", [(c.name, c.args) for c in reply.calls]
    if reply is None and has_call_line(content):
        return "text_protocol", []  # a TOOL line that does not even parse
    for kind, pieces in (("fenced_json", [m.group(2) for m in _FENCE.finditer(content)]), ("json", [content])):
        calls = json_calls(pieces)
        if calls:
            return kind, calls
    if _BROKEN_JSON_CALL.search(content):
        return "invalid_json", []
    return None, []


def _as_text(calls: list[tuple[str, Any]]) -> str:
    """Call-like pairs as text-protocol lines, for the text parser (native+fallback)."""
    lines = []
    for name, args in calls:
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                pass
        lines.append(render_call(ToolCall(name, args if isinstance(args, (dict, str)) else json.dumps(args))))
    return "\n".join(lines)


# -- the mode ------------------------------------------------------------------------------------


class NativeMode:
    """Function calling through the chat endpoint. ``fallback=True`` is ``native+fallback``."""

    prompts = prompts.for_family("native")
    needs = Needs(chat=True, tools=True)

    def __init__(self, *, fallback: bool = False, tool_choice: Any = "auto"):
        self.fallback, self.tool_choice = fallback, tool_choice
        self.name = "native+fallback" if fallback else "native"
        self.conversation = Conversation()

    def setup(self, ctx: ModeContext) -> None:
        self.ctx = ctx
        self.chat = chat_backend(ctx.backend)
        self.tools_json = ctx.tools.to_openai()
        self.system_prompt = ctx.system_prompt if ctx.system_prompt is not None else self.prompts.render("system")

    def start(self, task: str, examples: Sequence[Worked]) -> None:
        self.conversation = Conversation(
            [
                {"role": "system", "content": self.system_prompt},
                *_example_messages(examples),
                {"role": "user", "content": prompts.task(task)},
            ]
        )

    def set_tools(self, tools: ToolSet) -> None:
        self.ctx = replace(self.ctx, tools=tools)
        self.tools_json = tools.to_openai()

    def follow(self, task: str, added: Sequence[Any]) -> None:
        """A follow-up question; tools added since the last one are in the next request's
        ``tools``, as a function-calling client sends them."""
        messages = self.conversation.messages
        if messages and messages[-1]["role"] != "assistant":
            # the last question ended without an answer (a limit): its turn is closed, so the
            # roles keep alternating (chat templates that require it refuse the request otherwise)
            messages.append({"role": "assistant", "content": self.prompts.render("unanswered").strip()})
        messages.append({"role": "user", "content": prompts.task(task)})

    def query(self, step: Step, max_tokens: int) -> Completion:
        step.facts = NativeFacts()
        # id_slot: llama-server's chat endpoint takes it too; pinning keeps the slot's KV cache warm
        options = {
            k: self.ctx.options[k] for k in ("temperature", "seed", "id_slot") if self.ctx.options.get(k) is not None
        }
        # chat markers in the contents are broken (templates.neutralize): the server's template
        # would otherwise read a tool result's `<|im_end|>` as the end of its turn
        return self.chat.chat(
            self.ctx.format.escape_messages(self.conversation.messages),
            tools=self.tools_json or None,
            tool_choice=self.tool_choice,
            max_tokens=max_tokens,
            **options,
        )

    def parse(self, completion: Completion, step: Step) -> Reply:
        message = completion.message if isinstance(completion.message, dict) else {}
        content = completion.text or ""
        raw_calls = message.get("tool_calls") or []
        facts = _facts(step)
        facts.native = "tool_calls" if raw_calls else "content"
        if raw_calls:
            facts.tool_calls = list(raw_calls)
            calls = []
            for i, raw in enumerate(raw_calls):
                name, args, error = _read_tool_call(raw)
                call_id = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
                calls.append(ToolCall(name, args, call_id or f"call_{step.index}_{i + 1}"))
                if error is not None:
                    facts.invalid_arguments[i] = error
            return Reply(calls, None, content, [])
        kind, found = content_calls(content, self.ctx.tools)
        if kind is not None:
            facts.decode_failure = kind
            facts.content_calls = [{"name": n, "arguments": a} for n, a in found]
            if self.fallback:
                reply = self._rescue(content, kind, found, step, facts)
                if reply is not None:
                    return reply
        if not content.strip():
            raise FormatError(self.prompts.render("empty_reply"))
        return Reply([], content.strip(), content, [])

    def _rescue(
        self, content: str, kind: str, found: list[tuple[str, Any]], step: Step, facts: NativeFacts
    ) -> Reply | None:
        text = content if kind == "text_protocol" else _as_text(found)
        try:
            reply = parse_reply(text, self.ctx.tools)
        except ParseError as err:
            facts.fallback_error = str(err)
            return None
        if not reply.calls:
            return None
        log.info(
            "step %d: the server returned no tool_calls; %d call(s) read from the content (%s)",
            step.index,
            len(reply.calls),
            kind,
        )
        facts.fallback = True
        calls = [ToolCall(c.name, c.args, f"call_{step.index}_{i + 1}") for i, c in enumerate(reply.calls)]
        return Reply(calls, None, content, [])

    def execute(self, step: Step, index: int, call: ToolCall, timeout: float | None) -> ToolOutcome:
        error = _facts(step).invalid_arguments.get(index)
        if error is not None:
            tool = self.ctx.tools.get(call.name)
            usage = tool.signature() if tool is not None else ", ".join(self.ctx.tools)
            output = self.prompts.render("bad_arguments", error=error, usage=usage)
            return ToolOutcome(call.name, call.args, False, output, "bad_arguments", 0.0)
        return self.ctx.tools.execute(call, timeout=timeout, limit=self.ctx.observation_limit)

    # -- the conversation -----------------------------------------------------------------------
    def _assistant(self, step: Step) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.raw}
        facts = _facts(step)
        if step.reply is not None and any(call.id for call in step.reply.calls):
            raw_calls = facts.tool_calls
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": _arguments_text(raw_calls[i] if i < len(raw_calls) else None, call),
                    },
                }
                for i, call in enumerate(step.reply.calls)
            ]
            if facts.fallback:
                message["content"] = ""  # the calls are in tool_calls now; do not repeat them
        return message

    def observe(self, step: Step, notes: Sequence[Note]) -> None:
        messages = self.conversation.messages
        messages.append(self._assistant(step))
        calls = step.calls
        observations = []
        for i, outcome in enumerate(step.outcomes):
            text = outcome.output
            if outcome.error in RETRYABLE:
                text = self.prompts.render("tool_error", output=text)
            text = "\n".join([text, *(n.text for n in notes if n.outcome == i)])
            call_id = calls[i].id if i < len(calls) else None
            messages.append(
                {"role": "tool", "tool_call_id": call_id or f"call_{i + 1}", "name": outcome.name, "content": text}
            )
            observations.append(text)
        for note in notes:  # notes on the step as a whole: a user turn after the results
            if note.outcome is None or note.outcome >= len(step.outcomes):
                messages.append({"role": "user", "content": note.text})
                observations.append(note.text)
        step.observations = observations

    def reject(self, step: Step, feedback: str) -> None:
        self.conversation.messages.append({"role": "assistant", "content": step.raw})
        self.conversation.messages.append({"role": "user", "content": feedback})
        step.observations = [feedback]

    def answer(self, step: Step) -> None:
        self.conversation.messages.append({"role": "assistant", "content": step.raw})
        step.observations = []

    def transcript(self) -> str:
        """The conversation, one JSON message per line."""
        return "\n".join(json.dumps(m, ensure_ascii=False, default=str) for m in self.conversation.messages)


def _facts(step: Step) -> NativeFacts:
    """The step's NativeFacts (query() sets them; a step built elsewhere gets empty ones)."""
    if not isinstance(step.facts, NativeFacts):
        step.facts = NativeFacts()
    return step.facts


def _read_tool_call(raw: Any) -> tuple[str, dict[str, Any] | str, str | None]:
    """(name, args, error) of one server tool call; error when the arguments are not an object."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        return "?", {}, "the tool call has no function"
    raw_name = function.get("name")
    name = raw_name if isinstance(raw_name, str) else "?"
    arguments = function.get("arguments")
    if arguments is None or arguments == "":
        return name, {}, None
    if isinstance(arguments, dict):
        return name, arguments, None
    if not isinstance(arguments, str):
        return name, json.dumps(arguments), f"got {type(arguments).__name__}"
    try:
        value = json.loads(arguments)
    except RecursionError:
        return name, arguments, "invalid JSON: nested too deeply"
    except ValueError as err:
        return name, arguments, f"invalid JSON: {err}"
    if not isinstance(value, dict):
        return name, arguments, f"got JSON {type(value).__name__}, not an object"
    return name, value, None


def _arguments_text(raw: Any, call: ToolCall) -> str:
    """The arguments as the server sent them (a string), else the call's as JSON."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if isinstance(function, dict) and isinstance(function.get("arguments"), str):
        return function["arguments"]
    return json.dumps(call.args, ensure_ascii=False) if isinstance(call.args, dict) else str(call.args)


def _example_messages(examples: Sequence[Worked]) -> list[dict[str, Any]]:
    """The worked examples as native turns: tool_calls, tool results, the answer."""
    turns: list[dict[str, Any]] = []
    n = 0
    for worked in examples:
        turns.append({"role": "user", "content": prompts.task(worked.task)})
        for group in prompts.call_groups(worked):  # the same replies as the text modes show
            ids = [f"call_example_{n + i + 1}" for i in range(len(group))]
            n += len(group)
            turns.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(dict(args), ensure_ascii=False)},
                        }
                        for call_id, (name, args, _) in zip(ids, group)
                    ],
                }
            )
            turns += [
                {"role": "tool", "tool_call_id": call_id, "name": name, "content": result}
                for call_id, (name, _, result) in zip(ids, group)
            ]
        turns.append({"role": "assistant", "content": worked.answer})
    return turns
