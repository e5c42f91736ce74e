"""Opt-in checks: objects that second-guess the model, run by the loop on answers and steps.

    Agent(backend, tools)                                 # none: the first answer is taken (default)
    Agent(backend, tools, checks=[MyCheck()])             # yours: see Check
    textagent run --checks mypkg.checks:MyCheck "..."     # the same on the command line

Every mode runs the same checks; each mode words what they send with its own prompts. None
ships: three were built (numbers no tool result held, listed items no call covered, repeated
calls) and measured on the suite's test split and BFCL; none helped, so they were deleted
(docs/bench.md, "Checks").
"""

from __future__ import annotations

from .._lazy import load_reference
from .base import Check, RunView, as_checks

__all__ = ["Check", "RunView", "as_checks", "from_names"]


def from_names(spec: str) -> list[Check]:
    """Checks from a comma-separated list of ``module:Name``: a check class, or a function
    called with no arguments that returns a check or a list of them; "none" or "" for none."""
    checks: list[Check] = []
    for name in (n.strip() for n in spec.split(",")):
        if not name or name == "none":
            continue
        if ":" not in name:
            raise ValueError(f"unknown check {name!r}: give module:Name (no check ships with textagent), or none")
        try:
            made = load_reference(name)()
        except ValueError as exc:
            raise ValueError(f"cannot load the check {name!r}: {exc}") from None
        checks += as_checks(made if isinstance(made, (list, tuple)) else [made])
    return checks
