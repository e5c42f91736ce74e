"""Java and JavaScript argument text converted by schema type, as BFCL's checker converts it."""

import pytest

from textagent.bench.bfcl.source_values import from_source


@pytest.mark.parametrize(
    ("language", "text", "kind", "item_kind", "expected"),
    [
        ("java", "5", "integer", None, 5),
        ("java", "5L", "long", None, 5),
        ("java", "1.5f", "float", None, 1.5),
        ("java", "2.5", "double", None, 2.5),
        ("java", "true", "boolean", None, True),
        ("java", "five", "integer", None, "five"),  # does not fit its type: stays text
        ("java", "1.5", "float", None, "1.5"),  # a Java float needs its f
        ("java", '"hello"', "String", None, '"hello"'),  # Java String stays as written
        ("java", 'new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String", ["a", "b"]),
        ("java", "new ArrayList<Integer>() {{ add(1); add(2); }}", "ArrayList", "integer", [1, 2]),
        ("java", "new ArrayList<>()", "ArrayList", "String", []),
        ("java", "new int[]{1, 2, 3}", "Array", "integer", [1, 2, 3]),
        ("java", 'new String[]{"a"}', "Array", "String", ['"a"']),  # BFCL quirk: quotes kept
        ("java", 'new HashMap<>() {{ put("k", 5L); put("s", "v"); }}', "HashMap", None, {"k": 5, "s": "v"}),
        ("javascript", "5n", "Bigint", None, 5),
        ("javascript", "3", "integer", None, 3),
        ("javascript", "'Paris'", "String", None, "Paris"),
        ("javascript", "[1, 'a', true]", "array", None, [1, "a", True]),
        ("javascript", "new Array(1, 2)", "array", "integer", [1, 2]),
        ("javascript", "[[1, 2], [3, 4]]", "array", None, [[1, 2], [3, 4]]),
        ("javascript", "['a,b']", "array", None, ["'a", "b'"]),  # BFCL quirk: split on every comma
        ("javascript", "{a: 1, b: 'x'}", "dict", None, {"a": 1, "b": "x"}),
        ("javascript", "{n: '5'}", "dict", None, {"n": 5}),  # BFCL quirk: quotes go before conversion
        ("javascript", "{}", "dict", None, {}),
        ("javascript", "not an object", "dict", None, "not an object"),
    ],
)
def test_source_text_is_converted_by_its_schema_type(language, text, kind, item_kind, expected):
    assert from_source(language, text, kind, item_kind) == expected
