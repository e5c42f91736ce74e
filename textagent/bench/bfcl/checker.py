"""BFCL's AST checker, reimplemented from its rules: score one item's decoded calls like the leaderboard.

The reference is ``bfcl_eval/eval_checker/ast_eval/ast_checker.py`` of bfcl-eval 2026.3.23, with its
Java/JavaScript type converters (here ``bench.bfcl.source_values``) and ``constants/type_mappings.py``. BFCL's odd behaviours are
reproduced on purpose (marked "BFCL quirk") because the point is to score as the leaderboard does.
Deliberate differences:

- a function name is accepted as written (dotted) *or* with its dots replaced by underscores; BFCL
  accepts exactly one of the two, depending on the model's configuration (``underscore_to_dot``);
- no call at all on an item that expects calls is ``no_call`` (BFCL: a wrong count; invalid either way);
- inputs on which BFCL's code crashes (a non-dict inside a list of dicts, say) score as a mismatch;
  an unknown schema type raises ``ValueError`` as BFCL's lookup would;
- Java ``Set``/``Hashtable``/``Queue``/``Stack`` values stay strings (BFCL raises NotImplementedError;
  no item uses them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .source_values import from_source

__all__ = ["ERROR_TYPES", "Verdict", "check_calls"]

ERROR_TYPES = (
    "wrong_function",
    "unknown_parameter",
    "missing_parameter",
    "wrong_type",
    "wrong_value",
    "wrong_count",
    "no_call",
    "irrelevance_call",
    "unparseable",
)


@dataclass(frozen=True)
class Verdict:
    """The score of one item. ``detail`` starts with BFCL's own error type in brackets."""

    valid: bool
    error_type: str | None  # one of ERROR_TYPES when not valid, else None
    detail: str = ""  # one human-readable sentence: what was expected, what was got


class _Mismatch(Exception):
    """A failed rule: BFCL's error type, our sentence, and our ERROR_TYPES name for it."""

    def __init__(self, bfcl_type: str, message: str, ours: str | None = None) -> None:
        super().__init__(message)
        self.bfcl_type, self.message = bfcl_type, message
        self.ours = ours or _our_type(bfcl_type)


_BY_KIND = {
    "wrong_func_name": "wrong_function",
    "unexpected_param": "unknown_parameter",
    "missing_required": "missing_parameter",
    "missing_optional": "missing_parameter",
    "wrong_count": "wrong_count",
}


def _our_type(bfcl_type: str) -> str:
    """BFCL's ``checker:kind`` → ours: type_error:* is wrong_type; value_error:*, dict checks wrong_value."""
    kind = _BY_KIND.get(bfcl_type.rsplit(":", 1)[-1], "wrong_value")
    return "wrong_type" if bfcl_type.startswith("type_error") else kind


# BFCL's schema type names → the Python type a value must have (after conversion, for Java/JS).
_TYPES: dict[str, dict[str, type]] = {
    "python": {
        "string": str,
        "integer": int,
        "float": float,
        "boolean": bool,
        "array": list,
        "tuple": list,
        "dict": dict,
        "any": str,
    },
    "java": {
        "byte": int,
        "short": int,
        "integer": int,
        "float": float,
        "double": float,
        "long": int,
        "boolean": bool,
        "char": str,
        "Array": list,
        "ArrayList": list,
        "Set": set,
        "HashMap": dict,
        "Hashtable": dict,
        "Queue": list,
        "Stack": list,
        "String": str,
        "any": str,
    },
    "javascript": {
        "String": str,
        "integer": int,
        "float": float,
        "Bigint": int,
        "Boolean": bool,
        "dict": dict,
        "array": list,
        "any": str,
    },
}
# Types whose items (``items.type``) are type-checked one level deep.
_NESTED = {
    "python": ("array", "tuple"),
    "java": ("Array", "ArrayList", "array"),
    "javascript": ("Array", "ArrayList", "array"),
}


def check_calls(
    category: str,
    functions: list[dict],
    ground_truth: list[dict] | None,
    calls: list[tuple[str, dict]],
    *,
    language: str | None = None,
) -> Verdict:
    """Score one BFCL item's decoded calls the way BFCL's AST checker does.

    Dispatch follows BFCL: a category containing "irrelevance" is valid iff there is no call
    (``live_relevance``: iff there is one); "parallel" → order-free matching (``_check_parallel``);
    "multiple" → one call, checked against the function the ground truth names; anything else →
    one call, checked against the item's first function. The language is derived from the category
    when not given ("java"/"javascript"; else python).
    """
    language = language or ("javascript" if "javascript" in category else "java" if "java" in category else "python")
    if language not in _TYPES:
        raise ValueError(f"unsupported language {language!r}")
    if "irrelevance" in category:  # BFCL: valid iff nothing decodes to a call
        return (
            Verdict(True, None)
            if not calls
            else Verdict(
                False,
                "irrelevance_call",
                "[irrelevance_error:"
                f"decoder_success] expected no call, got {len(calls)}: {', '.join(n for n, _ in calls)}.",
            )
        )
    if "relevance" in category:  # live_relevance: any call at all is right
        return (
            Verdict(True, None)
            if calls
            else Verdict(False, "no_call", "[relevance_error:decoder_failed] expected a call, got none.")
        )
    if ground_truth is None:
        raise ValueError(f"category {category!r} needs a ground truth")
    try:
        if "parallel" in category:
            _check_parallel(functions, ground_truth, calls, language)
        elif "multiple" in category:
            _check_count("multiple_function_checker", len(ground_truth), calls)
            _check_call(_find(functions, ground_truth[0]), calls[0], ground_truth[0], language)
        else:
            _check_count("simple_function_checker", 1, calls)
            _check_call(functions[0], calls[0], ground_truth[0], language)
    except _Mismatch as miss:
        return Verdict(False, miss.ours, f"[{miss.bfcl_type}] {miss.message}")
    return Verdict(True, None)


def _check_count(checker: str, expected: int, calls: list) -> None:
    """Rule: exactly as many calls as ground-truth entries (1 for simple and multiple)."""
    if len(calls) != expected:
        raise _Mismatch(
            f"{checker}:wrong_count", f"expected {expected} call(s), got {len(calls)}.", None if calls else "no_call"
        )


def _find(functions: list[dict], answer: dict) -> dict:
    name = next(iter(answer))
    if found := next((f for f in functions if f["name"] == name), None):
        return found
    raise ValueError(f"the ground truth names {name!r}, which is not among the item's functions")


def _check_parallel(
    functions: list[dict], ground_truth: list[dict], calls: list[tuple[str, dict]], language: str
) -> None:
    """Rule: parallel categories match calls to ground-truth entries one to one, in any order.

    BFCL quirk: the matching is greedy, not a full bipartite search: each entry, in ground-truth
    order, takes the first still-unmatched call that satisfies it. When nothing matches, our error
    type is that of the first miss that got past the name check (else wrong_function).
    """
    _check_count("parallel_function_checker_no_order", len(ground_truth), calls)
    free = list(range(len(calls)))
    for index, answer in enumerate(ground_truth):
        function, misses = _find(functions, answer), []
        for j in free:
            try:
                _check_call(function, calls[j], answer, language)
            except _Mismatch as miss:
                misses.append(miss)
                continue
            free.remove(j)
            break
        else:
            closest = next((m for m in misses if m.ours != "wrong_function"), misses[0])
            raise _Mismatch(
                "parallel_function_checker_no_order:cannot_find_match",
                f"no call matches expected call {index} ({function['name']}); closest: "
                f"[{closest.bfcl_type}] {closest.message}",
                closest.ours,
            )


def _check_call(function: dict, call: tuple[str, dict], answer: dict, language: str) -> None:
    """Rules for one call against one ground-truth entry, in BFCL's order: the name; every required
    parameter present; each given parameter known to both the schema and the ground truth, well
    typed and accepted; then every omitted parameter must have "" among its accepted values."""
    name, args = call
    accepted: dict[str, list] = next(iter(answer.values()))
    expected = function["name"]
    if name not in (expected, expected.replace(".", "_")):
        raise _Mismatch("simple_function_checker:wrong_func_name", f"expected a call to {expected}, got {name}.")
    properties = function["parameters"]["properties"]
    for param in function["parameters"].get("required", []):
        if param not in args:
            raise _Mismatch(
                "simple_function_checker:missing_required", f"{expected}: required parameter {param!r} is missing."
            )
    for param, value in args.items():
        # BFCL quirk: a schema parameter absent from the ground truth counts as unexpected too.
        if param not in properties or param not in accepted:
            raise _Mismatch(
                "simple_function_checker:unexpected_param",
                f"{expected}: got parameter {param!r}, which is not expected.",
            )
        _check_param(f"{expected}: parameter {param!r}", value, properties[param], accepted[param], language)
    for param, values in accepted.items():
        if param not in args and "" not in values:
            raise _Mismatch(
                "simple_function_checker:missing_optional",
                f"{expected}: parameter {param!r} is missing; expected one of {_short(values)}.",
            )


def _type_of(language: str, kind: str | None) -> type:
    try:
        return _TYPES[language][kind]  # type: ignore[index]
    except KeyError:
        raise ValueError(f"BFCL type {kind!r} is not known for {language}") from None


def _check_param(where: str, value: Any, schema: dict, accepted: list, language: str) -> None:
    """Rule: a given value is converted (Java/JS), type-checked, then compared with the accepted values."""
    kind = schema["type"]
    expected = _type_of(language, kind)
    item_kind = schema.get("items", {}).get("type") if kind in _NESTED[language] else None
    inner = _type_of(language, item_kind) if item_kind is not None else None
    if language != "python":
        # Java/JS arguments are source text; they must be strings and are converted by type first.
        if type(value) is not str:
            tag = "java" if language == "java" else "js"
            raise _Mismatch(
                f"type_error:{tag}",
                f"{where} expected {language} text (a string), got {type(value).__name__} {_short(value)}.",
            )
        value = from_source(language, value, kind, item_kind)
    if kind == "tuple" and type(value) is tuple:
        value = list(value)  # JSON answers hold tuples as lists
    if language == "python" and kind == "float" and type(value) is int:
        value = float(value)  # an int is a fine float (but not inside an array: see _items_fit)
    variable = _check_type(where, value, accepted, kind, expected, inner)
    if variable or expected not in (dict, list, str):
        if value not in accepted:  # plain equality: numbers, booleans, "variables"
            raise _Mismatch("value_error:others", f"{where} expected one of {_short(accepted)}, got {_short(value)}.")
    elif expected is dict:
        _check_dict(where, value, accepted)
    elif expected is list and inner is dict:
        _check_dict_list(where, value, accepted)
    elif expected is str:
        if _norm(value) not in [_norm(a) for a in accepted if type(a) is str]:
            raise _Mismatch(
                "value_error:string",
                f"{where} expected one of {_short(accepted)} "
                f"(compared case-, space- and punctuation-insensitively), got {_short(value)}.",
            )
    else:
        _check_list(where, value, accepted)


def _answer_type(accepted: Any) -> type | None:
    """The type of the first accepted value that is not "" (which only marks a parameter optional)."""
    return next((type(a) for a in accepted if a != ""), None)


def _check_type(where: str, value: Any, accepted: list, kind: str, expected: type, inner: type | None) -> bool:
    """Rule: the value has the schema's type (exactly: a bool is no int), with items of ``inner``.

    BFCL quirk, "variables": when the accepted values have another type than the schema says
    (e.g. a string naming a variable for an integer), a value of the accepted values' type passes
    and is then compared by plain equality. Returns whether the value is such a variable.
    """
    answer_type = _answer_type(accepted)
    if type(value) is expected:
        # (inner is only known for the array kinds, whose type is list)
        if inner is None or (isinstance(value, list) and any(_items_fit(value, a, inner) for a in accepted)):
            return answer_type is not None and answer_type is not expected
        raise _Mismatch(
            "type_error:nested" if type(value) is answer_type else "type_error:simple",
            f"{where} expected {kind} of {inner.__name__}, got {_short(value)}.",
        )
    if answer_type is not None and type(value) is answer_type:
        return True
    raise _Mismatch("type_error:simple", f"{where} expected {kind}, got {type(value).__name__} {_short(value)}.")


def _items_fit(value: list, answer: Any, inner: type) -> bool:
    """Rule (nested types, one level): every item has type ``inner`` or that of the answer's first item.

    BFCL quirks: no int-to-float allowance here, and a non-list accepted value (the optional
    marker "") lets any items pass.
    """
    if type(answer) is not list:
        return True
    item_type = _answer_type(answer)
    return all(type(v) is inner or (item_type is not None and type(v) is item_type) for v in value)


_IGNORED = re.compile(r"[ ,./\-_*^]")


def _norm(value: Any) -> Any:
    """Rule: strings compare lowercased, without spaces and ``,./-_*^``, with ' read as " (BFCL's
    standardize_string: "April 1, 2024" == "april 1 2024"). Other values are left alone."""
    return _IGNORED.sub("", value).lower().replace("'", '"') if type(value) is str else value


def _seq(values: Any) -> Any:
    # BFCL indexes accepted values as sequences: a string is its characters (so "" is []).
    return values if isinstance(values, (list, str)) else [values]


def _check_list(where: str, value: list, accepted: list) -> None:
    """Rule: a list equals one accepted list item by item, in order; string items normalised
    (top level only). BFCL quirk: the optional marker "" reads as [], so [] passes then."""
    options = [[_norm(v) for v in a] if isinstance(a, (list, str)) else a for a in accepted]
    if [_norm(v) for v in value] not in options:
        raise _Mismatch(
            "value_error:list/tuple",
            f"{where} expected one of {_short(accepted)} (order matters), got {_short(value)}.",
        )


def _check_dict(where: str, value: Any, accepted: list) -> None:
    """Rule: a dict matches one accepted dict key by key (see ``_match_dict``); "" is skipped."""
    failure = _Mismatch("dict_checker:unclear", f"{where} no accepted dict for {_short(value)}.")
    for answer in accepted:
        if answer == "":
            continue
        try:
            _match_dict(where, value, answer)
            return
        except _Mismatch as miss:
            failure = miss
    raise failure


def _match_dict(where: str, value: Any, answer: Any) -> None:
    """Every given key is accepted with an accepted (normalised, not recursed) value; every missing
    key has "" among its accepted values. BFCL quirk: an answer value that is a bare string, not a
    list, accepts only single characters but makes its key optional ("" is in every string)."""
    if type(value) is not dict or not isinstance(answer, dict):
        raise _Mismatch("dict_checker:unclear", f"{where} expected a dict like {_short(answer)}, got {_short(value)}.")
    for key, item in value.items():
        if key not in answer:
            raise _Mismatch("value_error:dict_key", f"{where} got unexpected key {key!r}.")
        if _norm(item) not in [_norm(a) for a in _seq(answer[key])]:
            raise _Mismatch(
                "value_error:dict_value",
                f"{where} key {key!r} expected one of {_short(answer[key])}, got {_short(item)}.",
            )
    for key, options in answer.items():
        if key not in value and "" not in _seq(options):
            raise _Mismatch("value_error:dict_key", f"{where} key {key!r} is missing.")


def _check_dict_list(where: str, value: list, accepted: list) -> None:
    """Rule: a list of dicts matches an accepted list of the same length, dict by dict in order."""
    failure = _Mismatch("list_dict_checker:unclear", f"{where} no accepted list of dicts for {_short(value)}.")
    for answer in accepted:
        answer = _seq(answer)
        if len(value) != len(answer):
            failure = _Mismatch(
                "value_error:list_dict_count", f"{where} expected {len(answer)} dicts, got {len(value)}."
            )
            continue
        try:
            for item, expected in zip(value, answer):
                _check_dict(where, item, [expected])
            return
        except _Mismatch as miss:
            failure = miss
    raise failure


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
