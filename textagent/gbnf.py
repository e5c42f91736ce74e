"""GBNF grammars (llama.cpp's ``grammar`` field) for constrained mode, built from a tool set.

    from textagent.gbnf import reply_grammar
    print(reply_grammar(demo_tools()))      # what `textagent grammar --tools demo` prints

The fixed rules (thought lines, the answer line, canonical JSON) live in ``grammars/reply.gbnf``,
next to the Lark grammar of the text protocol; this module adds ``root``, the call lines and one
argument rule per tool, translated from the tool's JSON schema:

* ``type`` (one or a list): string, integer, number, boolean, null, array, object;
* ``enum`` and ``const`` (any JSON values), ``anyOf`` / ``oneOf`` (alternatives), ``allOf``
  of object schemas (merged), local ``$ref`` (``#/$defs/...``, ``#/definitions/...``, recursion
  allowed);
* objects: ``properties`` in their declared order, ``required`` keys always present, the others
  optional; without ``properties``, ``additionalProperties`` (a schema, or false for ``{}``);
* arrays: ``items``, ``prefixItems``, ``minItems`` / ``maxItems``; strings: ``minLength`` /
  ``maxLength``.

The grammar is never wider than the canonical text protocol: every string it allows is read by
``parse_reply`` as the same calls. It can be wider than a schema where GBNF cannot say it
cheaply (``pattern``, ``format``, numeric ``minimum``/``maximum``/``multipleOf``,
``uniqueItems``, length bounds over :data:`MAX_BOUND`, ``not``, conditionals): the tool layer
still validates the arguments and answers a violation with an error observation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import _resources

__all__ = ["MAX_BOUND", "literal", "reply_grammar", "rule_name", "schema_grammar", "static_rules"]

#: Length and item-count bounds above this are not written into the grammar (llama.cpp expands
#: ``x{m,n}`` into n rules); the tool's schema validation still applies them.
MAX_BOUND = 64

_JSON_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")


def static_rules() -> str:
    """The text of ``grammars/reply.gbnf`` (from the installed package or the source checkout)."""
    return _resources.grammar_text("reply.gbnf")


def literal(text: str) -> str:
    """``text`` as a GBNF string literal: printable ASCII as is, everything else escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02X}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def rule_name(text: str) -> str:
    """A GBNF rule name (lowercase letters, digits, dashes) derived from ``text``."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return name or "x"


def _canonical(value: Any) -> str:
    """A JSON value written the way render_call writes arguments."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def _bounds(schema: Mapping[str, Any], low: str, high: str) -> tuple[int, int | None]:
    lo, hi = schema.get(low), schema.get(high)
    lo = lo if isinstance(lo, int) and not isinstance(lo, bool) and 0 <= lo <= MAX_BOUND else 0
    hi = hi if isinstance(hi, int) and not isinstance(hi, bool) and lo <= hi <= MAX_BOUND else None
    return lo, hi


def _repeat(item: str, lo: int, hi: int | None) -> str:
    """``item`` repeated lo..hi times (hi None: unbounded), in GBNF."""
    if hi is None:
        return f"{item}*" if lo == 0 else (f"{item}+" if lo == 1 else f"{item}{{{lo},}}")
    if lo == hi:
        return "" if lo == 0 else (item if lo == 1 else f"{item}{{{lo}}}")
    if (lo, hi) == (0, 1):
        return f"{item}?"
    return f"{item}{{{lo},{hi}}}"


class _Builder:
    """Collects the rules of one grammar. Rule bodies are one line each."""

    def __init__(self, taken: Iterable[str] = ()):
        self.rules: dict[str, str] = {}
        self.taken = set(taken)
        self.refs: dict[tuple[int, str], str] = {}
        self.prefix = "tool"  # names the rules of $ref targets

    def new(self, hint: str) -> str:
        name = base = rule_name(hint)
        n = 2
        while name in self.taken:
            name = f"{base}-{n}"
            n += 1
        self.taken.add(name)
        return name

    def define(self, hint: str, body: str) -> str:
        name = self.new(hint)
        self.rules[name] = body
        return name

    # -- schema -> expression -----------------------------------------------------------------
    def schema(self, schema: Any, hint: str, root: Mapping[str, Any]) -> str:
        """A GBNF expression (a rule name, a literal or a group) for values of ``schema``."""
        if schema is True or schema is None or (isinstance(schema, Mapping) and not _constraining(schema)):
            return "value"
        if not isinstance(schema, Mapping):  # `false` or junk: nothing sensible to constrain
            return "value"
        if "$ref" in schema:
            return self.ref(schema["$ref"], hint, root, schema)
        if "const" in schema:
            return self.values([schema["const"]])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.values([v for v in schema["enum"] if _has_type(v, schema.get("type"))])
        for key in ("anyOf", "oneOf"):
            subs = schema.get(key)
            if isinstance(subs, list) and subs:
                base = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "description", "title")}
                alts = [
                    self.schema(_merge(base, s) if isinstance(s, Mapping) else s, f"{hint}-{i}", root)
                    for i, s in enumerate(subs)
                ]
                return self.alternatives(alts)
        if isinstance(schema.get("allOf"), list):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for sub in schema["allOf"]:
                if isinstance(sub, Mapping):
                    merged = _merge(merged, sub)
            return self.schema(merged, hint, root)
        return self.by_type(schema, hint, root)

    def by_type(self, schema: Mapping[str, Any], hint: str, root: Mapping[str, Any]) -> str:
        """A schema without references, constants or combinations: by its ``type`` (one, or a list
        of them), else by the keywords only one type takes."""
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k in _JSON_TYPES]
            if not kinds:
                return "value"
            alts = [self.typed(k, schema, f"{hint}-{k}", root) for k in dict.fromkeys(kinds)]
            return self.alternatives(alts)
        if kind in _JSON_TYPES:
            return self.typed(kind, schema, hint, root)
        if "properties" in schema or "additionalProperties" in schema or "required" in schema:
            return self.typed("object", schema, hint, root)
        if "items" in schema or "prefixItems" in schema:
            return self.typed("array", schema, hint, root)
        return "value"

    def values(self, values: list[Any]) -> str:
        alts = []
        for v in values:
            try:
                alts.append(literal(_canonical(v)))
            except (TypeError, ValueError):
                continue
        alts = list(dict.fromkeys(alts))
        if not alts:
            return "value"
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"

    def alternatives(self, alts: list[str]) -> str:
        alts = list(dict.fromkeys(alts))
        if "value" in alts:
            return "value"
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"

    def ref(self, ref: Any, hint: str, root: Mapping[str, Any], schema: Mapping[str, Any]) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return "value"
        key = (id(root), ref)
        if key in self.refs:
            return self.refs[key]
        target: Any = root
        for part in ref.lstrip("#").strip("/").split("/") if ref.strip("#/") else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return "value"
            target = target[part]
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        if _constraining(extra) and isinstance(target, Mapping):
            return self.schema(_merge(extra, target), hint, root)
        name = self.new(f"{self.prefix}-def-{ref.rsplit('/', 1)[-1]}")
        self.refs[key] = name
        self.rules[name] = self.schema(target, name, root)  # defined after its name: recursion works
        return name

    def typed(self, kind: str, schema: Mapping[str, Any], hint: str, root: Mapping[str, Any]) -> str:
        if kind == "string":
            lo, hi = _bounds(schema, "minLength", "maxLength")
            if (lo, hi) == (0, None):
                return "string"
            return self.define(hint, '"\\"" ' + _repeat("char", lo, hi) + ' "\\""')
        if kind in ("integer", "number", "boolean", "null"):
            return kind
        if kind == "array":
            return self.define(hint, self.array(schema, hint, root))
        return self.define(hint, self.object(schema, hint, root))

    def array(self, schema: Mapping[str, Any], hint: str, root: Mapping[str, Any]) -> str:
        lo, hi = _bounds(schema, "minItems", "maxItems")
        raw_prefix = schema.get("prefixItems")
        prefix: list[Any] = raw_prefix if isinstance(raw_prefix, list) else []
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        parts = [self.schema(s, f"{hint}-{i}", root) for i, s in enumerate(prefix)]
        rest = None if items is False else self.schema(items, f"{hint}-item", root)
        if parts:
            if hi is not None and hi < len(parts):
                parts = parts[:hi]
            n = len(parts)
            # item i (after ", " unless first) is mandatory while i < minItems, then optional;
            # after the prefix items come more `items`, up to maxItems in all
            seq = ""
            if rest is not None and (hi is None or hi > n):
                seq = _repeat(f'(", " {rest})', max(lo - n, 0), None if hi is None else hi - n)
            for i in range(n - 1, -1, -1):
                inner = " ".join(x for x in ("" if i == 0 else '", "', parts[i], seq) if x)
                seq = inner if i < lo else f"({inner})?"
            return f'"[" {seq} "]"'
        if rest is None:
            return '"[" "]"'
        if hi == 0:
            return '"[" "]"'
        more = _repeat(f'(", " {rest})', max(lo - 1, 0), None if hi is None else hi - 1)
        first = f"{rest} {more}" if more else rest
        return f'"[" {first} "]"' if lo > 0 else f'"[" ({first})? "]"'

    def object(self, schema: Mapping[str, Any], hint: str, root: Mapping[str, Any]) -> str:
        raw_props = schema.get("properties")
        given: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
        required = (
            [k for k in schema.get("required", []) if isinstance(k, str)]
            if isinstance(schema.get("required"), list)
            else []
        )
        props = dict(given)
        for key in required:  # required keys without a schema: any value
            props.setdefault(key, True)
        if not props:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return '"{" "}"'
            value = self.schema(extra, f"{hint}-value", root)
            if value == "value":
                return "object"
            kv = f'string ": " {value}'
            return f'"{{" ({kv} (", " {kv})*)? "}}"'
        keys = list(props)
        kvs = [f"{literal(_canonical(k) + ': ')} {self.schema(props[k], f'{hint}-{k}', root)}" for k in keys]
        req = set(required)
        n = len(keys)
        first = next((i for i, k in enumerate(keys) if k in req), n)  # the first required key
        # tail[i]: the properties from i on, each after ", "; required ones always, others optional.
        # With several possible first properties the tails are shared rules, not copies.
        tail = [""] * (n + 1)
        for i in range(n - 1, -1, -1):
            item = f'", " {kvs[i]}'
            tail[i] = " ".join(x for x in (item if keys[i] in req else f"({item})?", tail[i + 1]) if x)
            if first > 1 and 0 < i <= first and i < n - 1:
                tail[i] = self.define(f"{hint}-from-{keys[i]}", tail[i])
        alts = [" ".join(x for x in (kvs[i], tail[i + 1]) if x) for i in range(min(first + 1, n))]
        body = alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
        if first == n:  # nothing required: the object may be empty
            body = f"({body})?" if len(alts) == 1 else body + "?"
        return f'"{{" {body} "}}"'


def _has_type(value: Any, kind: Any) -> bool:
    """Is ``value`` of the JSON schema type(s) ``kind`` (None: any)?"""
    if kind is None:
        return True
    kinds = kind if isinstance(kind, list) else [kind]
    if value is None:
        actual = {"null"}
    elif isinstance(value, bool):
        actual = {"boolean"}
    elif isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        actual = {"integer", "number"}
    elif isinstance(value, float):
        actual = {"number"}
    elif isinstance(value, str):
        actual = {"string"}
    elif isinstance(value, list):
        actual = {"array"}
    else:
        actual = {"object"}
    return bool(actual & set(kinds))


def _constraining(schema: Mapping[str, Any]) -> bool:
    """Does the schema say anything about the value (beyond annotations)?"""
    return any(
        k
        not in (
            "description",
            "title",
            "default",
            "examples",
            "$schema",
            "$comment",
            "$defs",
            "definitions",
            "deprecated",
            "readOnly",
            "writeOnly",
        )
        for k in schema
    )


def _merge(base: Mapping[str, Any], sub: Mapping[str, Any]) -> dict[str, Any]:
    """Shallow merge for allOf / anyOf branches: object keywords combine, others: sub wins."""
    out = dict(base)
    for key, value in sub.items():
        if key == "properties" and isinstance(out.get(key), Mapping) and isinstance(value, Mapping):
            out[key] = {**out[key], **value}
        elif key == "required" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out[key] = value
    return out


_HEAD_NAMES = ("root", "calls", "call")


def _static_names() -> tuple[str, ...]:
    """The rule names taken by the head and by grammars/reply.gbnf (generated rules avoid them)."""
    return (*_HEAD_NAMES, *re.findall(r"^([a-z0-9-]+)\s*::=", static_rules(), re.M))


def _tools(tools: Any) -> list[Any]:
    from .tools import ToolSet

    return list((tools if isinstance(tools, ToolSet) else ToolSet(tools)).values())


def schema_grammar(schema: Mapping[str, Any], *, name: str = "json") -> str:
    """A grammar whose root is one canonical JSON value of ``schema`` (for tests and debugging)."""
    builder = _Builder(_static_names())
    builder.prefix = rule_name(name)
    expr = builder.schema(schema, builder.prefix, schema)
    return _assemble(f"root ::= {expr}", builder)


def reply_grammar(
    tools: Any, *, max_thoughts: int = 3, max_calls: int | None = None, abstain: tuple[str, str] | None = None
) -> str:
    """The GBNF grammar of a reply that uses ``tools`` (a ToolSet, mapping or list of Tools).

    A reply is up to ``max_thoughts`` lines ``Thought: ...``, then either canonical call lines
    ``TOOL: name ARGS: {...}`` (one to ``max_calls``, None: no limit) or one ``ANSWER: ...`` line.
    ``abstain``: the answer comes only after a line that names a listed tool and says why it does
    not fit, written ``before + name + after + reason`` (a thought line the reader keeps as such).
    """
    tool_list = _tools(tools)
    builder = _Builder(_static_names())
    alts = []
    for tool in tool_list:
        builder.prefix = f"tool-{rule_name(tool.name)}"
        params = tool.parameters if isinstance(tool.parameters, Mapping) else {}
        schema = dict(params) if params else {"type": "object"}
        if schema.get("type") not in ("object", None) and not isinstance(schema.get("type"), list):
            schema = {"type": "object"}
        schema.setdefault("type", "object")
        name = builder.new(builder.prefix)
        builder.rules[name] = ""  # keeps the call rule before its argument rules
        args = builder.schema(schema, f"{builder.prefix}-args", params)
        builder.rules[name] = f"{literal(tool.name + ' ARGS: ')} {'object' if args == 'value' else args}"
        alts.append(name)
    thoughts = _repeat("thought", 0, max(0, max_thoughts))
    answer = "abstention answer" if abstain is not None and tool_list else "answer"
    head = f"root ::= {thoughts + ' ' if thoughts else ''}" + (f"(calls | {answer})" if alts else answer)
    lines = [head]
    if abstain is not None and tool_list:
        names = " | ".join(literal(t.name) for t in tool_list)
        lines.append(f'abstention ::= {literal(abstain[0])} ({names}) {literal(abstain[1])} [^\n]+ "\n"')
    if alts:
        more = _repeat('("\\n" call)', 0, None if max_calls is None else max(max_calls, 1) - 1)
        lines.append(f"calls ::= call{' ' + more if more else ''} calls-end?")
        lines.append('call ::= "TOOL: " (' + " | ".join(alts) + ")")
    return _assemble("\n".join(lines), builder)


def _assemble(head: str, builder: _Builder) -> str:
    generated = "\n".join(f"{name} ::= {body}" for name, body in builder.rules.items())
    parts = [head]
    if generated:
        parts.append(generated)
    return "\n".join(parts) + "\n\n" + static_rules()
