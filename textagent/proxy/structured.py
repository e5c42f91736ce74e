"""``response_format``: an answer that must be JSON (``json_object``), or JSON of a schema
(``json_schema``, ``strict`` or not). The model writes it after ``ANSWER:`` like any answer;
where the upstream takes a grammar the answer is held to the schema's GBNF, and everywhere it
is read, checked against the schema and, when it fails, sent back with feedback through the
repair loop, as a call's arguments are. The client's content is the JSON text."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from .. import prompts
from ..errors import ToolArgumentError
from ..gbnf import schema_grammar, static_rules
from ..tools.schema import deeper_than
from ..tools.validation import check_references, make_validator, validate
from .errors import ProxyError

__all__ = ["Format", "parse_format"]

_FENCED = re.compile(r"\A(?:```|~~~)[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?(?:```|~~~)\s*\Z", re.S)
_ANSWER_RULE = "structured-answer"
_SCHEMA_DEPTH = 64


@dataclass(frozen=True)
class Format:
    schema: dict[str, Any] | None  # None: any JSON object (json_object)
    name: str = "response"

    @property
    def effective(self) -> dict[str, Any]:
        return self.schema if self.schema is not None else {"type": "object"}

    def instruction(self) -> str:
        """What the system prompt says about the answer."""
        family = prompts.for_family("proxy")
        if self.schema is None:
            return family.template("json_answer").substitute()
        return family.template("json_schema_answer").substitute(
            name=self.name, schema=json.dumps(self.schema, ensure_ascii=False)
        )

    def grammar(self, reply: str) -> str:
        """``reply`` (a reply grammar whose root ends with ``answer``) with the answer held to
        ``ANSWER: `` and one canonical JSON value of the schema."""
        value = schema_grammar(self.effective, name="json")
        static = static_rules()
        head, rest = value.split("\n", 1)
        rules = rest[: -len(static)].strip() if rest.endswith(static) else rest.strip()
        root, body = reply.split("\n", 1)
        root = re.sub(r"\banswer\b", _ANSWER_RULE, root)
        extra = [f'{_ANSWER_RULE} ::= "ANSWER: " {head.removeprefix("root ::= ")}', *([rules] if rules else [])]
        return "\n".join([root, *extra, body])

    def check(self, answer: str) -> tuple[str | None, str]:
        """``(problem, json text)``: what is wrong with ``answer`` for this format (None: nothing),
        and the JSON text (code fences dropped)."""
        text = answer.strip()
        fenced = _FENCED.match(text)
        if fenced:
            text = fenced.group(1).strip()
        family = prompts.for_family("proxy")
        try:
            value = json.loads(text, parse_constant=_refuse)
        except (ValueError, RecursionError) as exc:
            where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
            return family.template("answer_not_json").substitute(where=where), text
        try:
            validate(make_validator(self.effective), value)
        except ToolArgumentError as exc:
            return family.template("answer_not_schema").substitute(error=str(exc)), text
        return None, text


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _bad(message: str, param: str) -> ProxyError:
    return ProxyError(400, message, param=param, code="invalid_response_format")


def parse_format(raw: Any) -> Format | None:
    """The ``response_format`` of a request (None: free text); ProxyError 400 when malformed."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or raw.get("type") not in ("text", "json_object", "json_schema"):
        raise _bad(
            'response_format must be {"type": "text"}, {"type": "json_object"} or '
            '{"type": "json_schema", "json_schema": {"name", "schema"}}',
            "response_format",
        )
    if raw["type"] == "text":
        return None
    if raw["type"] == "json_object":
        return Format(None)
    spec = raw.get("json_schema")
    if not isinstance(spec, Mapping):
        raise _bad(
            'response_format json_schema needs \'json_schema\': {"name", "schema"}', "response_format.json_schema"
        )
    schema = spec.get("schema", {})
    if not isinstance(schema, dict) or deeper_than(schema, _SCHEMA_DEPTH):  # a dict: jsonschema's "object"
        raise _bad(
            f"response_format's schema must be a JSON Schema object (at most {_SCHEMA_DEPTH} levels deep)",
            "response_format.json_schema.schema",
        )
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise _bad(
            f"response_format's schema is not a valid JSON Schema: {exc.message}", "response_format.json_schema.schema"
        ) from None
    try:
        check_references(schema, "response_format's schema")
    except ValueError as exc:
        raise _bad(str(exc), "response_format.json_schema.schema") from None
    given_name = spec.get("name")
    name = given_name if isinstance(given_name, str) and given_name else "response"
    return Format(dict(schema), name)
