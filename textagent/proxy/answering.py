"""One request on the Agent's loop: the proxy's mode (relay.RelayMode) for the client's
conversation, an Agent whose format-error budget is the repair budget, and the client's Answer of
how the run ended."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..agent import Agent
from ..retry import Retry
from .answer import Answer
from .convert import ChatRequest
from .relay import RelayMode
from .upstream import Upstream

__all__ = ["DEFAULT_REPLY_TOKENS", "answer"]

DEFAULT_REPLY_TOKENS = 1024


def answer(
    upstream: Upstream,
    request: ChatRequest,
    turns: list[dict[str, str]],
    *,
    constrained: bool,
    max_repairs: int,
    slot: int,
    retry: Retry | None = None,
    cancelled: threading.Event,
    on_content: Callable[[str, int], Any] | None = None,
    on_call: Callable[[dict[str, Any], int], Any] | None = None,
) -> Answer:
    """Ask until the reply can be used or ``max_repairs`` repairs are spent, on the Agent's loop.
    A conversation ending with an assistant turn is a prefill: the first reply continues it, and
    the content is what the model added to it. ``on_content(piece, repairs)`` gets the answer's
    content in pieces, some while the model writes it; ``on_call(call, repairs)`` each valid call
    as soon as its line is complete: such a call stays in the answer, and a later call that fails
    goes back to the model alone. Raises Cancelled when ``cancelled`` is set (the stream to the
    upstream is closed at its next token), BackendError when the upstream fails, ModelFailed
    when ``tool_choice`` or ``response_format`` cannot be met."""
    grammar = request.grammar(constrained) if upstream.takes_grammar else None
    mode = RelayMode(request, turns, grammar=grammar, cancelled=cancelled, on_content=on_content, on_call=on_call)
    chosen = {"temperature": request.temperature, "seed": request.seed}
    options = {**upstream.options(slot), **{k: v for k, v in chosen.items() if v is not None}}
    agent = Agent(
        upstream.backend_for(request.sampling),
        request.callable_tools,
        mode=mode,
        max_steps=max_repairs + 1,
        max_format_errors=max_repairs + 1,  # the repair budget
        reply_tokens=request.max_tokens or DEFAULT_REPLY_TOKENS,
        chat_format=upstream.format,
        example=None,
        max_calls_per_reply=None,  # the mode collapses repeats and caps the calls itself
        retry=retry,
        **options,
    )
    return mode.ended(agent.run(turns[-1]["content"] or "(the client's conversation)"))
