"""Chat formats for completion endpoints.

The agent renders the whole conversation as one string and only ever *appends* to it, so
a format is described by the four fixed pieces of text that surround the turns rather
than by a function of the whole message list. That is what keeps every prompt a prefix
of the next one (and llama.cpp's KV cache warm).

    prefix + SYSTEM + system_to_user + TASK + user_to_assistant
           + REPLY + assistant_to_user + OBSERVATIONS + user_to_assistant + REPLY + ...
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ChatFormat", "PLAIN", "CHATML", "LLAMA3", "GEMMA", "FORMATS", "get_format", "format_from_renderer"]


@dataclass(frozen=True)
class ChatFormat:
    name: str
    prefix: str
    system_to_user: str
    user_to_assistant: str
    assistant_to_user: str
    # Tokens that end an assistant turn in this format; always requested as stop sequences.
    stop: tuple[str, ...] = ()

    def start(self, system: str, task: str) -> str:
        """The first prompt: system text, the task, and the opening of the assistant turn."""
        return self.prefix + system + self.system_to_user + task + self.user_to_assistant

    def follow_up(self, user_text: str) -> str:
        """What is appended after a model reply: close its turn, a user turn, reopen the assistant."""
        return self.assistant_to_user + user_text + self.user_to_assistant

    def render(self, messages: list[dict[str, str]]) -> str:
        """A whole conversation (system, then user/assistant alternating, ending on user), written
        exactly as the agent would have appended it turn by turn."""
        if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
            raise ValueError("a conversation starts with a system and a user message")
        text = self.start(messages[0]["content"], messages[1]["content"])
        for message in messages[2:]:
            text += message["content"] if message["role"] == "assistant" else self.follow_up(message["content"])
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


def format_from_renderer(render: Callable[[list[dict[str, Any]]], str], *, name: str = "server",
                         stop: tuple[str, ...] = ()) -> ChatFormat:
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
        raise ValueError("the chat template does not render system, user and assistant turns in order; "
                         "pick a built-in format instead (plain, chatml, llama3, gemma)")
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
