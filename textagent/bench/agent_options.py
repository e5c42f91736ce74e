"""The Agent options of a bench mode under a run's settings: one place for the single-turn and
the multi-turn episode, so that a setting means the same in both."""

from __future__ import annotations

from typing import Any

from .. import prompts
from ..checks import from_names
from ..retry import Retry
from .mode_table import Documents, bench_mode

__all__ = ["agent_options"]


def agent_options(
    mode: str,
    settings: Any,
    tools: Any,
    *,
    documents: Documents = (),
    system: str = "",
    question: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``Agent`` (besides backend, tools and limits) for ``mode``, its
    loop object built for the task (``documents``: the task's function documents, ``system``:
    BFCL's system text, for the modes that show them; bench.mode_table).

    textagent's own loop (its modes and the proxy's client) takes the run's checks and repeat
    limit, its modes the retries (the proxy's are the proxy's own); the text modes take its example style, grouped listing and streaming; the native
    modes take the examples ablation; a comparison mode runs as its original ran. ``question``:
    the (first) question, around which the ablation builds its examples as the text modes build
    theirs.
    """
    bench = bench_mode(mode)
    made = bench.build(documents, system)
    if bench.family == "comparison":
        return {"mode": made, **bench.fixed}
    loop = {
        "checks": from_names(settings.checks),
        "max_repeats": settings.max_repeats,
        "max_call_errors": settings.max_call_errors,
        "retry": Retry.from_parts(
            settings.retry,
            temperature=settings.retry_temperature,
            seed=settings.seed,
            odds=settings.retry_odds,
            verify=settings.retry_verify,
        ),
    }
    if bench.family == "client":
        # the proxy's client asks as an FC client does: the retries run in the proxy's repair loop
        # (bench.cli gives them to the proxy it starts), not in the client
        return {"mode": made, **loop, "retry": Retry(), **bench.fixed}
    needs = bench.needs
    kwargs: dict[str, Any] = {
        "mode": made,
        **loop,
        "example_style": settings.example_style,
        "example_tool": settings.example_tool,
        **bench.fixed,
    }
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
