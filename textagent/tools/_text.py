"""Small text helpers for what the model reads of a tool call, and the template loader."""

from __future__ import annotations

from typing import Any

from .. import prompts


def say(template: str, /, **fields: Any) -> str:
    """A model-facing message from ``textagent/prompts/common/<template>.txt``."""
    return prompts.template(template).substitute(fields)


def show(value: Any, limit: int = 60) -> str:
    """A short, single-line, printable rendering of a name or value for error messages."""
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable():
            return value
        text = repr(value[:limit])
        return text + ("…" if len(value) > limit else "")
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not break error reporting
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def short_repr(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        text = repr(value[:limit])
        return text + ("…" if len(value) > limit else "")
    return show(value, limit)


def one_line(text: str) -> str:
    return " ".join(text.split())


def json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    for py, name in (
        ((bool,), "boolean"),
        ((int,), "integer"),
        ((float,), "number"),
        ((str,), "string"),
        ((list, tuple), "array"),
        ((dict,), "object"),
    ):
        if isinstance(value, py):
            return name
    return type(value).__name__
