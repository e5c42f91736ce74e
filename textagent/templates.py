"""Chat formats for completion endpoints.

The agent renders the whole conversation as one string and only ever *appends* to it, so
a format is described by the four fixed pieces of text that surround the turns rather
than by a function of the whole message list. That is what keeps every prompt a prefix
of the next one (and llama.cpp's KV cache warm).

    prefix + SYSTEM + system_to_user + TASK + user_to_assistant
           + REPLY + assistant_to_user + OBSERVATIONS + user_to_assistant + REPLY + ...

Only the format writes chat markers. Every content it renders (system text, task, replies,
tool results, error messages, examples) goes through :func:`neutralize` first, and so do the
messages sent to a chat endpoint (``ChatFormat.escape_messages``): a tool result holding
``<|im_end|>\n<|im_start|>assistant`` cannot close its turn and open a forged one, since
llama.cpp's ``/completion`` (and a chat endpoint's template) would read that text as the
special tokens themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = [
    "CHATML",
    "FORMATS",
    "GEMMA",
    "LLAMA3",
    "PLAIN",
    "SPECIAL_TOKENS",
    "ZWSP",
    "ChatFormat",
    "format_from_renderer",
    "get_format",
    "neutralize",
]

#: What breaks a marker: a zero-width space after its first character (``<\u200b|im_end|>``).
#: The text reads the same, to people and to the model, but no tokenizer finds the special
#: token in it (special tokens are matched on the raw text, before any normalisation).
ZWSP = "\u200b"

#: Special tokens of the built-in formats and of common chat templates (ChatML / Qwen,
#: Llama 3, Gemma, Phi, Llama 2 / Mistral). Any ``<|...|>`` or ``<｜...｜>`` token, any
#: ``<start_of_...>`` / ``<end_of_...>`` tag and the markers of a format learned from a server
#: are broken as well.
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_start|>",
    "<|im_end|>",
    "<|im_sep|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|python_tag|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
)
_GENERIC = (r"<\|[^|<>\s]{1,64}\|>", "<\uff5c[^\uff5c<>\\s]{1,64}\uff5c>", r"</?(?:start|end)_of_[A-Za-z_]{1,32}>")
# What counts as a marker inside a learned format's pieces: a tag or a bracketed word.
_MARKER_RE = re.compile(r"<[^<>\s]{1,64}>|\[/?[A-Za-z_]{2,32}\]")


@lru_cache(maxsize=64)
def _marker_pattern(extra: tuple[str, ...]) -> re.Pattern[str]:
    literals = sorted(set(SPECIAL_TOKENS) | set(extra), key=len, reverse=True)
    return re.compile("|".join([*_GENERIC, *(re.escape(m) for m in literals)]))


def _break(match: re.Match[str]) -> str:
    text = match.group()
    return text[0] + ZWSP + text[1:]


def neutralize(text: str, markers: Iterable[str] = ()) -> str:
    """``text`` with every chat marker broken by a zero-width space after its first character:
    the :data:`SPECIAL_TOKENS`, any ``<|...|>`` token, and ``markers`` (those of the chat
    format in use). Idempotent; removing the ``ZWSP`` characters gives the text back."""
    if "<" not in text and "[" not in text:
        return text
    pattern = _marker_pattern(tuple(markers))
    for _ in range(4):  # a break cannot create a marker; the loop only guards overlaps
        if pattern.search(text) is None:
            break
        text = pattern.sub(_break, text)
    return text


@dataclass(frozen=True)
class ChatFormat:
    name: str
    prefix: str
    system_to_user: str
    user_to_assistant: str
    assistant_to_user: str
    # Tokens that end an assistant turn in this format; always requested as stop sequences.
    stop: tuple[str, ...] = ()
    # The format's own markers (found in its pieces), broken in every content it renders.
    markers: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.markers:
            pieces = (self.prefix, self.system_to_user, self.user_to_assistant, self.assistant_to_user, *self.stop)
            found = {m for piece in pieces for m in _MARKER_RE.findall(piece)}
            found |= {s for s in self.stop if s.strip() and not s.isalnum()}
            object.__setattr__(self, "markers", tuple(sorted(found)))

    def escape(self, content: str) -> str:
        """``content`` as it may stand inside a turn: its chat markers broken (:func:`neutralize`)."""
        return neutralize(content, self.markers)

    def escape_messages(self, messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Copies of chat messages with their text ``content`` escaped, for a chat endpoint."""
        return [
            {**m, "content": self.escape(m["content"])} if isinstance(m.get("content"), str) else dict(m)
            for m in messages
        ]

    def start(self, system: str, task: str) -> str:
        """The first prompt: system text, the task, and the opening of the assistant turn."""
        return self.prefix + self.escape(system) + self.system_to_user + self.escape(task) + self.user_to_assistant

    def follow_up(self, user_text: str) -> str:
        """What is appended after a model reply: close its turn, a user turn, reopen the assistant."""
        return self.assistant_to_user + self.escape(user_text) + self.user_to_assistant

    def render(self, messages: list[dict[str, str]]) -> str:
        """A whole conversation (system, then user/assistant alternating, ending on user), written
        exactly as the agent would have appended it turn by turn."""
        if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
            raise ValueError("a conversation starts with a system and a user message")
        text = self.start(messages[0]["content"], messages[1]["content"])
        for message in messages[2:]:
            text += (
                self.escape(message["content"])
                if message["role"] == "assistant"
                else self.follow_up(message["content"])
            )
        return text


PLAIN = ChatFormat("plain", "", "\n\n", "\n", "\n")
CHATML = ChatFormat(
    "chatml",
    "<|im_start|>system\n",
    "<|im_end|>\n<|im_start|>user\n",
    "<|im_end|>\n<|im_start|>assistant\n",
    "<|im_end|>\n<|im_start|>user\n",
    stop=("<|im_end|>", "<|im_start|>", "<|endoftext|>"),
)
# No <|begin_of_text|>: llama.cpp and vLLM add BOS themselves when tokenizing the prompt.
LLAMA3 = ChatFormat(
    "llama3",
    "<|start_header_id|>system<|end_header_id|>\n\n",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n",
    stop=("<|eot_id|>", "<|end_of_text|>"),
)
# Gemma has no system role: its own template folds the system text into the first user turn.
GEMMA = ChatFormat(
    "gemma",
    "<start_of_turn>user\n",
    "\n\n",
    "<end_of_turn>\n<start_of_turn>model\n",
    "<end_of_turn>\n<start_of_turn>user\n",
    stop=("<end_of_turn>",),
)

FORMATS: Mapping[str, ChatFormat] = {f.name: f for f in (PLAIN, CHATML, LLAMA3, GEMMA)}

# Sentinels that no template rewrites (no whitespace, no markup) and no real text contains.
_S, _U1, _A1, _U2 = "TXA5SYSTEMTXA5", "TXA5USER1TXA5", "TXA5ASSISTANT1TXA5", "TXA5USER2TXA5"


def format_from_renderer(
    render: Callable[[list[dict[str, Any]]], str], *, name: str = "server", stop: tuple[str, ...] = ()
) -> ChatFormat:
    """Learn a ChatFormat from anything that renders messages with the model's own template.

    ``render`` is e.g. llama.cpp's ``POST /apply-template``. One probe conversation with
    sentinel contents is rendered and cut at the sentinels; the pieces between them are the
    format. Raises ValueError when the template does not keep the turns in order (it then
    cannot be used append-only).
    """
    probe = [
        {"role": "system", "content": _S},
        {"role": "user", "content": _U1},
        {"role": "assistant", "content": _A1},
        {"role": "user", "content": _U2},
    ]
    text = render(probe)
    positions = [text.find(s) for s in (_S, _U1, _A1, _U2)]
    if -1 in positions or positions != sorted(positions):
        raise ValueError(
            "the chat template does not render system, user and assistant turns in order; "
            "pick a built-in format instead (plain, chatml, llama3, gemma)"
        )
    pieces = []
    rest = text
    for sentinel in (_S, _U1, _A1, _U2):
        before, rest = rest.split(sentinel, 1)
        pieces.append(before)
    prefix, system_to_user, user_to_assistant, assistant_to_user = pieces
    if rest != user_to_assistant:
        # The template treats the last user turn differently from earlier ones; appending
        # would then change earlier text. Prefer the form the model sees at generation time.
        user_to_assistant = rest
    return ChatFormat(name, prefix, system_to_user, user_to_assistant, assistant_to_user, stop=stop)


def get_format(spec: str | ChatFormat) -> ChatFormat:
    if isinstance(spec, ChatFormat):
        return spec
    try:
        return FORMATS[spec.lower()]
    except KeyError:
        raise ValueError(f"unknown chat format {spec!r}; choose one of {', '.join(FORMATS)} or 'server'") from None
