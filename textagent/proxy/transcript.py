"""A checked chat request (``convert.parse_request``) as text-protocol turns: ``transcript``.

textagent's system prompt with the tools and the client's system text, the worked examples, user
turns, assistant ``tool_calls`` as ``TOOL:`` lines, ``tool`` messages as ``OBSERVATION`` lines.
The same conversation always gives the same turns, and a conversation that grew by a turn gives
the old turns unchanged followed by the new ones, so the upstream reuses its KV cache. The
replies the proxy returned are remembered (``ReplyMemory``) with the exact text the model wrote,
repairs included, so the next turn repeats the model's own bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import prompts
from ..protocol import ToolCall, opens_with_keyword, render_call
from .convert import ChatRequest
from .errors import ProxyError
from .memory import MessageKeys, ReplyMemory

__all__ = ["transcript"]


def _first_question(request: ChatRequest) -> str | None:
    """The content of the conversation's first user message (None: it has none)."""
    return next((m["content"] for m in request.messages if m["role"] == "user"), None)


def _assistant_text(message: Mapping[str, Any]) -> str:
    """An assistant message the proxy has no record of, as the text protocol writes it."""
    calls = message.get("tool_calls") or []
    if calls:
        lines = [message["content"].strip()] if message.get("content", "").strip() else []
        return "\n".join(lines + [render_call(ToolCall(c["name"], c["args"])) for c in calls])
    return "ANSWER: " + message.get("content", "")


def transcript(
    request: ChatRequest,
    memory: ReplyMemory | None = None,
    example_style: str = prompts.DEFAULT_EXAMPLE_STYLE,
    example_tool: str = prompts.DEFAULT_EXAMPLE_TOOL,
) -> list[dict[str, str]]:
    """The conversation as text-protocol turns (system, then user and assistant alternating,
    ending with a user turn, or with an assistant turn the model continues: a prefill), ready
    for ``ChatFormat.render``. ProxyError 400 when it cannot be one (an assistant turn before
    any user turn, or calls without their results at the end). Under ``response_format`` a
    final assistant message is the answer to write as JSON (a user turn asks for it).
    Linear in the conversation: consecutive user and tool messages are joined once, and the
    keys that look up the model's own replies are a running hash. Tools without examples of
    their own get placeholder exchanges in ``example_style`` (prompts.EXAMPLE_STYLES), showing the
    tools closest to the first user message when ``example_tool`` is "closest" (the first, so that
    every request of a conversation starts alike and the server's cache holds)."""
    turns = _opening(request, example_style, example_tool)
    names: dict[str, str] = {}
    keys = MessageKeys()
    pending: list[str] = []  # the texts of the user turn being written

    def close_user_turn() -> None:
        if pending:
            if turns[-1]["role"] == "user" and len(turns) > 1:  # never hashed: see MessageKeys
                pending.insert(0, turns.pop()["content"])
            turns.append({"role": "user", "content": "\n".join(pending)})
            pending.clear()

    seen_user = False
    for i, message in enumerate(request.messages):
        role = message["role"]
        if role == "system":
            continue
        if role == "assistant":
            if not seen_user:
                raise ProxyError(
                    400,
                    "the conversation must have a user message before the first assistant message",
                    param=f"messages[{i}]",
                )
            close_user_turn()
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["name"]
            if i == len(request.messages) - 1 and not message.get("tool_calls") and request.format is None:
                if message["content"].strip():  # a prefill: the model goes on from it
                    turns.append({"role": "assistant", "content": _prefill(message["content"])})
                continue
            remembered = memory.recall(turns, message, keys) if memory is not None else None
            turns.extend(remembered or [{"role": "assistant", "content": _assistant_text(message)}])
            continue
        if role == "user":
            text = prompts.task(message["content"])
        else:
            text = _observation(message, names, i)
        seen_user = True
        pending.append(text)
    last = request.messages[-1]
    if last["role"] == "assistant" and last.get("tool_calls"):
        raise ProxyError(
            400, "the conversation ends with tool calls: send their results as tool messages", param="messages"
        )
    if last["role"] == "assistant" and request.format is not None:  # the answer so far, to write as JSON
        pending.append(prompts.for_family("proxy").template("json_from_answer").substitute())
    close_user_turn()
    if len(turns) < 2 or turns[-1]["role"] == "system":
        raise ProxyError(400, "the conversation must hold a user message", param="messages")
    return turns


def _opening(request: ChatRequest, example_style: str, example_tool: str) -> list[dict[str, str]]:
    """The system turn (the text protocol's prompt, the client's system messages, the answer
    format asked for) and the worked examples' turns."""
    system_texts = [m["content"] for m in request.messages if m["role"] == "system" and m["content"].strip()]
    if request.format is not None:
        system_texts.append(request.format.instruction())
    system = "\n\n".join([prompts.system_prompt(request.tools), *system_texts])
    examples = prompts.worked_examples(
        request.tools, request.tools.examples or None, example_style, _first_question(request), example_tool
    )
    return [{"role": "system", "content": system}, *prompts.example_turns(examples)]


def _observation(message: Mapping[str, Any], names: Mapping[str, str], i: int) -> str:
    """A tool message (``messages[i]``) as an OBSERVATION of the call whose id it answers."""
    name = names.get(message["tool_call_id"]) or message.get("name")
    if name is None:
        raise ProxyError(
            400,
            f"the tool message answers {json.dumps(message['tool_call_id'])[:80]}, which no earlier "
            "assistant tool call has as its id",
            param=f"messages[{i}].tool_call_id",
        )
    return prompts.observation(name, message["content"])


def _prefill(content: str) -> str:
    """A final assistant message as the start of the model's reply: protocol text as it is,
    anything else as the start of its answer."""
    return content if opens_with_keyword(content) else "ANSWER: " + content
