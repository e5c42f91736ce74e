"""Binding a bare argument (``ARGS: 17 * 24``) to a tool's parameter, from its JSON schema.

Tools come in many shapes (Tool objects, a ToolSet or mapping, OpenAI-style dicts, plain
names); :func:`tool_specs` reduces them all to name -> parameter schema.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..tools.binding import bind_bare


def tool_specs(tools: Any) -> dict[str, dict]:
    """name -> JSON schema of its parameters, from Tool objects, a ToolSet/mapping, OpenAI-style
    dicts, or plain names."""
    if tools is None:
        return {}
    out: dict[str, dict] = {}
    if isinstance(tools, Mapping):
        for key, t in tools.items():
            name, params = _one_spec(t)
            out[name or str(key)] = params
        return out
    if isinstance(tools, str):
        tools = [tools]
    for t in tools:
        name, params = _one_spec(t)
        if name:
            out[name] = params
    return out


def _one_spec(t: Any) -> tuple[str | None, dict]:
    if isinstance(t, str):
        return t, {}
    if isinstance(t, Mapping):
        fn = t.get("function", t) if isinstance(t.get("function"), Mapping) else t
        params = fn.get("parameters")
        if params is None and fn.get("type") == "object":
            params = fn
        name = fn.get("name")
        return (str(name) if name else None), dict(params or {})
    name = getattr(t, "name", None)
    params = getattr(t, "parameters", None)
    return (str(name) if name else None), dict(params or {}) if isinstance(params, Mapping) else {}


def bind(name: str, text: str, specs: dict) -> dict | str:
    """Bind a bare argument with the tools' own binder (``textagent.tools.binding``); the text
    stays as it is when the tool is unknown or no single parameter takes it."""
    params = specs.get(name)
    if not params:
        return text
    bound = bind_bare(text, params)
    return text if bound is None else bound
