"""BFCL's function documents as textagent tools.

BFCL writes parameters in a dialect of JSON Schema: ``"type": "dict"`` for an object,
``float``, ``tuple``, ``any``, Java and JavaScript type names, a property flag ``optional``.
``to_json_schema`` turns that into standard JSON Schema; ``language_hint`` adds the sentence
BFCL itself appends to every description before any model sees it ("Note that the provided
function is in Python 3 syntax.", and for Java/JavaScript every parameter becomes a string with
its type in words), so every mode reads the same documents the leaderboard shows.

Dotted names (``math.factorial``) stay as written in the text modes (the grammar accepts
them); OpenAI-style function calling allows only ``^[a-zA-Z0-9_-]+$``, so native modes get
``math_factorial`` and ``native_names`` maps the calls back.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator

from ...tools import Tool, ToolSet

__all__ = ["NEUTRAL_RESULT", "function_docs", "language_hint", "make_tools", "native_names", "to_json_schema"]

#: What every BFCL tool returns: these categories are scored on the calls, not on results.
NEUTRAL_RESULT = {"status": "success"}

_TYPES = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "char": "string",
    "String": "string",
    "Bigint": "integer",
    "ArrayList": "array",
    "Array": "array",
    "Queue": "array",
    "Stack": "array",
    "HashMap": "object",
    "Hashtable": "object",
}
_KEEP = ("description", "enum", "default", "maximum", "minimum", "minItems", "maxItems")
_NATIVE_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """One BFCL parameter schema (or a whole ``parameters`` object) as standard JSON Schema.
    ``any`` (and a missing type) accepts every value; an unknown type name is read as a
    string, as BFCL's own conversion does."""
    out: dict[str, Any] = {k: copy.deepcopy(schema[k]) for k in _KEEP if k in schema}
    kind = schema.get("type")
    if kind not in (None, "any", "Any", ""):
        out["type"] = _TYPES.get(str(kind), "string")
    # a few documents list enum values of another type than the parameter's: keep the list,
    # drop the type, so that the accepted values stay accepted
    if (
        "enum" in out
        and out.get("type") in ("integer", "number", "boolean", "array", "object")
        and not all(_is_type(v, out["type"]) for v in out["enum"])
    ):
        out.pop("type")
    if "default" in out and out.get("type") and not _is_type(out["default"], out["type"]):
        out.pop("default")  # e.g. "default": "None" on an integer: a note for readers, not a value
    if isinstance(schema.get("items"), Mapping):
        out["items"] = to_json_schema(schema["items"])
    props = schema.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {str(k): to_json_schema(v if isinstance(v, Mapping) else {}) for k, v in props.items()}
        optional = {k for k, v in props.items() if isinstance(v, Mapping) and v.get("optional") is True}
        required = [r for r in schema.get("required") or [] if r in props and r not in optional]
        if required:
            out["required"] = required
    return out


def _is_type(value: Any, kind: str) -> bool:
    """Whether ``value`` is of JSON type ``kind``, judged as the tools' own validator judges it."""
    return Draft202012Validator.TYPE_CHECKER.is_type(value, kind)


def _hint(language: str) -> str:
    return {
        "java": " Note that the provided function is in Java 8 SDK syntax.",
        "javascript": " Note that the provided function is in JavaScript syntax.",
    }.get(language, " Note that the provided function is in Python 3 syntax.")


def language_hint(functions: Iterable[Mapping[str, Any]], language: str) -> list[dict[str, Any]]:
    """The documents as BFCL shows them to every model: a language note on each description;
    Java and JavaScript parameters turned into strings with their type in words."""
    out = []
    for given in functions:
        fn = copy.deepcopy(dict(given))
        fn["description"] = str(fn.get("description") or "") + _hint(language)
        props = (fn.get("parameters") or {}).get("properties") or {}
        if language in ("java", "javascript"):
            lang = "Java" if language == "java" else "JavaScript"
            for value in props.values():
                kind = value.get("type")
                text = str(value.get("description") or "")
                if kind in ("any", "Any"):
                    text += f" This parameter can be of any type of {lang} object in string representation."
                else:
                    text += f" This is {lang} {kind} type parameter in string representation."
                if kind in (("ArrayList", "Array") if language == "java" else ("array",)) and "items" in value:
                    text += (
                        f" The list elements are of type {value['items'].get('type')}; they are not in "
                        "string representation."
                    )
                    del value["items"]
                if language == "javascript" and kind == "dict" and "properties" in value:
                    text += (
                        " The dictionary entries have the following schema; they are not in string "
                        f"representation. {json.dumps(value['properties'])}"
                    )
                    del value["properties"]
                value["description"] = text
                value["type"] = "string"
        out.append(fn)
    return out


def native_names(names: Sequence[str]) -> dict[str, str]:
    """{name as the native API gets it: name as BFCL writes it}; ``.`` and other characters
    OpenAI refuses become ``_`` (a clash gets a numbered suffix)."""
    mapping: dict[str, str] = {}
    for name in names:
        safe = _NATIVE_NAME.sub("_", name)[:64] or "f"
        candidate, n = safe, 2
        while candidate in mapping:
            candidate, n = f"{safe[:60]}_{n}", n + 1
        mapping[candidate] = name
    return mapping


def _neutral(**_: Any) -> dict[str, Any]:
    return dict(NEUTRAL_RESULT)


def make_tools(functions: Iterable[Mapping[str, Any]], *, native: bool = False) -> tuple[ToolSet, dict[str, str]]:
    """(tool set, {tool name: BFCL name}) for an item's (hinted) documents. The tools validate
    their arguments like any textagent tool (a bad call gets feedback in the agent view) and
    return NEUTRAL_RESULT. No worked examples: the placeholder exchanges are what a user with
    new tools gets."""
    docs = list(functions)
    names = [str(f["name"]) for f in docs]
    mapping = native_names(names) if native else {n: n for n in names}
    back = {v: k for k, v in mapping.items()}
    tools = []
    for fn in docs:
        params = to_json_schema(fn.get("parameters") or {"type": "dict", "properties": {}})
        params["type"] = "object"
        params.setdefault("properties", {})
        params["additionalProperties"] = False
        tools.append(Tool(back[str(fn["name"])], str(fn.get("description") or ""), params, fn=_neutral))
    # arguments the function does not have are refused, not ignored: BFCL counts them wrong,
    # so the agent view should hear about them
    return ToolSet(tools, extra_args="error"), mapping


def function_docs(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """textagent tools as the JSON documents BFCL's prompt lists (name, description, parameters)."""
    return [
        {"name": t.name, "description": t.description, "parameters": copy.deepcopy(t.parameters)}
        for t in (tools.values() if hasattr(tools, "values") else tools)
    ]
