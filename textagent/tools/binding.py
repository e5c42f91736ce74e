"""Arguments as the function takes them: JSON values -> what its type hints ask for (Enums,
dates, dataclasses, ...), and strings folded to the case of an allowed value.

Bare text -> an arguments object is the protocol's binder (``textagent.protocol.binding``:
the parser and ``Tool.bind`` use the same one); its names are re-exported here.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import enum
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .._schema import DATE_FORMATS
from ..errors import ToolArgumentError
from ..protocol.binding import bare_target, bare_value, bind_bare
from ._text import json_type_of, say, short_repr
from .schema import DATE_TYPES, KEY_MARKS, enum_members, is_pydantic_model, records_being_read

__all__ = ["bad_date", "bare_target", "bare_value", "bind_bare", "coerce", "fold_case"]


def fold_case(args: dict[str, Any], props: Mapping[str, Any]) -> dict[str, Any]:
    """A string that matches one allowed value of its parameter but for case or surrounding
    spaces becomes that value ("F" for an enum of "c", "f"): there is nothing to guess."""
    for key, value in args.items():
        schema = props.get(key)
        if not isinstance(value, str) or not isinstance(schema, Mapping):
            continue
        members = [m for m in enum_members(schema) if isinstance(m, str)]
        if not members or value in members:
            continue
        same = [m for m in members if m.casefold() == value.strip().casefold()]
        if len(same) == 1:
            args[key] = same[0]
    return args


def coerce(
    args: dict[str, Any], props: Mapping[str, Any], converters: Mapping[str, Callable[[Any], Any]]
) -> dict[str, Any]:
    """Validated arguments as the function takes them: whole floats for integers, and the
    converters' Enums, dates, dataclasses, ... Raises ToolArgumentError when one fails."""
    for key, value in args.items():
        schema = props.get(key)
        if (
            isinstance(value, float)
            and isinstance(schema, Mapping)
            and schema.get("type") in ("integer", ["integer", "null"])
            and math.isfinite(value)
            and value.is_integer()
        ):
            args[key] = int(value)
    for key, conv in converters.items():
        if key in args:
            try:
                args[key] = conv(args[key])
            except (ValueError, TypeError) as err:
                raise ToolArgumentError(say("arg_conversion", key=key, error=err)) from None
    return args


def iso_parser(kind: type[datetime.date] | type[datetime.time]) -> Callable[[Any], Any]:
    """Reads an ISO 8601 date, date-time or time (a trailing Z is UTC)."""

    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(say("arg_date_not_string", kind=DATE_TYPES[kind], got=json_type_of(value)))
        text = value.strip()
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            return kind.fromisoformat(text)
        except ValueError:
            raise ValueError(bad_date("", value, DATE_TYPES[kind])) from None

    return convert


def bad_date(at: str, value: Any, kind: str) -> str:
    return say("arg_bad_date", at=at, value=short_repr(value), kind=kind, example=DATE_FORMATS[kind][0])


def converter_for(hint: Any) -> Callable[[Any], Any] | None:
    """A converter from the JSON value to what the hint asks for (an Enum member, a date, a
    dataclass, a TypedDict, a pydantic model, or lists, dicts and Optionals of them), or None
    when the JSON value is already right."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated or origin in KEY_MARKS:
        return converter_for(args[0])
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        members = [a for a in args if a is not type(None)]
        inner = converter_for(members[0]) if len(members) == 1 else None
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if isinstance(hint, type) and issubclass(hint, (datetime.date, datetime.time)) and hint in DATE_TYPES:
        return iso_parser(hint)
    if is_pydantic_model(hint):
        import pydantic

        return pydantic.TypeAdapter(hint).validate_python
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        if hint in records_being_read():
            return None
        records_being_read().append(hint)
        try:
            fields = {
                k: c
                for k, h in typing.get_type_hints(hint, include_extras=True).items()
                if (c := converter_for(h)) is not None
            }
        finally:
            records_being_read().pop()
        make = hint if dataclasses.is_dataclass(hint) else dict
        return lambda v: make(**{k: fields[k](x) if k in fields else x for k, x in v.items()})
    container = origin or hint
    if (
        container in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable)
        and args
    ):
        item = converter_for(args[0])
        return None if item is None else (lambda v: [item(x) for x in v])
    if container in (dict, collections.abc.Mapping, collections.abc.MutableMapping) and len(args) == 2:
        value = converter_for(args[1])
        return None if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    return None
