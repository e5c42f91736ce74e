"""Tools: Python functions the model may call, their JSON schemas, and safe execution.

    @tool
    def get_forecast(city: str, days: int = 3) -> dict:
        '''Weather forecast for a city, e.g. {"city": "Lisbon", "days": 2}.

        Args:
            city: City name, e.g. "Lisbon".
            days: How many days ahead (1-7).
        '''

    tools = ToolSet([get_forecast, some_plain_function])
    outcome = tools.execute(call, timeout=30, limit=4000)   # never raises for model mistakes

A ``Tool`` carries a name, a description (what the model reads), a JSON schema of its
arguments (``parameters``) and the function. Schemas come from type hints and the docstring
(``Tool.from_function``; dataclasses, TypedDicts, Enums, dates and pydantic models included,
and the JSON arguments are turned back into them before the call) or from an OpenAI function
definition (``Tool.from_openai``).
Arguments are validated with jsonschema (Draft 2020-12) before the function runs; every
problem the model can cause becomes a ``ToolOutcome`` with ``ok=False`` and an ``ERROR: ...``
text written for the model, never an exception in the caller.
"""
from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import copy
import dataclasses
import datetime
import difflib
import enum
import inspect
import json
import logging
import math
import queue
import re
import sys
import threading
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import jsonschema
from jsonschema import Draft202012Validator

from ._schema import DATE_FORMATS, example_value, type_label
from .errors import ToolArgumentError

__all__ = ["Tool", "tool", "ToolSet", "ToolOutcome", "Example", "render_result", "truncate",
           "MAX_ARG_CHARS", "MAX_ARG_DEPTH"]

log = logging.getLogger(__name__)

# Hard limits on what a model may pass as arguments; larger/deeper input is refused with a
# ToolArgumentError before jsonschema (or the tool) ever sees it.
MAX_ARG_CHARS = 1_000_000      # total characters of all keys and string values (+1 per other value)
MAX_ARG_DEPTH = 64             # nesting levels of lists/dicts inside the arguments object
_MAX_LISTED_ERRORS = 5
_NAME_RE = re.compile(r"^[^\W\d][\w.\-]{0,127}$")  # identifiers (unicode ok), plus '.' and '-'

_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


# --------------------------------------------------------------------------------------------
# Small text helpers
# --------------------------------------------------------------------------------------------

def _show(value: Any, limit: int = 60) -> str:
    """A short, single-line, printable rendering of a name or value for error messages."""
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable():
            return value
        text = repr(value[:limit])
        return text + ("…" if len(value) > limit else "")
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break error reporting
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def _short_repr(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        text = repr(value[:limit])
        return text + ("…" if len(value) > limit else "")
    return _show(value, limit)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    for py, name in (((bool,), "boolean"), ((int,), "integer"), ((float,), "number"), ((str,), "string"),
                     ((list, tuple), "array"), ((dict,), "object")):
        if isinstance(value, py):
            return name
    return type(value).__name__


# --------------------------------------------------------------------------------------------
# Docstrings
# --------------------------------------------------------------------------------------------

_GOOGLE_PARAMS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
                  "kwargs", "other parameters"}
_GOOGLE_OTHER = {"returns", "return", "yields", "yield", "raises", "raise", "examples", "example", "notes",
                 "note", "warnings", "warning", "see also", "attributes", "todo", "references", "methods"}
_GOOGLE_HEADER = re.compile(r"^(\s*)([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:([^:]+?)\s+)?\*{0,2}(\w+)\s*:\s*(.*)$")
_REST_FIELD = re.compile(r"^:\w[^:]*:")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {param: description}).

    Understands Google style (``Args:`` sections), reST (``:param x:``) and NumPy style
    (``Parameters`` + dashes). The description is the text before the first section, on one
    line; other sections (Returns, Raises, Examples, ...) are left out.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, list[str]] = {}
    state = "desc"          # desc | google | numpy | rest | other
    current: str | None = None
    entry_indent: int | None = None
    header_indent = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        # Section starts (any state)
        if stripped and _NUMPY_RULE.match(nxt) and not _NUMPY_RULE.match(line):
            name = stripped.lower()
            state = "numpy" if name in _GOOGLE_PARAMS else "other"
            current, entry_indent = None, None
            i += 2
            continue
        m = _GOOGLE_HEADER.match(line)
        if m and m.group(2).lower() in (_GOOGLE_PARAMS | _GOOGLE_OTHER):
            state = "google" if m.group(2).lower() in _GOOGLE_PARAMS else "other"
            header_indent = len(m.group(1))
            current, entry_indent = None, None
            i += 1
            continue
        if stripped.startswith(":") and _REST_FIELD.match(stripped):
            rm = _REST_PARAM.match(stripped)
            if rm:
                state, current = "rest", rm.group(2)
                params.setdefault(current, []).append(rm.group(3))
            else:
                state, current = "other", None
            i += 1
            continue
        if state == "desc":
            desc.append(line)
        elif state == "google":
            if stripped and indent <= header_indent:
                state, current = "other", None   # dedented text after the section: not ours
            elif stripped:
                if entry_indent is None:
                    entry_indent = indent
                em = _GOOGLE_ENTRY.match(stripped) if indent == entry_indent else None
                if em:
                    current = em.group(1)
                    params.setdefault(current, []).append(em.group(3))
                elif current is not None:
                    params[current].append(stripped)
        elif state == "numpy":
            if stripped:
                if entry_indent is None:
                    entry_indent = indent
                em = _NUMPY_ENTRY.match(stripped) if indent <= entry_indent else None
                if em:
                    current = em.group(1)
                    params.setdefault(current, [])
                elif current is not None:
                    params[current].append(stripped)
        elif state == "rest":
            if stripped and current is not None:
                params[current].append(stripped)
        i += 1
    description = _one_line("\n".join(desc))
    return description, {k: _one_line(" ".join(v)) for k, v in params.items() if _one_line(" ".join(v))}


# --------------------------------------------------------------------------------------------
# Type hints -> JSON schema
# --------------------------------------------------------------------------------------------

def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError, RecursionError):
        return False


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {}
    kinds = {_json_type_of(v) for v in values}
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
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in _KEY_MARKS:   # TypedDict's Required[...] / NotRequired[...]
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
        values = [v.value if isinstance(v, enum.Enum) else v for v in args]
        return _enum_schema(values)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
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
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([m.value for m in hint])
    if isinstance(hint, type) and hint in _DATE_TYPES:
        return {"type": "string", "format": _DATE_TYPES[hint]}
    if _pydantic_model(hint):
        import pydantic

        return pydantic.TypeAdapter(hint).json_schema()
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        return _record_schema(hint, where)
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if isinstance(hint, type) and issubclass(hint, str):
        return {"type": "string"}
    container = origin or hint
    if container in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable):
        schema = {"type": "array"}
        if args:
            item = schema_for_type(args[0], where=where)
            if item:
                schema["items"] = item
        return schema
    if container is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            schema = {"type": "array"}
            if args and schema_for_type(args[0], where=where):
                schema["items"] = schema_for_type(args[0], where=where)
            return schema
        if args == ((),):
            return {"type": "array", "maxItems": 0}
        return {"type": "array", "prefixItems": [schema_for_type(a, where=where) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if container in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        schema = {"type": "object"}
        if len(args) == 2:
            if args[0] not in (str, Any):
                raise TypeError(f"{where}: JSON objects only have string keys; use dict[str, ...] (got {hint!r})")
            value = schema_for_type(args[1], where=where)
            if value:
                schema["additionalProperties"] = value
        return schema
    raise TypeError(f"{where}: cannot derive a JSON schema from type {hint!r}; use str, int, float, bool, "
                    "Literal, an Enum, Optional, list[...], dict[str, ...], datetime.date/datetime/time, a "
                    "dataclass, a TypedDict or a pydantic model, or give the schema explicitly "
                    "(Tool(name, description, parameters, fn) or Tool.from_openai)")


_KEY_MARKS = {getattr(typing, n) for n in ("Required", "NotRequired", "ReadOnly") if hasattr(typing, n)}
_DATE_TYPES = {datetime.datetime: "date-time", datetime.date: "date", datetime.time: "time"}
_local = threading.local()   # .building: the dataclasses/TypedDicts being read (recursion guard)


def _building() -> list[Any]:
    if not hasattr(_local, "building"):
        _local.building = []
    return _local.building


def _pydantic_model(hint: Any) -> bool:
    """A pydantic model class (pydantic is looked for only where it is already imported: a
    model class cannot exist otherwise, so it is never a dependency)."""
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return base is not None and isinstance(hint, type) and issubclass(hint, base)


def _record_schema(cls: type, where: str) -> dict[str, Any]:
    """An object schema for a dataclass or TypedDict: a property per field, the fields without
    a default required (a TypedDict: its required keys), no other keys."""
    if cls in _building():
        raise TypeError(f"{where}: {cls.__name__} refers to itself; recursive types need a pydantic model "
                        "or an explicit schema")
    _building().append(cls)
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
                elif f.default is not dataclasses.MISSING and _jsonable(_plain(f.default)):
                    schema["default"] = _plain(f.default)
                properties[f.name] = schema
        else:
            for name, hint in hints.items():
                properties[name] = schema_for_type(hint, where=f"{where}, key `{name}`")
            # the Required/NotRequired marks themselves: __required_keys__ misses them when the
            # annotations are strings (``from __future__ import annotations``)
            marked = {k: typing.get_origin(h) for k, h in hints.items()}
            required = [k for k in hints if marked[k] is getattr(typing, "Required", None)
                        or (marked[k] is not getattr(typing, "NotRequired", None)
                            and k in getattr(cls, "__required_keys__", hints))]
    finally:
        _building().pop()
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _plain(value: Any) -> Any:
    """A default as JSON carries it: an Enum member's value, a date's ISO text."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


def _hoist_defs(schema: Any, defs: dict[str, Any]) -> None:
    """Move ``$defs`` found anywhere in ``schema`` (pydantic puts them beside each model's
    schema) into ``defs``, which become the parameters' own: ``#/$defs/...`` refs resolve there."""
    if isinstance(schema, dict):
        defs.update(schema.pop("$defs", {}))
        for value in schema.values():
            _hoist_defs(value, defs)
    elif isinstance(schema, list):
        for value in schema:
            _hoist_defs(value, defs)


def _iso(kind: type) -> Callable[[Any], Any]:
    """Reads an ISO 8601 date, date-time or time (a trailing Z is UTC)."""
    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(f"expected an ISO 8601 {_DATE_TYPES[kind]} string, got {_json_type_of(value)}")
        text = value.strip()
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            return kind.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{_short_repr(value)} is not an ISO 8601 {_DATE_TYPES[kind]} like "
                             f"\"{DATE_FORMATS[_DATE_TYPES[kind]][0]}\"") from None
    return convert


# The formats jsonschema checks, with date, date-time and time read as the converters read them
# (ISO 8601 as Python reads it: "2026-01-31T09:30" too), whichever optional checkers are installed.
_FORMATS = jsonschema.FormatChecker()
for _kind, _name in _DATE_TYPES.items():
    _FORMATS.checks(_name, raises=(ValueError, TypeError))(
        lambda value, read=_iso(_kind): not isinstance(value, str) or read(value) is not None)


def _converter(hint: Any) -> Callable[[Any], Any] | None:
    """A converter from the JSON value to what the hint asks for (an Enum member, a date, a
    dataclass, a TypedDict, a pydantic model, or lists, dicts and Optionals of them), or None
    when the JSON value is already right."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated or origin in _KEY_MARKS:
        return _converter(args[0])
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        members = [a for a in args if a is not type(None)]
        inner = _converter(members[0]) if len(members) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if isinstance(hint, type) and hint in _DATE_TYPES:
        return _iso(hint)
    if _pydantic_model(hint):
        import pydantic

        return pydantic.TypeAdapter(hint).validate_python
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        if hint in _building():
            return None
        _building().append(hint)
        try:
            fields = {k: c for k, h in typing.get_type_hints(hint, include_extras=True).items()
                      if (c := _converter(h)) is not None}
        finally:
            _building().pop()
        make = hint if dataclasses.is_dataclass(hint) else dict
        return lambda v: make(**{k: fields[k](x) if k in fields else x for k, x in v.items()})
    container = origin or hint
    if container in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable) \
            and args:
        item = _converter(args[0])
        return None if item is None else (lambda v: [item(x) for x in v])
    if container in (dict, collections.abc.Mapping, collections.abc.MutableMapping) and len(args) == 2:
        value = _converter(args[1])
        return None if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    return None


# --------------------------------------------------------------------------------------------
# Validation errors -> text for the model
# --------------------------------------------------------------------------------------------

def _format_path(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + _show(str(part), 40)
    return out


def _suggest(word: str, options: Iterable[str]) -> str | None:
    options = list(options)
    if not options or len(word) > 200:
        return None
    lowered = {o.lower(): o for o in options}
    if word.lower() in lowered:
        return lowered[word.lower()]
    if len(word) >= 3:
        prefixed = [o for o in lowered if o.startswith(word.lower()) or word.lower().startswith(o)]
        if len(prefixed) == 1:
            return lowered[prefixed[0]]
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def _error_messages(errors: Iterable[jsonschema.ValidationError]) -> list[str]:
    messages: list[str] = []
    seen: set[str] = set()

    def add(msg: str) -> None:
        if msg not in seen:
            seen.add(msg)
            messages.append(msg)

    for err in errors:
        path = _format_path(err.absolute_path)
        prefix = f"`{path}`: " if path else ""
        kind = err.validator
        if kind == "required" and isinstance(err.instance, dict):
            for key in err.validator_value:
                if key not in err.instance:
                    add(f"missing required argument `{key}`" if not path else f"{prefix}missing required key `{key}`")
        elif kind == "additionalProperties" and isinstance(err.instance, dict):
            known = list((err.schema.get("properties") or {}).keys())
            patterns = list((err.schema.get("patternProperties") or {}).keys())
            for key in err.instance:
                if key in known or any(re.search(p, key) for p in patterns if isinstance(key, str)):
                    continue
                hint = _suggest(key, known) if isinstance(key, str) else None
                what = "argument" if not path else "key"
                msg = f"{prefix}unexpected {what} `{_show(key, 40)}`"
                if hint:
                    msg += f" (did you mean `{hint}`?)"
                msg += f"; valid {what}s: {', '.join(known) if known else '(none)'}"
                add(msg)
        elif kind == "type":
            expected = err.validator_value
            expected = " or ".join(expected) if isinstance(expected, list) else expected
            add(f"{prefix}{_short_repr(err.instance)} is not of type '{expected}'")
        elif kind == "enum":
            choices = ", ".join(json.dumps(v, ensure_ascii=False) for v in err.validator_value)
            add(f"{prefix}{_short_repr(err.instance)} is not one of {choices}")
        elif kind == "format" and err.validator_value in DATE_FORMATS:
            add(f"{prefix}{_short_repr(err.instance)} is not an ISO 8601 {err.validator_value} like "
                f"\"{DATE_FORMATS[err.validator_value][0]}\"")
        elif kind in ("anyOf", "oneOf") and err.context:
            best = jsonschema.exceptions.best_match(err.context)
            inner = _error_messages([best])
            add(inner[0] if inner else f"{prefix}{_short_repr(err.instance)} is not valid")
        else:
            msg = err.message
            if len(msg) > 200:
                msg = msg[:200] + "…"
            add(prefix + msg)
    return messages


def _check_shape(value: Any) -> None:
    """Refuse arguments JSON could not carry or that are absurdly big or deep, without recursion.

    Cost: characters of every key and string, plus one per container and per element; a
    container's elements are charged before they are visited, so a huge list fails at once.
    """
    budget = MAX_ARG_CHARS
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 0, ())]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, str):
            budget -= len(node)
        elif isinstance(node, (dict, list, tuple)):
            if depth >= MAX_ARG_DEPTH:
                raise ToolArgumentError(f"arguments are nested too deeply (more than {MAX_ARG_DEPTH} levels); "
                                        "pass flat values")
            budget -= 1 + len(node)
            if budget < 0:
                break
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str):
                        where = f" in `{_format_path(path)}`" if path else ""
                        raise ToolArgumentError(f"argument names must be strings{where}; got {_short_repr(key)} "
                                                f"({type(key).__name__})")
                    budget -= len(key)
                    stack.append((item, depth + 1, (*path, key)))
            else:
                stack.extend((item, depth + 1, (*path, index)) for index, item in enumerate(node))
        if budget < 0:
            break
    if budget < 0:
        raise ToolArgumentError(f"arguments are too large (more than {MAX_ARG_CHARS:,} characters); "
                                "pass shorter values")


# --------------------------------------------------------------------------------------------
# Tool
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Tool:
    """A callable the model may use: name, description, JSON schema of the arguments, function.

    ``tool(*args, **kwargs)`` calls the function directly (decorated functions stay usable as
    plain functions); ``tool.bind(args)`` validates model arguments and returns the kwargs.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] | None = field(default=None, repr=False)
    _validator: Any = field(default=None, init=False, repr=False)
    _accepts: frozenset[str] | None = field(default=None, init=False, repr=False)
    _converters: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"invalid tool name {self.name!r}: use letters, digits, '_', '.' or '-' "
                             "(starting with a letter or '_', at most 128 characters)")
        object.__setattr__(self, "description", _one_line(self.description or ""))
        params = {"type": "object", "properties": {}} if self.parameters is None else self.parameters
        if not isinstance(params, Mapping):
            raise TypeError(f"tool {self.name}: parameters must be a JSON schema object, got {type(params).__name__}")
        params = dict(params)
        if params.get("type", "object") != "object":
            raise ValueError(f"tool {self.name}: parameters must describe an object (\"type\": \"object\")")
        try:
            Draft202012Validator.check_schema(params)
        except jsonschema.SchemaError as err:
            raise ValueError(f"tool {self.name}: invalid JSON schema for parameters: {err.message}") from None
        object.__setattr__(self, "parameters", params)
        object.__setattr__(self, "_validator",
                           Draft202012Validator(params, format_checker=_FORMATS))
        object.__setattr__(self, "_accepts", _accepted_names(self.fn))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None) -> "Tool":
        """Build a tool from a function: name, docstring text and a schema from the type hints.

        Parameters without a default are required; defaults are recorded as ``"default"``; a
        parameter without a hint accepts any JSON value. Unexpected keys are refused
        (``additionalProperties: false``) unless the function takes ``**kwargs``.
        """
        if isinstance(fn, Tool):
            return fn._renamed(name or fn.name, fn.description if description is None else description)
        if not callable(fn):
            raise TypeError(f"a tool needs a callable, got {type(fn).__name__}")
        tool_name = name or getattr(fn, "__name__", None)
        if not tool_name or tool_name == "<lambda>":
            raise ValueError(f"cannot name a tool for {fn!r} (a lambda or partial?); pass name=...")
        doc_description, doc_params = parse_docstring(inspect.getdoc(fn))
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as err:
            raise TypeError(f"tool {tool_name}: cannot read the signature of {fn!r}: {err}") from None
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as err:  # noqa: BLE001 - NameError for unresolvable forward refs, and others
            raise TypeError(f"tool {tool_name}: cannot resolve the type hints of {getattr(fn, '__qualname__', fn)!r}: "
                            f"{err}") from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        converters: dict[str, Callable[[Any], Any]] = {}
        defs: dict[str, Any] = {}
        open_keys = False
        for pname, param in signature.parameters.items():
            if param.kind is param.VAR_KEYWORD:
                open_keys = True
                continue
            if param.kind is param.VAR_POSITIONAL:
                continue
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"tool {tool_name}: positional-only parameter `{pname}` cannot be passed by name")
            hint = hints.get(pname, inspect.Parameter.empty)
            schema = schema_for_type(hint, where=f"tool {tool_name}, parameter `{pname}`")
            if pname in doc_params and "description" not in schema:
                schema["description"] = doc_params[pname]
            _hoist_defs(schema, defs)
            if param.default is param.empty:
                required.append(pname)
            else:
                default = _plain(param.default)
                if default is None and schema and not _accepts_null(schema):
                    schema = _nullable(schema)     # `x: list = None` means "list or nothing"
                if _jsonable(default):
                    schema["default"] = json.loads(json.dumps(default))   # tuples -> lists
            properties[pname] = schema
            conv = _converter(hint)
            if conv is not None:
                converters[pname] = conv
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        if not open_keys:
            parameters["additionalProperties"] = False
        if defs:
            parameters["$defs"] = defs
        made = cls(tool_name, doc_description if description is None else description, parameters, fn)
        object.__setattr__(made, "_converters", converters)
        return made

    @classmethod
    def from_openai(cls, schema: Mapping[str, Any], fn: Callable[..., Any] | None = None) -> "Tool":
        """Build a tool from an OpenAI function definition.

        Accepts ``{"type": "function", "function": {"name", "description", "parameters"}}``
        unchanged, the bare ``{"name", "description", "parameters"}`` dict, and the flat
        Responses-API form ``{"type": "function", "name": ...}``.
        """
        if not isinstance(schema, Mapping):
            raise TypeError(f"expected an OpenAI tool definition (a dict), got {type(schema).__name__}")
        spec = schema.get("function", schema)
        if not isinstance(spec, Mapping) or "name" not in spec:
            raise ValueError("an OpenAI tool definition needs a name: {\"type\": \"function\", "
                             "\"function\": {\"name\": ..., \"parameters\": {...}}}")
        if schema.get("type", "function") != "function":
            raise ValueError(f"unsupported tool type {schema.get('type')!r}; only \"function\" tools can be called")
        parameters = copy.deepcopy(spec.get("parameters")) or {"type": "object", "properties": {}}
        return cls(spec["name"], spec.get("description") or "", parameters, fn)

    # -- use ----------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise NotImplementedError(f"tool {self.name} has no implementation (built without fn)")
        return self.fn(*args, **kwargs)

    @property
    def __wrapped__(self) -> Callable[..., Any] | None:
        return self.fn

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": copy.deepcopy(self.parameters)}}

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required") or [])

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.parameters.get("properties") or {})

    def signature(self) -> str:
        """A compact signature for messages: ``get_forecast(city: string, days?: integer)``."""
        parts = []
        required = set(self.required)
        for key, schema in self.properties.items():
            label = type_label(schema if isinstance(schema, Mapping) else {})
            parts.append(f"{key}{'' if key in required else '?'}: {label}")
        return f"{self.name}({', '.join(parts)})"

    def bind(self, args: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """Validate model-supplied arguments; return the keyword arguments for the function.

        A bare string binds to the single required parameter (or the only parameter); a
        string holding a JSON object is read as that object. Raises ToolArgumentError with a
        message for the model that names each failing path.
        """
        if args is None:
            args = {}
        if isinstance(args, str):
            args = self._bind_bare(args)
        elif isinstance(args, Mapping):
            args = dict(args)
        else:
            raise ToolArgumentError(f"arguments must be a JSON object like {self._example()}, "
                                    f"not {_json_type_of(args)}")
        _check_shape(args)
        if self._accepts is not None and self.parameters.get("additionalProperties") is not False:
            extra = self.unexpected(args)
            if extra:
                known = sorted(self._accepts)
                hint = _suggest(extra[0], known)
                raise ToolArgumentError(f"unexpected argument `{_show(extra[0], 40)}`"
                                        + (f" (did you mean `{hint}`?)" if hint else "")
                                        + f"; valid arguments: {', '.join(known) if known else '(none)'}")
        args = self._fold_case(args)
        try:
            errors = list(self._validator.iter_errors(args))
            messages = _error_messages(sorted(errors, key=lambda e: (
                [str(p) for p in e.absolute_path], e.validator != "required", str(e.validator))))
        except RecursionError:
            raise ToolArgumentError("arguments are nested too deeply to check; pass flat values") from None
        if messages:
            shown = messages[:_MAX_LISTED_ERRORS]
            more = len(messages) - len(shown)
            text = "; ".join(shown) + (f"; and {more} more" if more else "")
            raise ToolArgumentError(text)
        return self._coerce(args)

    def unexpected(self, args: Mapping[str, Any]) -> list[str]:
        """The names in ``args`` that this tool does not take (bind() refuses them): outside
        ``properties`` when the schema is closed, else outside the function's parameters."""
        if self.parameters.get("additionalProperties") is False:
            known: Iterable[str] = self.parameters.get("properties") or {}
        elif self._accepts is not None:
            known = self._accepts
        else:
            return []
        return [k for k in args if k not in known]

    # -- internals ----------------------------------------------------------------------------
    def _renamed(self, name: str, description: str | None = None) -> "Tool":
        made = replace(self, name=name, description=self.description if description is None else description)
        object.__setattr__(made, "_converters", self._converters)
        return made

    def _example(self) -> str:
        example = {}
        props = self.properties
        for key in self.required or list(props)[:1]:
            sch = props.get(key, {})
            example[key] = example_value(sch if isinstance(sch, Mapping) else {})
        return json.dumps(example, ensure_ascii=False)

    def _bind_bare(self, text: str) -> dict[str, Any]:
        if len(text) > MAX_ARG_CHARS:
            raise ToolArgumentError(f"arguments are too large (more than {MAX_ARG_CHARS:,} characters); "
                                    "pass shorter values")
        props = self.properties
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                return value
        if not props:
            if not stripped:
                return {}
            raise ToolArgumentError(f"`{self.name}` takes no arguments; call it with an empty object {{}}")
        required = self.required
        target = required[0] if len(required) == 1 else (next(iter(props)) if len(props) == 1 and not required
                                                         else None)
        if target is None:
            listing = ", ".join(f"{k}{'' if k in required else ' (optional)'}" for k in props)
            raise ToolArgumentError(f"`{self.name}` takes several arguments ({listing}); pass them as a "
                                    f"JSON object, e.g. {self._example()}")
        schema = props.get(target)
        if isinstance(schema, Mapping) and not _accepts_string(schema):
            try:
                return {target: json.loads(stripped)}
            except (ValueError, RecursionError):
                pass
        return {target: text}

    def _fold_case(self, args: dict[str, Any]) -> dict[str, Any]:
        """A string that matches one allowed value of its parameter but for case or surrounding
        spaces becomes that value ("F" for an enum of "c", "f"): there is nothing to guess."""
        props = self.properties   # a fresh copy per access: take it once
        for key, value in args.items():
            schema = props.get(key)
            if not isinstance(value, str) or not isinstance(schema, Mapping):
                continue
            members = [m for m in _enum_members(schema) if isinstance(m, str)]
            if not members or value in members:
                continue
            same = [m for m in members if m.casefold() == value.strip().casefold()]
            if len(same) == 1:
                args[key] = same[0]
        return args

    def _coerce(self, args: dict[str, Any]) -> dict[str, Any]:
        props = self.properties
        for key, value in args.items():
            schema = props.get(key)
            if isinstance(value, float) and isinstance(schema, Mapping) and schema.get("type") in (
                    "integer", ["integer", "null"]) and math.isfinite(value) and value.is_integer():
                args[key] = int(value)
        for key, conv in self._converters.items():
            if key in args:
                try:
                    args[key] = conv(args[key])
                except (ValueError, TypeError) as err:
                    raise ToolArgumentError(f"`{key}`: {err}") from None
        return args


def _enum_members(schema: Mapping[str, Any]) -> list[Any]:
    """The allowed values of a schema with an enum (directly, or in one of its anyOf/oneOf)."""
    members = list(schema.get("enum") or [])
    for sub in [*schema.get("anyOf", []), *schema.get("oneOf", [])]:
        if isinstance(sub, Mapping):
            members += list(sub.get("enum") or [])
    return members


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        subs = list(schema.get("anyOf", [])) + list(schema.get("oneOf", []))
        if subs:
            return any(isinstance(s, Mapping) and _accepts_null(s) for s in subs)
        return "enum" not in schema or None in schema["enum"]
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
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


def _accepts_string(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        if "enum" in schema:
            return any(isinstance(v, str) for v in schema["enum"])
        if "anyOf" in schema or "oneOf" in schema:
            return any(isinstance(s, Mapping) and _accepts_string(s)
                       for s in schema.get("anyOf", []) + schema.get("oneOf", []))
        return True
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _accepted_names(fn: Callable[..., Any] | None) -> frozenset[str] | None:
    """Keyword names fn accepts, or None when it takes **kwargs or cannot be inspected."""
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@typing.overload
def tool(fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> Tool: ...
@typing.overload
def tool(fn: None = None, *, name: str | None = None,
         description: str | None = None) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator turning a function into a Tool: ``@tool`` or ``@tool(name=..., description=...)``."""
    if fn is None:
        return lambda f: Tool.from_function(f, name=name, description=description)
    return Tool.from_function(fn, name=name, description=description)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

def render_result(value: Any) -> str:
    """What the model sees of a result: str as is, anything else as JSON (default=str)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def truncate(text: str, limit: int | None) -> str:
    """Cut text to at most ``limit`` characters, ending with a visible ``[truncated N chars]``."""
    if limit is None or len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):   # the marker's length depends on N; settle it
        marker = f"\n[truncated {len(text) - keep} chars]"
        keep = max(0, limit - len(marker))
    return text[:keep] + f"\n[truncated {len(text) - keep} chars]"


@dataclass(frozen=True)
class ToolOutcome:
    """One executed call. ``output`` is what the model sees; ``error`` is the failure kind or None:
    "unknown_tool" | "bad_arguments" | "tool_error" | "timeout". ``ignored``: argument names
    the call carried that are not parameters of the tool and were left out (see ToolSet)."""

    name: str
    args: dict[str, Any] | str
    ok: bool
    output: str
    error: str | None = None
    seconds: float = 0.0
    ignored: tuple[str, ...] = ()


def _exc_text(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001
        message = ""
    name = type(exc).__name__
    return f"ERROR: {name}: {message}" if message else f"ERROR: {name}"


class _Worker:
    """A daemon thread that runs tool calls one at a time and returns itself to the idle pool
    after each one. Reusing threads keeps a call's overhead in the tens of microseconds; a
    worker whose call timed out is simply not waited for (Python cannot kill a thread) and
    rejoins the pool if the call ever ends."""

    _idle: "queue.SimpleQueue[_Worker]" = queue.SimpleQueue()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="textagent-tool", daemon=True).start()

    @classmethod
    def get(cls) -> "_Worker":
        try:
            return cls._idle.get_nowait()
        except queue.Empty:
            return cls()

    def _loop(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box[0] = fn()
            except BaseException as exc:  # noqa: BLE001 - reported to the model, never re-raised here
                box[1] = exc
            del fn
            done.set()
            self._idle.put(self)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _settle(result: Any) -> Any:
    """The value of a tool's result: an ``async def`` tool's coroutine (any awaitable) is run to
    its end on an event loop of its own. When a loop is already running in this thread (the
    agent was called from async code), that loop is blocked by this very call, so the
    awaitable runs in a helper thread with its own loop."""
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(result))
    box: list[Any] = [None, None]
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            box[0] = ctx.run(asyncio.run, _awaited(result))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            box[1] = exc

    thread = threading.Thread(target=run, name="textagent-async-tool", daemon=True)
    thread.start()
    thread.join()
    if box[1] is not None:
        raise box[1]
    return box[0]


def _run_with_timeout(fn: Callable[[], Any], timeout: float | None) -> tuple[Any, BaseException | None, bool]:
    """(result, exception, timed_out). With a timeout the call runs in a daemon worker thread
    that is abandoned (not killed: Python cannot) when it does not finish in time."""
    if timeout is None:
        try:
            return fn(), None, False
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a tool must never end the run
            return None, exc, False
    box: list[Any] = [None, None]
    done = threading.Event()
    ctx = contextvars.copy_context()
    _Worker.get().jobs.put((lambda: ctx.run(fn), box, done))
    if not done.wait(timeout):
        return None, None, True
    return box[0], box[1], False


# --------------------------------------------------------------------------------------------
# ToolSet
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    """A worked exchange shown to the model before its task (one-shot prompting).

    ``calls`` are ``(tool name, args, result text)`` in order; each becomes a TOOL line and the
    OBSERVATION that answers it (a result starting with "ERROR:" is shown as a failed call).
    No calls: a question answered directly. Small models copy a concrete exchange far better
    than a rule, and copy its words too: give each example a task unlike the others and an
    answer that restates its own results.

    ``replies``: how many of the calls each reply writes, in order; calls that do not depend on
    each other (several items asked about at once) are shown in one reply, their results coming
    back together: ``replies=(2, 1)`` for two lookups and then a calculation with both. Empty
    (default): one call per reply, each waiting for the result of the one before.
    """

    task: str
    calls: tuple[tuple[str, dict[str, Any], str], ...]
    answer: str
    replies: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.replies and (sum(self.replies) != len(self.calls) or min(self.replies) < 1):
            raise ValueError(f"Example {self.task!r}: replies {self.replies} must be positive and add up to "
                             f"its {len(self.calls)} calls")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class ToolSet(Mapping[str, Tool]):
    """An immutable name -> Tool mapping that executes model calls safely.

    ``ToolSet([tool_a, plain_function, ...])`` or ``ToolSet({"name": fn_or_tool})``; plain
    callables are wrapped with Tool.from_function. Duplicate names are an error. A ToolSet in
    the list brings its tools and examples: ``toolset.with_tools(f)``, ``toolset + [f]`` and
    ``toolset.select("a", "b")`` make new sets that keep the examples that still apply. ``example``
    is the worked exchange the agent shows the model, or several in the order shown (else
    one is built from a tool of the set); ``examples`` holds them as a tuple.

    ``max_examples``: show at most this many examples that call tools, chosen per task: the
    ones whose questions share the most words with it (rare words count more), the closest
    last, where the model looks. Examples without calls are always shown: they teach when
    not to call. They come first, unless one of them is closer to the task than every tool
    example: then they come last. None (default) shows every example in the given order. A
    large pool then costs no prompt: the model sees the exchanges its question resembles, not
    a list of unrelated ones whose numbers it would copy.

    ``extra_args``: what execute() does with a call that names arguments the tool does not
    have, when the rest of the call is valid: "ignore" (default) runs it without them and says
    so in the output, as pydantic ignores unknown fields; "error" refuses the call. Small
    models add fields of the result they expect (`"confirmation": "..."` to a booking) and
    then repeat the refused call word for word.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] | Mapping[str, Any] | None = (), *,
                 example: Example | Iterable[Example] | None = None, max_examples: int | None = None,
                 extra_args: Literal["ignore", "error"] = "ignore") -> None:
        if extra_args not in ("ignore", "error"):
            raise ValueError(f'extra_args must be "ignore" or "error", not {extra_args!r}')
        if max_examples is not None and (isinstance(max_examples, bool) or not isinstance(max_examples, int)
                                         or max_examples < 0):
            raise ValueError(f"max_examples must be None or a whole number >= 0, not {max_examples!r}")
        self.extra_args, self.max_examples = extra_args, max_examples
        self._tools: dict[str, Tool] = {}
        examples = () if example is None else (example,) if isinstance(example, Example) else tuple(example)
        if not all(isinstance(e, Example) for e in examples):
            raise TypeError("example must be a tools.Example or a sequence of them")
        self.examples: tuple[Example, ...] = examples
        if tools is None:
            return
        if isinstance(tools, (Tool, ToolSet)) or (callable(tools) and not isinstance(tools, (Mapping, Iterable))):
            tools = [tools]
        items: list[Tool] = []
        if isinstance(tools, Mapping):
            for key, value in tools.items():
                if isinstance(value, Tool):
                    items.append(value if value.name == key else value._renamed(key))
                else:
                    items.append(Tool.from_function(value, name=key))
        else:
            for item in tools:
                if isinstance(item, ToolSet):   # its tools, examples and max_examples come along
                    items.extend(item.values())
                    examples += tuple(e for e in item.examples if e not in examples)
                    if self.max_examples is None:
                        self.max_examples = item.max_examples
                elif isinstance(item, str):
                    raise TypeError(f"got the tool name {item!r}: pass the ToolSet itself or toolset.values() "
                                    "(iterating a ToolSet gives its tool names), and add tools with "
                                    "toolset.with_tools(f) or toolset + [f], which keep its examples")
                else:
                    items.append(item if isinstance(item, Tool) else Tool.from_function(item))
        self.examples = examples
        for item in items:
            if item.name in self._tools:
                raise ValueError(f"two tools are named {item.name!r}; tool names must be unique")
            self._tools[item.name] = item
        unknown = sorted({name for e in examples for name, _, _ in e.calls if name not in self._tools})
        if unknown:
            raise ValueError(f"the example calls tools that are not in this set: {', '.join(unknown)}")

    def with_tools(self, *tools: Tool | Callable[..., Any] | "ToolSet") -> "ToolSet":
        """A new ToolSet: these tools (Tools, functions, or ToolSets, whose examples come too)
        added to this set's, with this set's examples, ``max_examples`` and ``extra_args``.
        ``toolset + [f, g]`` is the same."""
        return ToolSet([self, *tools], max_examples=self.max_examples, extra_args=self.extra_args)

    def select(self, *names: str) -> "ToolSet":
        """A new ToolSet of the named tools only, in the order given, keeping the examples whose
        calls use only those tools (the ones answered without tools among them)."""
        missing = [n for n in names if n not in self._tools]
        if missing:
            raise KeyError(f"no tool named {missing[0]!r} in this set; it has {', '.join(self._tools)}")
        kept = tuple(e for e in self.examples if all(name in names for name, _, _ in e.calls))
        return ToolSet([self._tools[n] for n in dict.fromkeys(names)], example=kept,
                       max_examples=self.max_examples, extra_args=self.extra_args)

    def __add__(self, other: Any) -> "ToolSet":
        if isinstance(other, (Tool, ToolSet)) or (callable(other) and not isinstance(other, Iterable)):
            return self.with_tools(other)
        if isinstance(other, Mapping):
            return self.with_tools(ToolSet(other))
        if isinstance(other, Iterable) and not isinstance(other, str):
            return self.with_tools(*other)
        return NotImplemented

    def __radd__(self, other: Any) -> "ToolSet":
        if isinstance(other, Iterable) and not isinstance(other, (str, Mapping)):   # [f] + toolset
            return ToolSet([*other, self], max_examples=self.max_examples, extra_args=self.extra_args)
        return NotImplemented

    @property
    def example(self) -> Example | None:
        """The first worked example, or None."""
        return self.examples[0] if self.examples else None

    def examples_for(self, task: str) -> tuple[Example, ...]:
        """The examples to show before ``task`` (see ``max_examples``)."""
        if self.max_examples is None:
            return self.examples
        pool = self.examples
        words = [_words(e.task) for e in pool]
        # Weighted Jaccard, each word weighted by its rarity in the pool ("what", "the" say
        # little): a short example that is all about the question beats a long one that
        # merely contains it.
        wanted = _words(task)
        df = collections.Counter(w for ws in words for w in ws)
        weight = {w: 1 + math.log((1 + len(pool)) / (1 + df[w])) for w in set(df) | wanted}
        score = [sum(weight[w] for w in ws & wanted) / (sum(weight[w] for w in ws | wanted) or 1) for ws in words]
        calling = [i for i, e in enumerate(pool) if e.calls]
        direct = [i for i, e in enumerate(pool) if not e.calls]
        ranked = sorted(calling, key=lambda i: -score[i])[:self.max_examples]   # stable: ties by order
        chosen = [pool[i] for i in reversed(ranked)]
        # The closest example goes last, where the model looks; when that is one answered
        # without tools ("What is the chemical symbol for gold?" is nearer "What is the
        # opposite of 'hot'?" than any lookup), the direct answers follow the tool examples.
        if direct and max(score[i] for i in direct) > max((score[i] for i in ranked), default=0):
            return (*chosen, *(pool[i] for i in sorted(direct, key=lambda i: score[i])))
        return (*(pool[i] for i in direct), *chosen)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolSet([{', '.join(self._tools)}])"

    def to_openai(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self._tools.values()]

    def closest(self, name: str) -> str | None:
        """The tool name closest to ``name`` (case-insensitive, difflib), or None."""
        if not isinstance(name, str):
            return None
        return _suggest(name, self._tools)

    def _known_part(self, tool: Tool, args: Any) -> dict[str, Any] | None:
        """``args`` without the names ``tool`` does not take, when extra_args="ignore" and
        there are such names; else None."""
        if self.extra_args != "ignore" or not isinstance(args, Mapping):
            return None
        extra = set(tool.unexpected(args))
        return {k: v for k, v in args.items() if k not in extra} if extra else None

    def execute(self, call: Any, *, timeout: float | None = 30, limit: int | None = 4000) -> ToolOutcome:
        """Run one call (anything with ``.name`` and ``.args``). Never raises for model mistakes
        or tool failures: they become a ToolOutcome with ``ok=False`` and an ``ERROR: ...`` output."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be a positive number of characters or None, got {limit!r}")
        started = time.perf_counter()
        raw_name = getattr(call, "name", None)
        raw_args = getattr(call, "args", None)
        name = raw_name if isinstance(raw_name, str) and len(raw_name) <= 128 and raw_name.isprintable() \
            else _show(raw_name, 60)

        ignored: tuple[str, ...] = ()

        def done(ok: bool, output: str, error: str | None, args: Any = raw_args) -> ToolOutcome:
            if ignored:
                output += "\n" + f"(ignored {', '.join(f'`{_show(k, 40)}`' for k in ignored)}: not an argument of {found.name})"
            return ToolOutcome(name, args, ok, truncate(output, limit), error, time.perf_counter() - started, ignored)

        found = self._tools.get(raw_name) if isinstance(raw_name, str) else None
        if found is None:
            valid = ", ".join(self._tools) or "(none)"
            hint = self.closest(raw_name) if isinstance(raw_name, str) else None
            text = f"ERROR: unknown tool `{_show(raw_name, 60)}`."
            if hint:
                text += f" Did you mean `{hint}`?"
            text += f" Valid tools: {valid}."
            return done(False, text, "unknown_tool")
        try:
            try:
                bound = found.bind(raw_args)
            except ToolArgumentError as first:
                known = self._known_part(found, raw_args)
                if known is None:
                    raise
                try:
                    bound = found.bind(known)
                except ToolArgumentError:
                    raise first from None   # the rest is not valid either: report everything
                ignored = tuple(k for k in raw_args if k not in known)
        except ToolArgumentError as exc:
            return done(False, f"{_exc_text(exc).rstrip('.')}. Usage: {found.signature()}", "bad_arguments")
        except RecursionError:
            return done(False, "ERROR: ToolArgumentError: arguments are nested too deeply; pass flat values. "
                               f"Usage: {found.signature()}", "bad_arguments")
        except Exception as exc:  # noqa: BLE001 - odd args must not crash the caller
            return done(False, f"ERROR: ToolArgumentError: could not read the arguments ({type(exc).__name__}: "
                               f"{_show(str(exc), 200)}). Usage: {found.signature()}", "bad_arguments")
        result, exc, timed_out = _run_with_timeout(lambda: _settle(found(**bound)), timeout)
        if timed_out:
            log.info("tool %s did not finish within %g s and was abandoned", found.name, timeout)
            return done(False, f"ERROR: TimeoutError: `{found.name}` did not finish within {timeout:g} s and was "
                               "abandoned; try simpler arguments or another approach", "timeout", bound)
        if exc is not None:
            log.debug("tool %s raised %s", found.name, type(exc).__name__, exc_info=exc)
            return done(False, _exc_text(exc), "tool_error", bound)
        try:
            output = render_result(result)
        except (TypeError, ValueError, RecursionError) as err:
            return done(False, f"ERROR: {type(err).__name__}: the result of `{found.name}` could not be shown "
                               f"as text ({_show(str(err), 200)})", "tool_error", bound)
        return done(True, output, None, bound)
