"""What every backend returns, and the one method the agent needs from it."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "REQUEST_OPTIONS",
    "Backend",
    "Capabilities",
    "Completion",
    "ServerBackend",
    "Usage",
    "capabilities_of",
    "server_backend",
]

# The request options of textagent's backends, between them (each lists its own in
# ``request_options``): what Agent(..., **options) passes through to a backend that lists none.
REQUEST_OPTIONS = frozenset({"temperature", "seed", "stream", "on_text", "id_slot", "grammar"})


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond plain completions, declared in its ``capabilities``.

    ``grammar``: ``complete()`` sends a ``grammar`` option (GBNF) to the server, which holds the
    output to it. ``chat``: native function calling works through this backend: it has
    ``chat(messages, tools=...)``, or (llama.cpp) its server's ``/v1/chat/completions`` is
    reached from it. ``streaming``: ``complete()`` streams and calls an ``on_text`` option with
    the text so far (returning True stops early).

    What the server behind it offers besides completions (llama.cpp's does all of it), asked by
    Endpoint, the proxy and the bench instead of the backend's type; each has its calls in
    ServerBackend. ``health``: ``health()`` and ``wait_healthy()`` ask its ``GET /health``
    (503 while it loads the model); without it, ``probe()`` is the cheapest request the API
    has. ``slots``: ``props()`` says how many slots (requests at once) it runs and which model.
    ``template``: ``apply_template()`` renders a conversation with the model's own chat
    template. ``slot_pinning``: ``complete()`` takes an ``id_slot`` option that pins the
    request to one slot (whose KV cache it keeps). ``prefix_cache``: a PrefixCache set as its
    ``prefix_cache`` restores a saved prompt prefix into the slot before a request.
    ``sampling``: the sampling fields (top_p, penalties, logit_bias) its requests can carry,
    set in its ``params`` through ``sampling_params()``. ``token_probs``: ``complete()`` takes a
    ``token_probs=k`` option and reports the first generated token's ``k`` likeliest
    alternatives in ``Completion.top_tokens``.
    """

    grammar: bool = False
    chat: bool = False
    streaming: bool = False
    health: bool = False
    slots: bool = False
    template: bool = False
    slot_pinning: bool = False
    prefix_cache: bool = False
    sampling: frozenset[str] = frozenset()
    token_probs: bool = False


NO_CAPABILITIES = Capabilities()

# the sampling fields an OpenAI-style request body takes (llama.cpp's /completion too)
OPENAI_SAMPLING = frozenset({"top_p", "frequency_penalty", "presence_penalty", "logit_bias"})


def capabilities_of(backend: object) -> Capabilities:
    """What ``backend`` declares it can do; nothing beyond plain completions for a backend
    that declares nothing (the attribute is optional in the Backend protocol)."""
    capabilities = getattr(backend, "capabilities", None)
    return capabilities if isinstance(capabilities, Capabilities) else NO_CAPABILITIES


def _add(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


@dataclass(frozen=True)
class Usage:
    """Token counts of one request, as far as the backend reports them (None = unknown).

    ``prompt_evaluated`` are prompt tokens the server actually computed; ``prompt_cached``
    are prompt tokens it reused from its KV cache. Their sum is ``prompt_tokens`` where both
    are known.
    """

    prompt_tokens: int | None = None
    prompt_evaluated: int | None = None
    prompt_cached: int | None = None
    completion_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(_add(a, b) for a, b in zip(_fields(self), _fields(other))))

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        """The Usage a record holds (``to_dict``'s form); a count that is not a whole number is unknown."""
        data = data or {}

        def count(key: str) -> int | None:
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return None
            return int(value)

        return cls(*(count(f.name) for f in fields(cls)))


def _fields(u: Usage) -> tuple[int | None, ...]:
    return (u.prompt_tokens, u.prompt_evaluated, u.prompt_cached, u.completion_tokens)


@dataclass(frozen=True)
class Completion:
    """One completion: the generated text and what the server said about it.

    ``finish_reason`` is normalised to ``"stop"`` (a stop sequence or end of generation),
    ``"length"`` (max_tokens hit), ``"early_stop"`` (textagent closed a stream itself) or
    None when unknown. ``timings`` holds milliseconds: at least ``wall_ms``; servers that
    report more (llama.cpp) add ``prompt_ms``, ``predicted_ms``, ``predicted_per_second``.
    """

    text: str
    finish_reason: str | None = None
    stop_word: str | None = None
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    # For native mode: the OpenAI-style message the server returned (tool_calls etc.).
    message: dict[str, Any] | None = field(default=None, compare=False)
    # Retries the backend made before this completion succeeded (visible in traces).
    retries: int = 0
    # The first generated token's likeliest alternatives, (text, probability) likeliest first, as
    # the model put them before sampling (a request not streamed, with the ``token_probs`` option;
    # else empty).
    top_tokens: tuple[tuple[str, float], ...] = field(default=(), compare=False)


@runtime_checkable
class Backend(Protocol):
    """Anything with this method can drive an Agent.

    ``options`` may carry ``messages`` (the conversation as OpenAI-style role/content dicts,
    for backends that talk to chat endpoints), ``grammar`` (GBNF), ``temperature``, ``seed``
    and backend-specific keys. A backend ignores options it does not understand, except
    that one which cannot honour ``grammar`` must raise ModeNotSupported.

    A backend may list the options a caller may pass through ``Agent(..., **options)`` in a
    ``request_options`` attribute (``messages`` is always passed by the agent, not listed);
    Agent refuses any other. Without it, REQUEST_OPTIONS (what textagent's backends take
    between them) are allowed.

    A backend declares what it can do beyond plain completions in a ``capabilities``
    attribute (a Capabilities); textagent's backends all do.
    """

    def complete(self, prompt: str, *, stop: list[str], max_tokens: int, **options: Any) -> Completion: ...


class ServerBackend(Backend, Protocol):
    """A backend of a model server at ``url`` (textagent's HTTP backends): the calls behind
    its Capabilities. Only those its ``capabilities`` declare may be made (a backend has the
    methods of what it declares, and need not have the others), which is why callers ask
    the capabilities first and then :func:`server_backend`, never the backend's type.
    """

    url: str
    capabilities: Capabilities
    params: dict[str, Any]
    prefix_cache: Any  # capabilities.prefix_cache

    def close(self) -> None: ...

    def probe(self, path: str | None = None, *, timeout: Any = None) -> None: ...

    def sampling_params(self, fields: Mapping[str, Any]) -> dict[str, Any]: ...  # capabilities.sampling

    def health(self, *, timeout: Any = None) -> dict[str, Any] | str: ...  # capabilities.health

    def wait_healthy(
        self, timeout: float = 120.0, on_wait: Callable[[str], Any] | None = None
    ) -> dict[str, Any] | str: ...  # capabilities.health

    def props(self) -> dict[str, Any]: ...  # capabilities.slots

    def apply_template(  # capabilities.template
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True
    ) -> str: ...


def server_backend(backend: object) -> ServerBackend:
    """``backend`` as the ServerBackend its capabilities describe: for the calls of a
    capability it declares (checked by the caller through :func:`capabilities_of`)."""
    return cast(ServerBackend, backend)
