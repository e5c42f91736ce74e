"""Checking model arguments: size and depth limits, jsonschema validation, and each problem
as a message the model can act on."""

from __future__ import annotations

import difflib
import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urldefrag, urljoin

import jsonschema
import referencing
import referencing.exceptions
import regex
from jsonschema_specifications import REGISTRY as SPECIFICATIONS

from .._schema import DATE_FORMATS
from ..errors import ToolArgumentError
from ._text import say, short_repr, show
from .binding import bad_date, iso_parser
from .schema import DATE_TYPES

# Hard limits on what a model may pass as arguments; larger/deeper input is refused with a
# ToolArgumentError before jsonschema (or the tool) ever sees it.
MAX_ARG_CHARS = 1_000_000  # total characters of all keys and string values (+1 per other value)
MAX_ARG_DEPTH = 64  # nesting levels of lists/dicts inside the arguments object
_MAX_LISTED_ERRORS = 5

# The formats jsonschema checks, with date, date-time and time read as the converters read them
# (ISO 8601 as Python reads it: "2026-01-31T09:30" too), whichever optional checkers are installed.
_FORMATS = jsonschema.FormatChecker()
for _kind, _name in DATE_TYPES.items():
    _read = iso_parser(_kind)
    _FORMATS.checks(_name, raises=(ValueError, TypeError))(
        lambda value, read=_read: not isinstance(value, str) or read(value) is not None
    )


# A schema's `pattern` is the tool author's, the string the model's: Python's `re` backtracks, so
# `^(a+)+$` against 30 a's and a "!" runs for minutes holding the GIL. The `regex` module runs
# the same syntax with a time limit; a search that hits it fails the value, with a message.
PATTERN_SECONDS = 0.25
# One budget for checking one call's arguments, whatever the schema makes of them: patterns over
# many values, nested anyOf over $refs (2^n), uniqueItems (pairwise) all draw on it.
VALIDATION_SECONDS = 1.0
_budget = threading.local()


class _OutOfTime(Exception):
    """The call's validation budget is spent."""


def _time_left() -> float:
    """Seconds the current validation has left (raises _OutOfTime when none)."""
    deadline = getattr(_budget, "deadline", None)
    if deadline is None:
        return PATTERN_SECONDS
    left = deadline - time.monotonic()
    if left <= 0:
        raise _OutOfTime
    return left


def _search(pattern: str, text: str) -> bool | None:
    """``regex.search`` within PATTERN_SECONDS and the call's budget: True/False, or None when it
    ran out of time."""
    try:
        return regex.search(pattern, text, timeout=min(PATTERN_SECONDS, _time_left())) is not None
    except TimeoutError:
        return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterable[jsonschema.ValidationError]:
    if validator.is_type(instance, "string"):
        found = _search(pattern, instance)
        if found is None:
            yield jsonschema.ValidationError(
                f"{short_repr(instance)} could not be checked against the pattern "
                f"{pattern!r} in time; send a shorter or simpler value"
            )
        elif not found:
            yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Any, instance: Any, schema: Any
) -> Iterable[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            found = _search(pattern, key)
            if found is None:
                yield jsonschema.ValidationError(
                    f"the name {short_repr(key)} could not be checked against the pattern {pattern!r} in time"
                )
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, extra_schema: Any, instance: Any, schema: Any
) -> Iterable[jsonschema.ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {}) or {}
    patterns = list(schema.get("patternProperties") or {})
    extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in patterns)]
    if validator.is_type(extra_schema, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], extra_schema, path=extra)
    elif extra_schema is False and extras:
        names = ", ".join(repr(e) for e in sorted(extras, key=str))
        if patterns:
            yield jsonschema.ValidationError(
                f"{names} {'does' if len(extras) == 1 else 'do'} not match any of the "
                f"regexes: {', '.join(repr(p) for p in sorted(patterns))}"
            )
        else:
            yield jsonschema.ValidationError(
                f"Additional properties are not allowed ({names} {'was' if len(extras) == 1 else 'were'} unexpected)"
            )


def _canonical(value: Any) -> Any:
    """A hashable form under which two JSON values are equal as JSON Schema compares them: key
    order ignored, 1 == 1.0, true != 1."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, Mapping):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(_canonical(v) for v in value))
    return ("other", repr(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterable[jsonschema.ValidationError]:
    # jsonschema compares unhashable items pairwise: 1,500 objects took 3.9 s; a hash set is linear
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield jsonschema.ValidationError(f"{short_repr(instance)} has non-unique elements")
            return
        seen.add(key)


def _budgeted(check: Any) -> Any:
    """A keyword's check that first makes sure the call's budget is not spent."""

    @functools.wraps(check)
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _time_left()
        return check(validator, value, instance, schema)

    return run


_CHECKS = {
    **jsonschema.Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
BoundedValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {name: _budgeted(check) for name, check in _CHECKS.items()}
)


def _never_fetch(uri: str) -> referencing.Resource[Any]:
    # jsonschema's default registry fetches an unknown reference over HTTP, or reads a file:// path
    # (the proxy's clients, MCP servers and tool authors write the schemas): nothing is fetched
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class; mypy skips its old-style dataclass_transform


#: JSON Schema's own meta-schemas, and nothing else: a reference that is not to a part of the
#: schema itself or to a meta-schema cannot resolve.
LOCAL_ONLY = SPECIFICATIONS.combine(referencing.Registry(retrieve=_never_fetch))  # type: ignore[call-arg]


def _references(schema: Any, base: str) -> Iterator[tuple[str, str]]:
    """(reference as written, absolute URI without fragment) of every $ref / $dynamicRef, and
    ("", id) for every $id, each resolved against the $id in force where it stands."""
    if isinstance(schema, Mapping):
        here = base
        if isinstance(schema.get("$id"), str):
            here = urljoin(base, schema["$id"])
            yield "", urldefrag(here)[0]
        for key in ("$ref", "$dynamicRef"):
            if isinstance(schema.get(key), str):
                yield schema[key], urldefrag(urljoin(here, schema[key]))[0]
        for value in schema.values():
            yield from _references(value, here)
    elif isinstance(schema, list):
        for value in schema:
            yield from _references(value, base)


def remote_references(schema: Any) -> list[str]:
    """The references of ``schema`` that point outside it (to another document, a URL, a file),
    other than to JSON Schema's meta-schemas. Such a schema is refused: nothing is ever fetched."""
    found = list(_references(schema, ""))
    own = {uri for ref, uri in found if not ref} | {""}
    return [ref for ref, uri in found if ref and uri not in own and uri not in SPECIFICATIONS]


def check_references(schema: Any, what: str) -> None:
    """ValueError when ``schema`` refers outside itself (see :func:`remote_references`)."""
    remote = remote_references(schema)
    if remote:
        raise ValueError(
            f"{what} refers to {remote[0][:200]!r} ($ref): references to other documents, URLs or "
            "files are never fetched; put the definition in the schema's $defs and refer to it as "
            '"#/$defs/..."'
        )


def make_validator(schema: dict[str, Any]) -> Any:
    """The validator of a tool's parameters: Draft 2020-12, its formats, patterns with a time limit,
    references resolved within the schema only (LOCAL_ONLY: never fetched)."""
    return BoundedValidator(schema, format_checker=_FORMATS, registry=LOCAL_ONLY)


def validate(
    validator: jsonschema.protocols.Validator, args: dict[str, Any], *, seconds: float = VALIDATION_SECONDS
) -> None:
    """Raise ToolArgumentError listing what is wrong with ``args`` (at most a few problems);
    also when checking them takes longer than ``seconds`` (the budget of the whole call)."""
    outer = getattr(_budget, "deadline", None)
    _budget.deadline = time.monotonic() + seconds if outer is None else outer
    try:
        errors = list(validator.iter_errors(args))
        messages = _error_messages(
            sorted(
                errors, key=lambda e: ([str(p) for p in e.absolute_path], e.validator != "required", str(e.validator))
            )
        )
    except RecursionError:
        raise ToolArgumentError(say("args_too_deep_to_check")) from None
    except referencing.exceptions.Unresolvable as exc:  # refused before this, by check_references
        raise ToolArgumentError(
            f"the tool's schema refers to {str(exc)[:200]}, which is not part of it; the arguments cannot be checked"
        ) from None
    except _OutOfTime:
        raise ToolArgumentError(say("args_too_slow_to_check", seconds=f"{seconds:g}")) from None
    finally:
        _budget.deadline = outer
    if messages:
        shown = messages[:_MAX_LISTED_ERRORS]
        more = len(messages) - len(shown)
        raise ToolArgumentError("; ".join(shown) + (say("arg_errors_more", count=more) if more else ""))


def too_large() -> ToolArgumentError:
    return ToolArgumentError(say("args_too_large", chars=f"{MAX_ARG_CHARS:,}"))


def unexpected(key: Any, known: list[str], at: str | None = None) -> str:
    """An unknown argument (``at`` None) or an unknown key of a nested object (``at`` its path)."""
    hint = suggest(key, known) if isinstance(key, str) else None
    fields = {
        "key": show(key, 40),
        "suggestion": say("arg_suggestion", name=hint) if hint else "",
        "valid": ", ".join(known) if known else say("none_valid"),
    }
    return say("arg_unexpected", **fields) if at is None else say("key_unexpected", at=at, **fields)


def format_path(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + show(str(part), 40)
    return out


def suggest(word: str, options: Iterable[str]) -> str | None:
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
    for err in errors:
        for message in _messages_of(err):
            if message not in messages:  # two errors can come to the same words
                messages.append(message)
    return messages


def _messages_of(err: jsonschema.ValidationError) -> list[str]:
    """What the model is told of one error: in words of our own for the keywords it meets most,
    else jsonschema's message, clipped."""
    path = format_path(err.absolute_path)
    at = say("arg_at", path=path) if path else ""
    reader = _BY_KEYWORD.get(str(err.validator))
    said = reader(err, path, at) if reader is not None else None
    if said is not None:
        return said
    msg = err.message
    return [at + (msg[:200] + "…" if len(msg) > 200 else msg)]


# Each reader takes (error, path, "at <path>: ") and gives the messages, or None where the error is
# not of the shape it knows (jsonschema's own message is said then). ``validator_value`` is the
# keyword's value in the schema: set on every error a validator yields (the stubs also allow
# jsonschema's Unset, for an error made by hand).


def _required(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    if not isinstance(err.instance, dict):
        return None
    rule: Any = err.validator_value
    return [
        say("key_missing", at=at, key=k) if path else say("arg_missing", key=k) for k in rule if k not in err.instance
    ]


def _additional(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    if not (isinstance(err.instance, dict) and isinstance(err.schema, Mapping)):
        return None
    known = list((err.schema.get("properties") or {}).keys())
    patterns = list((err.schema.get("patternProperties") or {}).keys())
    return [
        unexpected(key, known, at if path else None)
        for key in err.instance
        if not (key in known or any(_search(p, key) for p in patterns if isinstance(key, str)))
    ]


def _type(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    expected: Any = err.validator_value
    if isinstance(expected, list):
        expected = functools.reduce(lambda a, b: say("arg_type_alternatives", first=a, second=b), expected)
    return [say("arg_wrong_type", at=at, value=short_repr(err.instance), expected=expected)]


def _enum(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    rule: Any = err.validator_value
    choices = ", ".join(json.dumps(v, ensure_ascii=False) for v in rule)
    return [say("arg_not_in_enum", at=at, value=short_repr(err.instance), choices=choices)]


def _format(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    rule: Any = err.validator_value
    return [bad_date(at, err.instance, rule)] if rule in DATE_FORMATS else None


def _alternatives(err: jsonschema.ValidationError, path: str, at: str) -> list[str] | None:
    if not err.context:
        return None
    inner = _error_messages([jsonschema.exceptions.best_match(err.context)])
    return [inner[0] if inner else say("arg_invalid", at=at, value=short_repr(err.instance))]


_BY_KEYWORD: dict[str, Callable[[jsonschema.ValidationError, str, str], list[str] | None]] = {
    "required": _required,
    "additionalProperties": _additional,
    "type": _type,
    "enum": _enum,
    "format": _format,
    "anyOf": _alternatives,
    "oneOf": _alternatives,
}


def check_shape(value: Any) -> None:
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
                raise ToolArgumentError(say("args_too_deep", levels=MAX_ARG_DEPTH))
            budget -= 1 + len(node)
            if budget < 0:
                break
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str):
                        where = say("arg_names_where", path=format_path(path)) if path else ""
                        raise ToolArgumentError(
                            say("arg_names_not_strings", where=where, key=short_repr(key), kind=type(key).__name__)
                        )
                    budget -= len(key)
                    stack.append((item, depth + 1, (*path, key)))
            else:
                stack.extend((item, depth + 1, (*path, index)) for index, item in enumerate(node))
        if budget < 0:
            break
    if budget < 0:
        raise too_large()
