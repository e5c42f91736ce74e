"""Checking the keyword options given to Agent() before any request is sent."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from .backends.base import REQUEST_OPTIONS

__all__ = ["check_options", "drop_deprecated"]


def check_options(backend: Any, options: Mapping[str, Any], own: Iterable[str]) -> None:
    """Refuse options neither Agent (``own``: its keyword parameters and AgentConfig's fields) nor
    the backend takes (``max_step=1`` would else be sent on as a request option and ignored): a
    TypeError naming the valid ones and the closest."""
    accepted = getattr(backend, "request_options", None)
    accepted = REQUEST_OPTIONS if accepted is None else frozenset(accepted)
    unknown = [k for k in options if k not in accepted or k == "messages"]
    if not unknown:
        return
    own = list(own)
    close = difflib.get_close_matches(unknown[0], [*own, *accepted], n=1)
    raise TypeError(
        f"Agent() got an unknown option {unknown[0]!r}"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f". Agent options: {', '.join(own)}; request options {type(backend).__name__} takes: "
        + (", ".join(sorted(accepted)) or "(none)")
    )


def drop_deprecated(options: MutableMapping[str, Any]) -> None:
    """``check_numbers=`` and ``check_items=`` (the Agent's flags before textagent.checks), taken
    out of ``options`` with a DeprecationWarning: the checks they turned on were measured, did not
    help and were removed, so they do nothing now."""
    for flag in ("check_numbers", "check_items"):
        if flag in options:
            options.pop(flag)
            warnings.warn(
                f"Agent({flag}=...) is deprecated and does nothing: the check was removed (it did not "
                "help; docs/bench.md, Checks); pass checks=[...] for your own",
                DeprecationWarning,
                stacklevel=3,
            )
