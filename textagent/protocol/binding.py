"""Binding a bare argument (``ARGS: 17 * 24``) to a tool's parameter, from its JSON schema:
the one bare-argument binder (``Tool.bind`` in textagent.tools uses it too). The rules:

- text holding a JSON object is the arguments object itself;
- the text binds to the single required parameter, else to the only parameter when none is
  required (a required name without a property still counts: the schema requires it);
- for a parameter that takes no strings, text that reads as JSON, or as a Python literal
  (``True``, ``False``, ``None``: small models write Python), becomes that value even when it
  is not of the parameter's type, so validation names the real value ("3.5 is not of type
  'integer'") and 3.0 can still become 3; other text stays text.

What to do when no parameter fits is the caller's choice: the parser keeps the text, and
``Tool.bind`` explains the problem to the model.

Tools come in many shapes (Tool objects, a ToolSet or mapping, OpenAI-style dicts, plain
names); :func:`tool_specs` reduces them all to name -> parameter schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["bare_target", "bare_value", "bind", "bind_bare", "tool_specs"]

_PY_LITERALS = {"True": True, "False": False, "None": None}


def bare_target(parameters: Mapping[str, Any]) -> str | None:
    """The parameter bare text binds to, or None when there is no single one."""
    props = parameters.get("properties") or {}
    required = list(parameters.get("required") or [])
    if len(required) == 1:
        return required[0]
    if not required and len(props) == 1:
        return next(iter(props))
    return None


def bare_value(text: str, schema: Any) -> Any:
    """The bare text as the value of a parameter with this schema (see the module rules)."""
    if not isinstance(schema, Mapping) or _accepts_string(schema):
        return text
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return _PY_LITERALS.get(stripped, text)


def bind_bare(text: str, parameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """The arguments object bare text stands for, or None when it fits no single parameter."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
    props = parameters.get("properties") or {}
    if not stripped and not props and not parameters.get("required"):
        return {}
    key = bare_target(parameters)
    return None if key is None else {key: bare_value(text, props.get(key))}


def _accepts_string(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        if "enum" in schema:
            return any(isinstance(v, str) for v in schema["enum"])
        if "anyOf" in schema or "oneOf" in schema:
            return any(
                isinstance(s, Mapping) and _accepts_string(s) for s in schema.get("anyOf", []) + schema.get("oneOf", [])
            )
        return True
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def tool_specs(tools: Any) -> dict[str, dict[str, Any]]:
    """name -> JSON schema of its parameters, from Tool objects, a ToolSet/mapping, OpenAI-style
    dicts, or plain names."""
    if tools is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
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


def _one_spec(t: Any) -> tuple[str | None, dict[str, Any]]:
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


def bind(name: str, text: str, specs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | str:
    """Bind a bare argument to tool ``name``'s parameter (:func:`bind_bare`); the text stays as it
    is when the tool is unknown or no single parameter takes it."""
    params = specs.get(name)
    if not params:
        return text
    bound = bind_bare(text, params)
    return text if bound is None else bound
