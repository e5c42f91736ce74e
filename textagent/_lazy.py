"""Names loaded on first use: a package's (PEP 562: its ``__getattr__`` asks here), and the
``module:attr`` references a user names (tools, checks), read by the one loader."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["load", "load_reference"]


def load(package: str, table: Mapping[str, str], name: str) -> Any:
    """``name`` from the module of ``package`` that ``table`` says defines it, kept in the package
    for next time; AttributeError for a name the table does not hold."""
    if name not in table:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(table[name], package), name)
    setattr(sys.modules[package], name, value)
    return value


def load_reference(spec: str) -> Any:
    """The object a ``module:attr`` reference names (``mypkg.tools:search``); ValueError saying
    why it cannot be loaded (not such a reference, no such module, no such name), for the caller
    to word (``--tools``, ``--checks``, a bench task's tools)."""
    module, colon, attr = spec.partition(":")
    if not colon or not module or not attr:
        raise ValueError("not a module:name reference")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(str(exc)) from None
