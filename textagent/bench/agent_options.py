"""The Agent options of a bench mode under a run's settings: one place for the single-turn and
the multi-turn episode, so that a setting means the same in both."""

from __future__ import annotations

from typing import Any

from .. import prompts
from ..checks import from_names
from ..retry import Retry
from .backends import needs_of
from .baseline import AGENT_OPTIONS, NoFeedbackTextMode

__all__ = ["COMPARISON_MODES", "agent_options"]

#: The modes that bring their own loop object (the seeds' regex, BFCL's Prompt mode): the caller
#: builds it from the task, and they run under AGENT_OPTIONS, as their originals ran.
COMPARISON_MODES = ("baseline", "bfcl-prompt")


def agent_options(
    mode: str, settings: Any, tools: Any, *, comparison: Any = None, question: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``Agent`` (besides backend, tools and limits) for ``mode``.

    textagent's own loop (its modes and the proxy's client) takes the run's checks and repeat
    limit; the text modes take its example style, grouped listing and streaming; the native modes
    take the examples ablation. ``comparison`` is the mode object of ``baseline`` or ``bfcl-prompt``;
    ``question``: the (first) question, around which the ablation builds its examples as the text
    modes build theirs.
    """
    if mode in COMPARISON_MODES:
        if comparison is None:
            raise ValueError(f"mode {mode!r} needs its mode object (comparison=...)")
        return {"mode": comparison, **AGENT_OPTIONS}
    loop = {
        "checks": from_names(settings.checks),
        "max_repeats": settings.max_repeats,
        "retry": Retry.from_parts(settings.retry, temperature=settings.retry_temperature, seed=settings.seed),
    }
    if mode == "proxy":
        from .proxy_client import ProxyClientMode

        return {"mode": ProxyClientMode(), **loop}
    needs = needs_of(mode)
    kwargs: dict[str, Any] = {
        "mode": mode,
        **loop,
        "example_style": settings.example_style,
        "example_tool": settings.example_tool,
    }
    if mode == "text-no-feedback":
        kwargs.update(mode=NoFeedbackTextMode(), max_format_errors=1)
    if settings.grouped_listing and not needs.tools:
        kwargs["system_prompt"] = prompts.system_prompt(tools, grouped=True)  # shared words said once
    if settings.native_examples and needs.tools and not getattr(tools, "examples", ()):
        # the ablation: native modes shown the exchanges the text modes get ("auto" shows them none),
        # around the same tools: those closest to the question under "closest", else the set's first
        if settings.example_tool == "closest" and question is None:
            raise ValueError("the examples ablation with example_tool 'closest' needs the question")
        kwargs["example"] = prompts.worked_examples(
            tools, None, settings.example_style, question, settings.example_tool
        )
    if settings.stream and not needs.chat:  # the text modes stream
        kwargs["stream"] = True
    return kwargs
