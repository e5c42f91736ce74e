"""Binding a bare argument (``ARGS: 17 * 24``) to a tool's parameter, from its JSON schema.

Tools come in many shapes (Tool objects, a ToolSet or mapping, OpenAI-style dicts, plain
names); :func:`tool_specs` reduces them all to name -> parameter schema.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


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
    """Bind a bare argument to the tool's single required parameter (or its only parameter)."""
    params = specs.get(name)
    if not params:
        return text
    props = params.get("properties") or {}
    required = params.get("required") or []
    if len(required) == 1:
        key = required[0]
    elif not required and len(props) == 1:
        key = next(iter(props))
    else:
        return text
    return {key: coerce(text, props.get(key) or {})}


_PY_LITERALS = {"True": True, "False": False, "None": None}
_TYPE_CHECK = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def coerce(text: str, schema: Mapping) -> Any:
    """The bare text as the parameter's type when it reads as one (`3` for an integer)."""
    types = schema.get("type")
    if not types:
        return text
    if isinstance(types, str):
        types = [types]
    if "string" in types:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        if text not in _PY_LITERALS:
            return text
        value = _PY_LITERALS[text]
    for t in types:
        check = _TYPE_CHECK.get(t)
        if check is not None and check(value):
            return value
    return text
