"""Names of a package loaded on first use (PEP 562): the package's ``__getattr__`` asks here."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["load"]


def load(package: str, table: Mapping[str, str], name: str) -> Any:
    """``name`` from the module of ``package`` that ``table`` says defines it, kept in the package
    for next time; AttributeError for a name the table does not hold."""
    if name not in table:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(table[name], package), name)
    setattr(sys.modules[package], name, value)
    return value
