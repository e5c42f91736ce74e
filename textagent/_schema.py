"""Small readings of a JSON schema shared by the tool layer, the parser's feedback and the prompts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["DATE_FORMATS", "example_args", "example_value", "type_label"]

# string formats of dates and times: (an example value, how it is written)
DATE_FORMATS = {
    "date": ("2026-01-31", "YYYY-MM-DD"),
    "date-time": ("2026-01-31T09:30:00", "YYYY-MM-DDTHH:MM:SS"),
    "time": ("09:30:00", "HH:MM:SS"),
}


def type_label(schema: Mapping[str, Any] | bool) -> str:
    """A short human/model-readable type: ``string``, ``"on"|"off"``, ``list[number]``, ``integer|null``.
    A boolean schema (JSON Schema's ``true``: anything, ``false``: nothing) is ``any`` / ``none``."""
    if not isinstance(schema, Mapping):
        return "none" if schema is False else "any"
    if "enum" in schema:
        return "|".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(type_label(s) for s in schema[key] if isinstance(s, (Mapping, bool)))
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"list[{type_label(schema['items'])}]"
    if kind == "string" and schema.get("format") in DATE_FORMATS:
        return f"{schema['format']} {DATE_FORMATS[schema['format']][1]}"
    if kind == "object" and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
        keys = [str(k) for k in schema["properties"]]
        return "object with keys " + (", ".join(keys[:-1]) + " and " if len(keys) > 1 else "") + keys[-1]
    return str(kind or "any")


def example_value(schema: Mapping[str, Any] | bool) -> Any:
    """A plausible value: the schema's own example, else its default or first enum value, else a typed placeholder."""
    if not isinstance(schema, Mapping):  # a boolean schema
        schema = {}
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "string" and schema.get("format") in DATE_FORMATS:
        return DATE_FORMATS[schema["format"]][0]
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return example_args(schema)
    return {
        "string": "text",
        "integer": 3,
        "number": 2.5,
        "boolean": True,
        "array": [],
        "object": {},
        "null": None,
    }.get(kind if isinstance(kind, str) else "", "text")


def other_value(value: Any, schema: Mapping[str, Any] | bool) -> Any:
    """A second plausible value of the same type, unlike ``value`` where the type allows."""
    if not isinstance(schema, Mapping):  # a boolean schema
        schema = {}
    enum = schema.get("enum") or []
    if len(enum) > 1:
        return enum[1] if value == enum[0] else enum[0]
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str) and not schema.get("format"):
        return "other " + value
    return value


def example_args(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Example arguments for an object schema: one value per required property."""
    params = parameters or {}
    props = params.get("properties") or {}
    required = params.get("required", list(props))
    return {k: example_value(props[k] if isinstance(props.get(k), Mapping) else {}) for k in required if k in props}
