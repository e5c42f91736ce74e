"""``proxy``: function calling through ``textagent proxy``, asked by the official ``openai`` client.

What an agent framework on a model without function calling actually gets: the bench starts a
``textagent proxy`` in front of the same llama-server (bench.cli) and each episode talks to it as
an FC client talks to a server: the system prompt, ``tools``, the conversation, ``tool_calls``
back, ``tool`` messages with the results. The mode is native mode's (the same messages, the same
reading of ``tool_calls``, no worked examples of textagent's own) with the chat request sent by
``openai.OpenAI().chat.completions.create``; the proxy writes the text protocol and repairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends.base import Capabilities, Completion, Usage
from ..errors import BackendConnectionError, BackendError, BackendHTTPError, BackendTimeout
from ..modes import ModeContext, NativeMode, Needs

__all__ = ["OpenAIClientChat", "ProxyClientMode"]

_FINISH = {"tool_calls": "stop", "stop": "stop", "length": "length", "content_filter": "stop"}


class OpenAIClientChat:
    """``chat(messages, tools=..., ...)`` through the official openai SDK at ``base_url`` (a
    ``textagent proxy``). A 422 (the proxy's repairs could not make a usable reply) is an empty
    reply, as a client sees no answer; other failures are backend errors."""

    capabilities = Capabilities(chat=True)

    def __init__(self, base_url: str, *, timeout: float = 300):
        import openai

        self.url = base_url.rstrip("/")
        self._openai = openai
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="-", timeout=timeout, max_retries=0)

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Any = None,
        tool_choice: Any = "auto",
        max_tokens: int,
        **options: Any,
    ) -> Completion:
        openai = self._openai
        extra = {k: options[k] for k in ("temperature", "seed") if options.get(k) is not None}
        if tools:
            extra.update(tools=tools, tool_choice=tool_choice)
        try:
            resp = self.client.chat.completions.create(
                model="textagent",
                messages=list(messages),  # type: ignore[arg-type]
                max_tokens=max_tokens,
                **extra,
            )
        except openai.APITimeoutError as exc:
            raise BackendTimeout(f"textagent proxy at {self.url} sent no answer in time", url=self.url) from exc
        except openai.APIConnectionError as exc:
            raise BackendConnectionError(f"no textagent proxy at {self.url}: {exc}", url=self.url) from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 422:  # the model's failure, not the server's: no reply
                return Completion("", "stop", message={"role": "assistant", "content": ""})
            raise BackendHTTPError(
                f"textagent proxy at {self.url} answered HTTP {exc.status_code}: {exc.message}",
                status=exc.status_code,
                body=str(exc.body)[:500],
                url=self.url,
            ) from exc
        choice = resp.choices[0]
        message = choice.message.model_dump(exclude_none=True)
        u = resp.usage
        cached = getattr(getattr(u, "prompt_tokens_details", None), "cached_tokens", None) if u else None
        usage = (
            Usage(
                prompt_tokens=u.prompt_tokens,
                completion_tokens=u.completion_tokens,
                prompt_cached=cached,
                prompt_evaluated=None if cached is None else u.prompt_tokens - cached,
            )
            if u
            else Usage()
        )
        return Completion(
            message.get("content") or "", _FINISH.get(choice.finish_reason or ""), usage=usage, message=message
        )

    def complete(self, prompt: str, **options: Any) -> Completion:
        raise BackendError("the proxy mode sends chat requests only")


class ProxyClientMode(NativeMode):
    """Native mode's conversation, asked of ``textagent proxy`` by the openai client (the Agent's
    backend is an OpenAIClientChat). The proxy returns only valid calls: no fallback reading."""

    needs = Needs(chat=True, tools=True)

    def __init__(self) -> None:
        super().__init__(fallback=False)
        self.name = "proxy"

    def setup(self, ctx: ModeContext) -> None:
        if not isinstance(ctx.backend, OpenAIClientChat):
            raise TypeError("mode 'proxy' needs an OpenAIClientChat backend (the bench builds one per proxy)")
        super().setup(ctx)
