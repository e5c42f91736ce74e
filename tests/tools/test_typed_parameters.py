"""Parameters typed as dataclasses, TypedDicts, dates, Enums and pydantic models."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import pytest
from toolfakes import Call, Color, Thing

from textagent.tools import Tool, ToolSet


@dataclass
class Point:
    x: float
    y: float = 0.0


class Slot(TypedDict):
    day: dt.date
    note: NotRequired[str]


def _agenda(
    where: Point,
    when: dt.date,
    at: dt.datetime,
    slot: Slot,
    colors: list[Color],
    start: dt.time = dt.time(9, 0),
    maybe: Point | None = None,
):
    """Plan a meeting."""
    return {"where": where, "when": when, "at": at, "slot": slot, "colors": colors, "start": start, "maybe": maybe}


def test_dataclass_typeddict_date_and_enum_parameters_get_schemas():
    params = Tool.from_function(_agenda).parameters
    props = params["properties"]
    assert props["where"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert props["slot"]["required"] == ["day"] and props["slot"]["properties"]["day"] == {
        "type": "string",
        "format": "date",
    }
    assert props["when"] == {"type": "string", "format": "date"}
    assert props["at"] == {"type": "string", "format": "date-time"}
    assert props["start"] == {"type": "string", "format": "time", "default": "09:00:00"}
    assert props["colors"] == {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}}
    assert params["required"] == ["where", "when", "at", "slot", "colors"]
    from textagent import prompts

    listing = prompts.describe_tool(Tool.from_function(_agenda))
    assert "    when (date YYYY-MM-DD)" in listing and "    where (object with keys x and y)" in listing


def test_json_arguments_become_the_declared_types_before_the_call():
    out = ToolSet([_agenda]).execute(
        Call(
            "_agenda",
            {
                "where": {"x": 1},
                "when": "2026-12-01",
                "at": "2026-12-01T10:00Z",
                "slot": {"day": "2026-12-02"},
                "colors": ["green"],
                "maybe": {"x": 2, "y": 3},
            },
        ),
        timeout=None,
    )
    assert out.ok, out.output
    bound = out.args
    assert bound["where"] == Point(1, 0.0) and bound["maybe"] == Point(2, 3)
    assert bound["when"] == dt.date(2026, 12, 1)
    assert bound["at"] == dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.timezone.utc)
    assert bound["slot"] == {"day": dt.date(2026, 12, 2)} and bound["colors"] == [Color.GREEN]


def test_a_bad_date_says_what_is_expected():
    out = ToolSet([_agenda]).execute(
        Call(
            "_agenda",
            {"where": {"x": 1, "z": 2}, "when": "tomorrow", "at": "soon", "slot": {"day": "2026-12-02"}, "colors": []},
        )
    )
    assert not out.ok and out.error == "bad_arguments"
    assert "`when`: 'tomorrow' is not an ISO 8601 date like \"2026-01-31\"" in out.output
    assert "`at`: 'soon' is not an ISO 8601 date-time like \"2026-01-31T09:30:00\"" in out.output
    assert "`where`: unexpected key `z`" in out.output
    # an ISO 8601 date-time without seconds or offset is read as Python reads it
    ok = ToolSet([_agenda]).execute(
        Call(
            "_agenda",
            {
                "where": {"x": 1},
                "when": "2026-12-01",
                "at": "2026-12-01T10:00",
                "slot": {"day": "2026-12-02"},
                "colors": [],
            },
        )
    )
    assert ok.ok and ok.args["at"] == dt.datetime(2026, 12, 1, 10, 0)


try:
    import pydantic
except ImportError:  # pragma: no cover - pydantic is optional
    pydantic = None
else:

    class Guest(pydantic.BaseModel):
        name: str
        age: int = 30

    class Party(pydantic.BaseModel):
        host: Guest
        guests: list[Guest] = []

    def invite(party: Party, extra: Guest | None = None) -> str:
        """Invite a party."""
        return f"{party.host.name} +{len(party.guests)}" + (f" +{extra.name}" if extra else "")


@pytest.mark.skipif(pydantic is None, reason="pydantic is not installed")
def test_pydantic_models_get_their_schema_from_pydantic_and_are_validated_into_models():
    made = Tool.from_function(invite)
    assert made.parameters["$defs"]["Guest"]["required"] == ["name"]  # hoisted to the root
    assert made.parameters["properties"]["party"]["properties"]["host"] == {"$ref": "#/$defs/Guest"}
    tools = ToolSet([made])
    out = tools.execute(
        Call(
            "invite",
            {"party": {"host": {"name": "Ann"}, "guests": [{"name": "Bo"}]}, "extra": {"name": "Cy", "age": 7}},
        )
    )
    assert (
        out.ok
        and out.output == "Ann +1 +Cy"
        and out.args["party"] == Party(host=Guest(name="Ann"), guests=[Guest(name="Bo")])
    )
    bad = tools.execute(Call("invite", {"party": {"host": {"name": "Ann", "age": "old"}}}))
    assert not bad.ok and "`party.host.age`: 'old' is not of type 'integer'" in bad.output


def test_pydantic_is_not_imported_by_textagent():
    import subprocess
    import sys

    code = (
        "import sys, datetime, dataclasses\nfrom textagent import Agent, tool, ToolSet\n"
        "@dataclasses.dataclass\nclass P:\n    x: int\n"
        "@tool\ndef f(p: P, d: datetime.date) -> str:\n    return str(p)\n"
        "ToolSet([f]).execute(type('C', (), {'name': 'f', 'args': {'p': {'x': 1}, 'd': '2026-01-01'}})())\n"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@dataclass
class Node:
    value: int
    next: Node | None = None


def test_types_without_a_schema_say_which_types_work():
    def walk(node: Node) -> None: ...

    def odd(thing: Thing) -> None: ...

    with pytest.raises(TypeError, match="Node refers to itself; recursive types need a pydantic model"):
        Tool.from_function(walk)
    with pytest.raises(
        TypeError,
        match=r"parameter `thing`: cannot derive a JSON schema from type .*Thing.*; "
        r"use str, .*an Enum, .*datetime.date/datetime/time, a dataclass, "
        r"a TypedDict or a pydantic model",
    ):
        Tool.from_function(odd)
