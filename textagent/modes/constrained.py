"""``mode="constrained"``: the text protocol, with the server held to a GBNF grammar.

The grammar (:func:`textagent.gbnf.reply_grammar`, built once from the tool set) allows optional
``Thought:`` lines, then canonical ``TOOL: name ARGS: {...}`` lines whose arguments match each
tool's JSON schema, or one ``ANSWER:`` line. It is sent as the request's ``grammar`` field, so
every reply parses (unless it is cut short by ``reply_tokens``, or repeats a key in an object whose
keys are open, which no grammar can rule out and the parser refuses with feedback). Everything else -- prompt,
transcript, feedback, early stop when streaming -- is text mode's.

Backends that cannot take a grammar (Ollama, OpenAI-compatible backends without
``grammar_field``) are refused when the Agent is built, with ModeNotSupported.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModeNotSupported
from ..gbnf import reply_grammar
from .base import ModeContext, Needs
from .text import TextMode

__all__ = ["ConstrainedMode"]


class ConstrainedMode(TextMode):
    """Text mode plus a grammar. ``max_thoughts`` thought lines at most before the calls or the
    answer; ``max_calls`` call lines at most in one reply (None: no limit)."""

    name = "constrained"
    needs = Needs(grammar=True)

    def __init__(self, *, max_thoughts: int = 3, max_calls: int | None = None):
        super().__init__()
        self.max_thoughts, self.max_calls = max_thoughts, max_calls
        self.grammar: str | None = None  # built with the tool set (setup); stop words and options are text mode's

    def setup(self, ctx: ModeContext) -> None:
        capabilities = getattr(ctx.backend, "capabilities", None)
        # a backend that does not say (a user's own) is tried: it refuses a grammar itself
        if capabilities is not None and not capabilities.grammar:
            raise ModeNotSupported(
                f"mode='constrained' needs a backend that sends a GBNF grammar; {type(ctx.backend).__name__} "
                "cannot (use LlamaCppBackend, or an OpenAI-compatible backend with grammar_field='grammar' "
                "on llama.cpp's server; on the command line --api llamacpp or --grammar-field grammar), or choose "
                "mode='text'"
            )
        super().setup(ctx)
        self.grammar = reply_grammar(ctx.tools, max_thoughts=self.max_thoughts, max_calls=self.max_calls)

    def set_tools(self, tools: Any) -> None:
        super().set_tools(tools)
        self.grammar = reply_grammar(tools, max_thoughts=self.max_thoughts, max_calls=self.max_calls)
