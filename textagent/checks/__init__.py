"""Opt-in checks: objects that second-guess the model, run by the loop on answers and steps.

    Agent(backend, tools)                                   # none: the first answer is taken
    Agent(backend, tools, checks=[NumbersCheck()])          # one
    Agent(backend, tools, checks=checks.small_model())      # the preset for small models

Every mode runs the same checks; each mode words what they say with its own prompts.
"""
from __future__ import annotations

from .base import Check, RunView, as_checks
from .items import ItemsCheck
from .numbers import NumbersCheck
from .repeats import RepeatedCalls

__all__ = ["Check", "RunView", "as_checks", "NumbersCheck", "ItemsCheck", "RepeatedCalls", "small_model", "CHECKS", "from_names"]

#: Checks by name, as the command line takes them (``--checks numbers,items``).
CHECKS = {"numbers": NumbersCheck, "items": ItemsCheck, "repeats": RepeatedCalls}


def small_model() -> list[Check]:
    """The checks for small models (under a few billion parameters). Items come before numbers:
    an answer about an item nobody looked up usually states its made-up numbers too."""
    return [ItemsCheck(), NumbersCheck(), RepeatedCalls()]


def from_names(spec: str) -> list[Check]:
    """Checks from a comma-separated list of names; "none" or "" for none, "small-model" for
    the preset."""
    names = [n.strip() for n in spec.split(",") if n.strip() and n.strip() != "none"]
    checks: list[Check] = []
    for name in names:
        if name in ("small-model", "small_model"):
            checks += small_model()
        elif name in CHECKS:
            checks.append(CHECKS[name]())
        else:
            raise ValueError(f"unknown check {name!r}; choose from none, small-model, {', '.join(CHECKS)}")
    return checks
