"""``Tool``: a function the model may call, with its JSON schema; ``tool``: the decorator."""

from __future__ import annotations

import copy
import inspect
import json
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from .._schema import example_value, type_label
from ..errors import ToolArgumentError
from ..protocol.types import MAX_NAME_CHARS, is_tool_name
from ._text import json_type_of, one_line, say
from .binding import bind_bare, coerce, converter_for, fold_case
from .docstring import parse_docstring
from .schema import (
    MAX_SCHEMA_DEPTH,
    accepts_null,
    declared_names,
    deeper_than,
    hoist_defs,
    is_jsonable,
    or_null,
    plain_json,
    schema_for_type,
)
from .validation import MAX_ARG_CHARS, check_references, check_shape, make_validator, too_large, unexpected, validate


def lists_names(parameters: Mapping[str, Any]) -> bool:
    """Whether a JSON schema from elsewhere (an OpenAI or MCP tool) lists its argument names and
    leaves others unsaid: then a name neither it nor its subschemas declare is a mistake, not an
    extension (``"properties": {}`` lists none: every name is one)."""
    return (
        isinstance(parameters.get("properties"), Mapping)
        and "additionalProperties" not in parameters
        and "patternProperties" not in parameters
        and declared_names(parameters) is not None
    )


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
    # the schema lists the argument names (``properties``) and says nothing of others: a name it
    # does not list is refused, with the names it lists (OpenAI and MCP schemas); a schema that
    # sets ``additionalProperties`` keeps its own meaning
    closed: bool = False
    _validator: Any = field(default=None, init=False, repr=False)
    _accepts: frozenset[str] | None = field(default=None, init=False, repr=False)
    _declared: tuple[str, ...] = field(default=(), init=False, repr=False)  # a closed schema's names
    _converters: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not is_tool_name(self.name):
            raise ValueError(
                f"invalid tool name {self.name!r}: use ASCII letters, digits, '_', '.' or '-' "
                f"(starting with a letter or '_', at most {MAX_NAME_CHARS} characters)"
            )
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError(f"tool {self.name}: description must be a string, got {type(self.description).__name__}")
        object.__setattr__(self, "description", one_line(self.description or ""))
        params = {"type": "object", "properties": {}} if self.parameters is None else self.parameters
        if not isinstance(params, Mapping):
            raise TypeError(f"tool {self.name}: parameters must be a JSON schema object, got {type(params).__name__}")
        _check_depth(self.name, params)
        params = dict(params)
        if params.get("type", "object") != "object":
            raise ValueError(f'tool {self.name}: parameters must describe an object ("type": "object")')
        try:
            Draft202012Validator.check_schema(params)
        except jsonschema.SchemaError as err:
            raise ValueError(f"tool {self.name}: invalid JSON schema for parameters: {err.message}") from None
        check_references(params, f"tool {self.name}: the parameters' schema")
        object.__setattr__(self, "parameters", params)
        object.__setattr__(self, "_validator", make_validator(params))
        object.__setattr__(self, "_accepts", _accepted_names(self.fn))
        if self.closed:  # its subschemas' names too (allOf, anyOf, $ref, ...): they are the schema's
            object.__setattr__(self, "_declared", declared_names(params) or tuple(params.get("properties") or {}))

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> Tool:
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
        signature, hints = _signature_and_hints(fn, tool_name)
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
            properties[pname] = _parameter_schema(tool_name, param, hint, doc_params.get(pname), defs)
            if param.default is param.empty:
                required.append(pname)
            conv = converter_for(hint)
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
    def from_openai(cls, schema: Mapping[str, Any], fn: Callable[..., Any] | None = None) -> Tool:
        """Build a tool from an OpenAI function definition.

        Accepts ``{"type": "function", "function": {"name", "description", "parameters"}}``
        unchanged, the bare ``{"name", "description", "parameters"}`` dict, and the flat
        Responses-API form ``{"type": "function", "name": ...}``.
        """
        if not isinstance(schema, Mapping):
            raise TypeError(f"expected an OpenAI tool definition (a dict), got {type(schema).__name__}")
        spec = schema.get("function", schema)
        if not isinstance(spec, Mapping) or "name" not in spec:
            raise ValueError(
                'an OpenAI tool definition needs a name: {"type": "function", '
                '"function": {"name": ..., "parameters": {...}}}'
            )
        if schema.get("type", "function") != "function":
            raise ValueError(f'unsupported tool type {schema.get("type")!r}; only "function" tools can be called')
        _check_depth(spec["name"], spec.get("parameters"))  # before deepcopy, which recurses too
        parameters = copy.deepcopy(spec.get("parameters")) or {"type": "object", "properties": {}}
        return cls(spec["name"], spec.get("description") or "", parameters, fn, closed=lists_names(parameters))

    # -- use ----------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise NotImplementedError(f"tool {self.name} has no implementation (built without fn)")
        return self.fn(*args, **kwargs)

    @property
    def __wrapped__(self) -> Callable[..., Any] | None:
        return self.fn

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

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
            raise ToolArgumentError(say("args_not_object", example=self._example(), kind=json_type_of(args)))
        check_shape(args)
        if self.closed:
            extra = self.unexpected(args)
            if extra:
                raise ToolArgumentError(unexpected(extra[0], list(self._declared)))
        elif self._accepts is not None and self.parameters.get("additionalProperties") is not False:
            extra = self.unexpected(args)
            if extra:
                raise ToolArgumentError(unexpected(extra[0], sorted(self._accepts)))
        props = self.properties  # a fresh copy per access: take it once
        args = fold_case(args, props)
        validate(self._validator, args)
        return coerce(args, props, self._converters)

    def unexpected(self, args: Mapping[str, Any]) -> list[str]:
        """The names in ``args`` that this tool does not take (bind() refuses them): outside the
        names a closed schema and its subschemas declare, outside ``properties`` under
        ``additionalProperties: false``, else outside the function's parameters."""
        if self.closed:
            known: Iterable[str] = self._declared
        elif self.parameters.get("additionalProperties") is False:
            known = self.parameters.get("properties") or {}
        elif self._accepts is not None:
            known = self._accepts
        else:
            return []
        return [k for k in args if k not in known]

    # -- internals ----------------------------------------------------------------------------
    def _renamed(self, name: str, description: str | None = None) -> Tool:
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
            raise too_large()
        bound = bind_bare(text, self.parameters)
        if bound is not None:
            return bound
        props, required = self.properties, self.required
        if not props and not required:
            raise ToolArgumentError(say("tool_no_arguments", name=self.name))
        listing = ", ".join(k if k in required else say("tool_optional_argument", name=k) for k in props)
        raise ToolArgumentError(say("tool_several_arguments", name=self.name, listing=listing, example=self._example()))


def _check_depth(name: Any, parameters: Any) -> None:
    if deeper_than(parameters, MAX_SCHEMA_DEPTH):
        raise ValueError(
            f"tool {name}: parameters schema nested too deep (more than {MAX_SCHEMA_DEPTH} levels of "
            "objects and arrays)"
        )


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
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator turning a function into a Tool: ``@tool`` or ``@tool(name=..., description=...)``."""
    if fn is None:
        return lambda f: Tool.from_function(f, name=name, description=description)
    return Tool.from_function(fn, name=name, description=description)


# --------------------------------------------------------------------------------------------


def _signature_and_hints(fn: Callable[..., Any], tool_name: str) -> tuple[inspect.Signature, dict[str, Any]]:
    """The function's signature and resolved type hints; a TypeError naming the tool if either fails."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise TypeError(f"tool {tool_name}: cannot read the signature of {fn!r}: {err}") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as err:  # NameError for unresolvable forward refs, and others
        raise TypeError(
            f"tool {tool_name}: cannot resolve the type hints of {getattr(fn, '__qualname__', fn)!r}: {err}"
        ) from None
    return signature, hints


def _parameter_schema(
    tool_name: str, param: inspect.Parameter, hint: Any, doc: str | None, defs: dict[str, Any]
) -> dict[str, Any]:
    """One parameter's JSON schema: from its hint, with the docstring's text and its default;
    the schema's ``$defs`` are moved into ``defs`` (the tool's)."""
    schema = schema_for_type(hint, where=f"tool {tool_name}, parameter `{param.name}`")
    if doc is not None and "description" not in schema:
        schema["description"] = doc
    hoist_defs(schema, defs)
    if param.default is not param.empty:
        default = plain_json(param.default)
        if default is None and schema and not accepts_null(schema):
            schema = or_null(schema)  # `x: list = None` means "list or nothing"
        if is_jsonable(default):
            schema["default"] = json.loads(json.dumps(default))  # tuples -> lists
    return schema
