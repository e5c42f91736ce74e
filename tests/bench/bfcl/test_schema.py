"""bench/bfcl/schema.py: BFCL's schema dialect, language notes and native names."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from textagent.bench.bfcl.schema import (
    NEUTRAL_RESULT,
    function_docs,
    language_hint,
    make_tools,
    native_names,
    to_json_schema,
)
from textagent.protocol import ToolCall


def test_dialect_types_become_json_schema() -> None:
    bfcl = {
        "type": "dict",
        "properties": {
            "x": {"type": "float", "description": "a float"},
            "pair": {"type": "tuple", "items": {"type": "integer"}},
            "anything": {"type": "any"},
            "opts": {"type": "dict", "properties": {"deep": {"type": "boolean"}}},
            "maybe": {"type": "string", "optional": True},
            "odd": {"type": "HashMap"},
        },
        "required": ["x", "maybe", "ghost"],
    }
    schema = to_json_schema(bfcl)
    Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert schema["type"] == "object" and props["x"]["type"] == "number"
    assert props["pair"] == {"type": "array", "items": {"type": "integer"}}
    assert "type" not in props["anything"]
    assert props["opts"]["properties"]["deep"]["type"] == "boolean"
    assert props["odd"]["type"] == "object"
    assert schema["required"] == ["x"]  # optional flag and unknown names dropped


def test_int_accepted_for_float_and_bad_default_dropped() -> None:
    schema = to_json_schema({"type": "dict", "properties": {"n": {"type": "integer", "default": "None"}}})
    assert "default" not in schema["properties"]["n"]
    validator = Draft202012Validator(to_json_schema({"type": "float"}))
    assert validator.is_valid(3) and validator.is_valid(2.5) and not validator.is_valid("3")


def test_language_hint_as_bfcl_adds_it() -> None:
    fn = {
        "name": "f",
        "description": "Do it.",
        "parameters": {
            "type": "dict",
            "properties": {"a": {"type": "ArrayList", "description": "Items.", "items": {"type": "String"}}},
        },
    }
    py = language_hint([fn], "python")[0]
    assert py["description"] == "Do it. Note that the provided function is in Python 3 syntax."
    java = language_hint([fn], "java")[0]
    a = java["parameters"]["properties"]["a"]
    assert a["type"] == "string" and "items" not in a
    assert a["description"] == (
        "Items. This is Java ArrayList type parameter in string representation. The list "
        "elements are of type String; they are not in string representation."
    )
    assert fn["description"] == "Do it."  # the input is not changed


def test_native_names_are_openai_safe_and_unique() -> None:
    mapping = native_names(["math.factorial", "math_factorial", "a b"])
    assert mapping == {"math_factorial": "math.factorial", "math_factorial_2": "math_factorial", "a_b": "a b"}


@pytest.mark.parametrize("native", [False, True])
def test_tools_validate_and_return_the_neutral_result(native: bool) -> None:
    docs = [
        {
            "name": "spotify.play",
            "description": "Play.",
            "parameters": {
                "type": "dict",
                "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
                "required": ["artist", "duration"],
            },
        }
    ]
    tools, names = make_tools(docs, native=native)
    name = "spotify_play" if native else "spotify.play"
    assert list(tools) == [name] and names == {name: "spotify.play"}
    ok = tools.execute(ToolCall(name, {"artist": "Taylor Swift", "duration": 20}))
    assert ok.ok and NEUTRAL_RESULT["status"] in ok.output
    bad = tools.execute(ToolCall(name, {"artist": "Taylor Swift", "duration": "twenty"}))
    assert not bad.ok and bad.error == "bad_arguments"


def test_function_docs_of_textagent_tools() -> None:
    from textagent.toolkits.demo import demo_tools

    docs = function_docs(demo_tools())
    assert {"name", "description", "parameters"} == set(docs[0])
