"""``mode="text"``: free generation in the text protocol, parsed, with feedback on format errors.

The conversation is one growing prompt string (``conversation.prompt``) that is only ever appended to,
so llama.cpp reuses its KV cache for everything but the newest turn.

With a streaming backend (``Agent(..., stream=True)``) the reply is watched as it arrives and
the stream is closed once complete calls are followed by a line that neither extends them nor
starts another call (see :class:`EarlyStop`): independent calls still come in one reply, and no
tokens are spent on what would be thrown away (invented observations, an answer written before
the results), also where a server does not honour ``stop``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .. import prompts
from ..backends.base import Completion
from ..prompts import Worked
from ..protocol import ParseError, Reply, ToolCall, parse_reply
from ..protocol.stream import CutHere, ReplyStream, complete_calls
from ..steps import EarlyStopFacts, Note, Step, TextFacts
from ..tools import Tool, ToolOutcome, ToolSet
from .base import Conversation, FormatError, ModeContext, Needs, complete, fixed_part

__all__ = ["EarlyStop", "EarlyStopFacts", "TextExchange", "TextFacts", "TextMode", "complete_calls"]

# Failures the model can fix by writing the call again; the observation says so.
RETRYABLE = frozenset({"unknown_tool", "bad_arguments"})


class EarlyStop:
    """The ``on_text`` callback of a streamed reply: True (close the stream) once the text holds
    complete calls followed by a line that does not start another call (protocol.stream's
    ReplyStream says where: CutHere after "calls"); ``cut`` is where the kept text ends (just
    after the calls' last line break). The reply is read once, in time linear in its length,
    also when the model repeats one call line for ever."""

    def __init__(self, tools: Any = None):
        self.stream = ReplyStream(tools)
        self.cut: int | None = None

    def __call__(self, text: str) -> bool:
        if self.cut is None:
            for event in self.stream.feed(text):
                if isinstance(event, CutHere):
                    self.cut = event.at
        return self.cut is not None


class TextExchange:
    """The text protocol's asking, reading and writing, without running a call: the model writes
    ``TOOL: name ARGS: {...}`` lines or ``ANSWER: ...``. :class:`TextMode` runs the calls too;
    the proxy's mode (proxy.relay) hands them to its client."""

    name = "text"
    needs = Needs()
    prompts = prompts.for_family("text")
    grammar: str | None = None  # the GBNF the reply is held to (constrained mode, the proxy's)

    def __init__(self) -> None:
        self.conversation = Conversation()

    def setup(self, ctx: ModeContext) -> None:
        self.ctx = ctx

    @property
    def system_prompt(self) -> str:
        """The system prompt a conversation starts with: the tools as they are now."""
        ctx = self.ctx
        return ctx.system_prompt if ctx.system_prompt is not None else prompts.system_prompt(ctx.tools)

    def start(self, task: str, examples: Sequence[Worked]) -> None:
        messages = [
            {"role": "system", "content": self.system_prompt},
            *prompts.example_turns(examples),
            {"role": "user", "content": prompts.task(task)},
        ]
        fmt = self.ctx.format
        self.conversation = Conversation(messages, fmt.render(messages), fixed_part(fmt, messages))

    def set_tools(self, tools: ToolSet) -> None:
        self.ctx = replace(self.ctx, tools=tools)

    def follow(self, task: str, added: Sequence[Tool]) -> None:
        """A follow-up question, after the tools added since the last one (listed as the
        system prompt lists tools: the system prompt itself is never rewritten)."""
        text = prompts.task(task)
        if added:
            text = self.prompts.render("new_tools", tools=prompts.tool_listing(added)) + "\n\n" + text
        conv = self.conversation
        if conv.messages and conv.messages[-1]["role"] != "assistant":
            # the last question ended without an answer (a limit): its turn is closed, so the
            # roles keep alternating (chat templates that require it refuse the request otherwise)
            closing = self.prompts.render("unanswered").strip()
            conv.prompt += self.ctx.format.escape(closing)
            conv.messages.append({"role": "assistant", "content": closing})
        conv.prompt += self.ctx.format.follow_up(text)
        conv.messages.append({"role": "user", "content": text})

    # -- asking ---------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """The stop words: the chat format's end of turn, and ``OBSERVATION`` unless a grammar
        rules it out (as a stop string it could then only cut a reply inside a JSON string or
        the answer)."""
        return [*([] if self.grammar else ["OBSERVATION"]), *self.ctx.format.stop]

    def options(self) -> dict[str, Any]:
        """The request options, with the grammar the reply is held to (None: free text)."""
        return {**self.ctx.options, "grammar": self.grammar} if self.grammar else dict(self.ctx.options)

    def query(self, step: Step, max_tokens: int) -> Completion:
        options = self.options()
        step.facts = TextFacts()
        lead = options.pop("lead", "")  # the reply's beginning, written for the model (retry's odds)
        watcher = None
        if options.get("stream") and "on_text" not in options:
            watcher = options["on_text"] = EarlyStop(self.ctx.tools)
        conv = self.conversation
        messages = self.ctx.format.escape_messages(conv.messages)  # for a chat-only backend
        if lead and options.get("on_text") is not None:  # the reply, and what a stream shows, begin with it
            shown = options["on_text"]
            options["on_text"] = lambda text: shown(lead + text)
        completion = complete(
            self.ctx, conv, stop=self.stop(), max_tokens=max_tokens, lead=lead, messages=messages, **options
        )
        if lead:
            completion = replace(completion, text=lead + completion.text)
        if watcher is not None and completion.finish_reason == "early_stop" and watcher.cut is not None:
            text = completion.text
            step.facts.early_stop = EarlyStopFacts(watcher.cut, len(text) - watcher.cut, text[watcher.cut :])
            completion = replace(completion, text=text[: watcher.cut])
        return completion

    def can_lead(self) -> bool:
        """Whether the next reply may be begun for the model (a retry's odds): not where a grammar
        holds the reply from its first character."""
        return self.grammar is None

    def can_take_back(self) -> bool:
        """Whether the reply read last may still be kept out of the conversation (a retry's
        claims): here always; a mode that has shown it to someone already says no."""
        return True

    def _aside_options(self) -> dict[str, Any]:
        """The request options of a request asked beside the replies (a retry's): the Agent's,
        without a stream, a grammar or a lead, which are the reply's own."""
        return {key: v for key, v in self.options().items() if key not in ("stream", "on_text", "grammar", "lead")}

    def first_tokens(self, k: int) -> Completion:
        """The next reply's likeliest first tokens (``Completion.top_tokens``, ``k`` of them) on a
        backend with ``token_probs``, asked before the reply: one token generated, not streamed
        and held to no grammar; the server keeps the prompt's cache for the reply itself."""
        conv = self.conversation
        options = self._aside_options()
        return complete(self.ctx, conv, stop=self.stop(), max_tokens=1, stream=False, token_probs=k, **options)

    def sketch(self, lead: str, max_tokens: int) -> Completion:
        """The next reply begun with ``lead``, asked and not written (a retry's verify reads the
        call the lead would bring): not streamed and held to no grammar; the text after ``lead``."""
        options, conv = self._aside_options(), self.conversation
        return complete(self.ctx, conv, stop=self.stop(), max_tokens=max_tokens, lead=lead, stream=False, **options)

    def judge_tokens(self, system: str, question: str, k: int) -> Completion:
        """The ``k`` likeliest first tokens of the model's answer to a question of its own, outside
        the conversation (``system`` and ``question`` in the chat format; a retry's verify)."""
        options, prompt = self._aside_options(), self.ctx.format.start(system, question)
        return self.ctx.backend.complete(
            prompt, stop=list(self.ctx.format.stop), max_tokens=1, stream=False, token_probs=k, **options
        )

    # -- reading --------------------------------------------------------------------------------
    def parse(self, completion: Completion, step: Step) -> Reply:
        try:
            reply = parse_reply(completion.text, self.ctx.tools, strict=self.ctx.strict)
        except ParseError as err:
            cut = prompts.cut_feedback(completion.text, err) if completion.finish_reason == "length" else None
            raise FormatError(prompts.feedback(cut or prompts.parse_feedback(err, self.ctx.tools)), err) from None
        if reply.is_final and not (reply.answer or "").strip():
            raise FormatError(prompts.feedback(self.prompts.render("empty_reply")))
        return reply

    # -- writing the conversation ---------------------------------------------------------------
    def reject(self, step: Step, feedback: str) -> None:
        self._append(step, step.raw, [feedback])

    def answer(self, step: Step) -> None:
        self._append(step, kept_text(step), None)

    def _append(self, step: Step, reply_text: str, observations: list[str] | None) -> None:
        """Extend the transcript; earlier text is never re-rendered (KV-cache reuse relies on it).
        The format escapes every content it writes (templates.neutralize), the reply too."""
        conv, fmt = self.conversation, self.ctx.format
        conv.prompt += fmt.escape(reply_text)
        conv.messages.append({"role": "assistant", "content": reply_text})
        if observations is not None:
            user_text = "\n".join(observations)
            conv.prompt += fmt.follow_up(user_text)
            conv.messages.append({"role": "user", "content": user_text})
        step.observations = observations or []

    def transcript(self) -> str:
        return self.conversation.prompt


class TextMode(TextExchange):
    """``mode="text"``: the text protocol, and the calls run here (the tool set's own execution)."""

    def execute(self, step: Step, index: int, call: ToolCall, timeout: float | None) -> ToolOutcome:
        return self.ctx.tools.execute(call, timeout=timeout, limit=self.ctx.observation_limit)

    def observe(self, step: Step, notes: Sequence[Note]) -> None:
        observations = [prompts.observation(o.name, o.output, failed=o.error in RETRYABLE) for o in step.outcomes]
        for note in notes:
            if note.outcome is not None and note.outcome < len(observations):
                observations[note.outcome] += "\n" + note.text
            else:
                observations.append(note.text)
        self._append(step, kept_text(step), observations)


def kept_text(step: Step) -> str:
    """The reply up to a self-written observation: the invented part never enters the transcript."""
    reply = step.reply
    if reply is None or reply.truncated_at is None:
        return step.raw
    # lines as the parser counts them: split at "\n" only (not at \r, \x1c, \u2028 ...)
    return "".join(line + "\n" for line in step.raw.split("\n")[: reply.truncated_at - 1])
