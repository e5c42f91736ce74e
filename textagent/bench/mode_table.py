"""The bench's modes, one table: ``name -> BenchMode``, what each needs of a backend, how its calls
are named, and how it is built for a task. Nothing else in the bench switches on a mode's name
(a layout test holds it); the rest asks the mode.

    mode = bench_mode("bfcl-prompt")
    mode.needs.chat, mode.native_names, mode.build(documents, system_text)

Families: ``agent``, textagent's own loop in one of its modes, under every setting of the run;
``client``, the loop as the proxy's client (the run's checks, repeat limit and retries only);
``comparison``, a loop object of another design run as its original ran (``fixed``: the seeds'
regex loop, BFCL's Prompt mode), under none of the run's settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..modes import MODES as AGENT_MODES
from ..modes import Needs, mode_needs
from .ablations import FIRST_FAILURE_OPTIONS, NO_FEEDBACK_OPTIONS, FirstFailureTextMode, NoFeedbackTextMode
from .baseline import AGENT_OPTIONS, BaselineMode

__all__ = ["BENCH_MODES", "FIRST_PAIRS", "MODES", "BenchMode", "bench_mode"]

Documents = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class BenchMode:
    """One bench mode. ``build(documents, system)``: the Agent's mode for a task (a mode name of
    textagent.modes or a mode object) from the task's function documents and BFCL's system text;
    ``fixed``: the Agent options the mode sets itself."""

    name: str
    needs: Needs
    build: Callable[[Documents, str], Any]
    family: Literal["agent", "client", "comparison"] = "agent"
    fixed: Mapping[str, Any] = field(default_factory=dict)
    #: calls are validated against the tool's schema before they run (bfcl-prompt: every call goes
    #: to BFCL's executor as sent, and the model reads the executor's own error)
    checks_calls: bool = True
    #: asks in BFCL's own words: an item's user text and system text, BFCL's held-out message
    bfcl_words: bool = False
    #: a BFCL multi-turn item runs in it
    multi_turn: bool = True
    #: the external baseline a report compares every other mode with first
    reference: bool = False
    #: the bench starts a textagent proxy in front of each worker's slot for it
    starts_proxy: bool = False

    @property
    def native_names(self) -> bool:
        """Its calls go by function-calling names (a BFCL function's dotted name rewritten): the
        server's function calling carries them."""
        return self.needs.tools

    @property
    def reads_native_calls(self) -> bool:
        """textagent reads the server's function calls itself (a step may fail to decode them)."""
        return self.family == "agent" and self.needs.tools


def _agent_mode(name: str) -> BenchMode:
    return BenchMode(name, mode_needs(name), lambda documents, system: name)


def _proxy_client(documents: Documents, system: str) -> Any:
    from .proxy_client import ProxyClientMode

    return ProxyClientMode()


def _bfcl_prompt(documents: Documents, system: str) -> Any:
    from .bfcl.prompt_mode import BfclPromptMode

    return BfclPromptMode(documents, system)


BENCH_MODES: dict[str, BenchMode] = {
    **{name: _agent_mode(name) for name in AGENT_MODES},
    # the seeds' regex loop on textagent's prompt
    "baseline": BenchMode(
        "baseline",
        Needs(),
        lambda documents, system: BaselineMode(),
        family="comparison",
        fixed=AGENT_OPTIONS,
        multi_turn=False,
    ),
    # BFCL's own Prompt mode
    "bfcl-prompt": BenchMode(
        "bfcl-prompt",
        Needs(),
        _bfcl_prompt,
        family="comparison",
        fixed=AGENT_OPTIONS,
        checks_calls=False,
        bfcl_words=True,
        reference=True,
    ),
    # the feedback ablations (bench.ablations): text mode with the run (a multi-turn item: the
    # turn) ended at the first reply that does not parse, as BFCL ends it, or also at a failed call
    "text-no-feedback": BenchMode(
        "text-no-feedback", Needs(), lambda documents, system: NoFeedbackTextMode(), fixed=NO_FEEDBACK_OPTIONS
    ),
    "text-first-failure": BenchMode(
        "text-first-failure", Needs(), lambda documents, system: FirstFailureTextMode(), fixed=FIRST_FAILURE_OPTIONS
    ),
    # function calling through `textagent proxy` (started by the bench), asked by the openai client
    "proxy": BenchMode("proxy", Needs(chat=True, tools=True), _proxy_client, family="client", starts_proxy=True),
}
MODES = tuple(BENCH_MODES)
#: the pairs a report shows after every mode against the reference: the two text modes
FIRST_PAIRS = (("text", "constrained"),)


def bench_mode(name: str) -> BenchMode:
    """The bench mode of this name; ValueError naming the modes for another."""
    try:
        return BENCH_MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}; choose from {', '.join(MODES)}") from None
