"""Small readings of a JSON schema shared by the tool layer, the parser's feedback and the prompts."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import jsonschema

__all__ = ["type_label", "example_value", "example_args", "DATE_FORMATS"]

# string formats of dates and times: (an example value, how it is written)
DATE_FORMATS = {"date": ("2026-01-31", "YYYY-MM-DD"), "date-time": ("2026-01-31T09:30:00", "YYYY-MM-DDTHH:MM:SS"),
                "time": ("09:30:00", "HH:MM:SS")}


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


# "e.g. San Francisco, CA", "for example 'kg' or 'lb'", "such as 10": the values a description gives
_EXAMPLE_RE = re.compile(r"(?:\be\.\s?g\.?|\bfor (?:example|instance)|\bsuch as)[\s,:]+(.+)", re.I | re.S)
_QUOTED_RE = re.compile(r"'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"|`([^`\n]{1,60})`")
_UNQUOTED_END = re.compile(r"\)|;|\.(?:\s|$)|\s+(?:or|and)\s|$")


def described_examples(description: Any) -> list[str]:
    """The example values a description names after "e.g.", "for example" or "such as"."""
    if not isinstance(description, str):
        return []
    match = _EXAMPLE_RE.search(description)
    if not match:
        return []
    rest = match.group(1).strip()
    if rest[:1] in "'\"`":
        return [next(g for g in m.groups() if g is not None) for m in _QUOTED_RE.finditer(rest[:200])]
    head = rest[:_UNQUOTED_END.search(rest).start()].strip()
    return [head] if 0 < len(head) <= 60 else []


def _typed(text: str, kind: Any) -> Any:
    """``text`` read as a value of ``kind`` (a JSON type), or None when it is not one."""
    if kind in ("integer", "number"):
        try:
            number = float(text.replace(",", ""))
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        return int(number) if kind == "integer" and number.is_integer() else (None if kind == "integer" else number)
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.lower())
    return text if kind in ("string", None) else None


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    try:
        return jsonschema.Draft202012Validator(schema).is_valid(value)
    except Exception:   # a schema jsonschema cannot read: its values are not ours to trust
        return False


def _in_range(value: float, schema: Mapping[str, Any]) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, (int, float)) and not isinstance(low, bool) and value < low:
        value = low
    if isinstance(high, (int, float)) and not isinstance(high, bool) and value > high:
        value = high
    return value


def example_value(schema: Mapping[str, Any] | bool) -> Any:
    """A plausible value from the schema itself: its own example, default, const or first enum
    value, else a value its description names ("e.g. ..."), else one of its type (within its
    bounds, in its date format), a typed placeholder only as the last resort."""
    if not isinstance(schema, Mapping):   # a boolean schema
        schema = {}
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    for text in described_examples(schema.get("description")):
        value = _typed(text, kind)
        if value is not None and _fits(value, schema):
            return value
    if kind == "string" and schema.get("format") in DATE_FORMATS:
        return DATE_FORMATS[schema["format"]][0]
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return example_args(schema)
    if kind in ("integer", "number"):
        value = _in_range(3 if kind == "integer" else 2.5, schema)
        return int(value) if kind == "integer" and float(value).is_integer() else value
    return {"string": "text", "boolean": True, "array": [], "object": {}, "null": None}.get(kind, "text")


def other_value(value: Any, schema: Mapping[str, Any] | bool) -> Any:
    """A second plausible value of the same type, unlike ``value`` where the type allows."""
    if not isinstance(schema, Mapping):   # a boolean schema
        schema = {}
    enum = schema.get("enum") or []
    if len(enum) > 1:
        return enum[1] if value == enum[0] else enum[0]
    kind = schema.get("type")
    for text in described_examples(schema.get("description")):
        other = _typed(text, next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind)
        if other is not None and other != value and _fits(other, schema):
            return other
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        bumped = _in_range(value + 1, schema)
        return bumped if bumped != value else _in_range(value - 1, schema)
    if isinstance(value, str) and not schema.get("format"):
        return "other " + value
    return value


def example_args(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Example arguments for an object schema: one value per required property."""
    params = parameters or {}
    props = params.get("properties") or {}
    required = params.get("required", list(props))
    return {k: example_value(props[k] if isinstance(props.get(k), Mapping) else {}) for k in required if k in props}
