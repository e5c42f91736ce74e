"""Type hints -> JSON schema (dataclasses, TypedDicts, Enums, dates, pydantic models included),
and the questions the rest of the package asks of a schema."""

from __future__ import annotations

import collections
import collections.abc
import copy
import dataclasses
import datetime
import enum
import inspect
import json
import sys
import threading
import types
import typing
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ._text import json_type_of

_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}

# Nesting levels (objects and arrays) a tool's parameters schema may have: a nested property
# costs two (its schema and the ``properties`` object). jsonschema's own meta-schema check, and
# every reader of a schema, recurse; this keeps them far from Python's recursion limit.
MAX_SCHEMA_DEPTH = 64


def deeper_than(value: Any, levels: int) -> bool:
    """Whether ``value`` (JSON data) nests objects/arrays more than ``levels`` deep; no recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > levels:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def is_jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError, RecursionError):
        return False


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    kinds = {json_type_of(v) for v in values}
    if len(kinds) == 1 and next(iter(kinds)) in ("string", "integer", "number", "boolean", "null"):
        schema["type"] = next(iter(kinds))
    schema["enum"] = list(values)
    return schema


def schema_for_type(hint: Any, *, where: str = "parameter") -> dict[str, Any]:
    """JSON schema for a Python type hint. Raises TypeError for types JSON cannot carry."""
    if hint is inspect.Parameter.empty or hint is Any or hint is object:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    for reader in (_typing_form_schema, _class_schema, _container_schema):
        schema = reader(hint, where)
        if schema is not None:
            return schema
    raise TypeError(
        f"{where}: cannot derive a JSON schema from type {hint!r}; use str, int, float, bool, "
        "Literal, an Enum, Optional, list[...], dict[str, ...], datetime.date/datetime/time, a "
        "dataclass, a TypedDict or a pydantic model, or give the schema explicitly "
        "(Tool(name, description, parameters, fn) or Tool.from_openai)"
    )


def _typing_form_schema(hint: Any, where: str) -> dict[str, Any] | None:
    """Required/NotRequired, Annotated, Literal and unions; None for any other hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in KEY_MARKS:  # TypedDict's Required[...] / NotRequired[...]
        return schema_for_type(args[0], where=where)
    if origin is typing.Annotated:
        schema = schema_for_type(args[0], where=where)
        for meta in args[1:]:
            if isinstance(meta, str) and "description" not in schema:
                schema["description"] = meta
            elif isinstance(meta, Mapping):
                schema.update(copy.deepcopy(dict(meta)))
        return schema
    if origin is typing.Literal:
        return _enum_schema([v.value if isinstance(v, enum.Enum) else v for v in args])
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return _union_schema(args, where)
    return None


def _union_schema(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    members = [a for a in args if a is not type(None)]
    nullable = len(members) != len(args)
    subs = [schema_for_type(a, where=where) for a in members]
    if any(s == {} for s in subs):
        return {}
    if nullable:
        if len(subs) == 1 and set(subs[0]) <= {"type", "enum"} and isinstance(subs[0].get("type"), str):
            only = dict(subs[0])
            only["type"] = [only["type"], "null"]
            if "enum" in only:
                only["enum"] = [*only["enum"], None]
            return only
        subs.append({"type": "null"})
    return subs[0] if len(subs) == 1 else {"anyOf": subs}


def _class_schema(hint: Any, where: str) -> dict[str, Any] | None:
    """Enums, dates, pydantic models, dataclasses, TypedDicts and JSON's scalar types; None for
    any other hint."""
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint])
    if isinstance(hint, type) and hint in DATE_TYPES:
        return {"type": "string", "format": DATE_TYPES[hint]}
    if is_pydantic_model(hint):
        import pydantic

        return pydantic.TypeAdapter(hint).json_schema()
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        return _record_schema(hint, where)
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if isinstance(hint, type) and issubclass(hint, str):
        return {"type": "string"}
    return None


def _container_schema(hint: Any, where: str) -> dict[str, Any] | None:
    """Sequences, tuples and mappings (bare or parametrized); None for any other hint."""
    args = typing.get_args(hint)
    container = typing.get_origin(hint) or hint
    if container in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable):
        return _array_schema(args[0] if args else None, where)
    if container is tuple:
        return _tuple_schema(args, where)
    if container in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        schema: dict[str, Any] = {"type": "object"}
        if len(args) == 2:
            if args[0] not in (str, Any):
                raise TypeError(f"{where}: JSON objects only have string keys; use dict[str, ...] (got {hint!r})")
            value = schema_for_type(args[1], where=where)
            if value:
                schema["additionalProperties"] = value
        return schema
    return None


def _array_schema(item_hint: Any, where: str) -> dict[str, Any]:
    """An array, of ``item_hint``'s items when it says something about them (None: any items)."""
    schema: dict[str, Any] = {"type": "array"}
    item = schema_for_type(item_hint, where=where) if item_hint is not None else {}
    if item:
        schema["items"] = item
    return schema


def _tuple_schema(args: tuple[Any, ...], where: str) -> dict[str, Any]:
    if not args or (len(args) == 2 and args[1] is Ellipsis):  # tuple, tuple[X, ...]: like list[X]
        return _array_schema(args[0] if args else None, where)
    if args == ((),):
        return {"type": "array", "maxItems": 0}
    return {
        "type": "array",
        "prefixItems": [schema_for_type(a, where=where) for a in args],
        "minItems": len(args),
        "maxItems": len(args),
    }


KEY_MARKS = {getattr(typing, n) for n in ("Required", "NotRequired", "ReadOnly") if hasattr(typing, n)}
DATE_TYPES = {datetime.datetime: "date-time", datetime.date: "date", datetime.time: "time"}
_local = threading.local()  # .building: the dataclasses/TypedDicts being read (recursion guard)


def records_being_read() -> list[Any]:
    if not hasattr(_local, "building"):
        _local.building = []
    return _local.building


def is_pydantic_model(hint: Any) -> bool:
    """A pydantic model class (pydantic is looked for only where it is already imported: a
    model class cannot exist otherwise, so it is never a dependency)."""
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return base is not None and isinstance(hint, type) and issubclass(hint, base)


def _record_schema(cls: type, where: str) -> dict[str, Any]:
    """An object schema for a dataclass or TypedDict: a property per field, the fields without
    a default required (a TypedDict: its required keys), no other keys."""
    if cls in records_being_read():
        raise TypeError(
            f"{where}: {cls.__name__} refers to itself; recursive types need a pydantic model or an explicit schema"
        )
    records_being_read().append(cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                if not f.init:
                    continue
                schema = schema_for_type(hints.get(f.name, Any), where=f"{where}, field `{f.name}`")
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    required.append(f.name)
                elif f.default is not dataclasses.MISSING and is_jsonable(plain_json(f.default)):
                    schema["default"] = plain_json(f.default)
                properties[f.name] = schema
        else:
            for name, hint in hints.items():
                properties[name] = schema_for_type(hint, where=f"{where}, key `{name}`")
            # the Required/NotRequired marks themselves: __required_keys__ misses them when the
            # annotations are strings (``from __future__ import annotations``)
            marked = {k: typing.get_origin(h) for k, h in hints.items()}
            required = [
                k
                for k in hints
                if marked[k] is getattr(typing, "Required", None)
                or (
                    marked[k] is not getattr(typing, "NotRequired", None)
                    and k in getattr(cls, "__required_keys__", hints)
                )
            ]
    finally:
        records_being_read().pop()
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def plain_json(value: Any) -> Any:
    """A default as JSON carries it: an Enum member's value, a date's ISO text."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


def hoist_defs(schema: Any, defs: dict[str, Any]) -> None:
    """Move ``$defs`` found anywhere in ``schema`` (pydantic puts them beside each model's
    schema) into ``defs``, which become the parameters' own: ``#/$defs/...`` refs resolve there."""
    if isinstance(schema, dict):
        defs.update(schema.pop("$defs", {}))
        for value in schema.values():
            hoist_defs(value, defs)
    elif isinstance(schema, list):
        for value in schema:
            hoist_defs(value, defs)


def enum_members(schema: Mapping[str, Any]) -> list[Any]:
    """The allowed values of a schema with an enum (directly, or in one of its anyOf/oneOf)."""
    members = list(schema.get("enum") or [])
    for sub in [*schema.get("anyOf", []), *schema.get("oneOf", [])]:
        if isinstance(sub, Mapping):
            members += list(sub.get("enum") or [])
    return members


def accepts_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        subs = list(schema.get("anyOf", [])) + list(schema.get("oneOf", []))
        if subs:
            return any(isinstance(s, Mapping) and accepts_null(s) for s in subs)
        return "enum" not in schema or None in schema["enum"]
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def or_null(schema: dict[str, Any]) -> dict[str, Any]:
    if isinstance(schema.get("type"), str) and set(schema) <= {"type", "enum", "description"}:
        out = dict(schema)
        out["type"] = [schema["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    description = schema.get("description")
    inner = {k: v for k, v in schema.items() if k != "description"}
    out = {"anyOf": [inner, {"type": "null"}]}
    if description:
        out["description"] = description
    return out


# Keywords whose subschemas apply to the object the schema itself describes: a name one of them
# declares is a name of that object too.
_SAME_OBJECT_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_OBJECT_ONE = ("if", "then", "else")
# Keywords that say what other names mean (a schema for them, or a pattern they match)
_OTHER_NAMES = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def declared_names(schema: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The names an object schema declares, in order: its ``properties``, ``required`` and
    ``dependentRequired`` names and ``dependentSchemas`` keys, and those of every subschema that
    applies to the same object (``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/``else``,
    ``dependentSchemas``, a ``$ref`` within the schema). None where one of them says what other
    names mean (``additionalProperties`` other than false, ``patternProperties``,
    ``unevaluatedProperties``) or a reference cannot be followed here: jsonschema decides then."""
    names: dict[str, None] = {}
    pending: collections.deque[Any] = collections.deque([schema])
    seen: set[int] = set()
    while pending:
        node = pending.popleft()  # breadth first: the schema's own properties are named first
        if not isinstance(node, Mapping) or id(node) in seen:
            continue  # true / false declare no names
        seen.add(id(node))
        if any(node.get(k, False) is not False for k in _OTHER_NAMES) or "$dynamicRef" in node:
            return None
        if node is not schema and "$id" in node:
            return None  # a resource of its own: its references resolve against another base
        for key in ("properties", "dependentSchemas", "dependentRequired"):
            if isinstance(node.get(key), Mapping):
                names.update(dict.fromkeys(k for k in node[key] if isinstance(k, str)))
        dependent = node.get("dependentRequired")
        for value in [node.get("required"), *(dependent.values() if isinstance(dependent, Mapping) else ())]:
            if isinstance(value, list):
                names.update(dict.fromkeys(k for k in value if isinstance(k, str)))
        for key in _SAME_OBJECT_LISTS:
            if isinstance(node.get(key), list):
                pending.extend(node[key])
        pending.extend(node.get(key) for key in _SAME_OBJECT_ONE)
        if isinstance(node.get("dependentSchemas"), Mapping):
            pending.extend(node["dependentSchemas"].values())
        if "$ref" in node:
            target = _local_reference(schema, node["$ref"])
            if target is None:
                return None
            pending.append(target)
    return tuple(names)


def _local_reference(root: Mapping[str, Any], ref: Any) -> Any:
    """What ``ref`` (``#`` or a JSON pointer ``#/...``) points to in ``root``; None for another
    kind of reference, or a pointer to nothing."""
    if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
        return None
    node: Any = root
    for part in ref[2:].split("/") if ref != "#" else []:
        key = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node
