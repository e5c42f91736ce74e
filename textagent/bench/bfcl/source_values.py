"""Java and JavaScript arguments as BFCL's AST checker reads them (``bench.bfcl.checker``):
source text, converted by the schema type first. Text that does not fit its type stays a string
(and then fails the type check unless the answer is a "variable"); a conversion that goes wrong
leaves the text too. BFCL's odd behaviours are kept on purpose ("BFCL quirk")."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["from_source"]


_INT, _BOOL = (r"-?\d+$", int), (r"(true|false)\Z", lambda s: s == "true")
_JAVA_FLOAT = r"-?\d+(\.\d+)?([eE][+-]?\d+)?"
_SCALARS: dict[str, dict[str, tuple[str, Callable[[str], Any]]]] = {  # type → (pattern, conversion)
    "java": {
        "byte": _INT,
        "short": _INT,
        "integer": _INT,
        "boolean": _BOOL,
        "float": (_JAVA_FLOAT + "[fF]$", lambda s: float(re.sub(r"[fF]$", "", s))),
        "double": (_JAVA_FLOAT + "$", float),
        "long": (r"-?\d+[lL]$", lambda s: int(re.sub(r"[lL]$", "", s))),
    },
    "javascript": {
        "integer": _INT,
        "Boolean": _BOOL,
        "float": (r"-?\d+(\.\d+)?$", float),
        "Bigint": (r"-?\d+n$", lambda s: int(s[:-1])),
    },
}


def from_source(language: str, text: str, kind: str, item_kind: str | None = None) -> Any:
    """Rule (Java/JS): 5, 5L, 1.5f, 5n, true... by type; collections become lists and dicts (Java:
    new T[]{..}, new ArrayList<>(Arrays.asList(..)) or {{ add(..); }}, new HashMap<>() {{ put(..); }};
    JS: [..], new Array(..), {k: v}); a JS String loses its quotes; Java String, any and char stay
    as written (BFCL quirk: its char pattern can never match)."""
    if kind in _SCALARS[language]:
        pattern, convert = _SCALARS[language][kind]
        return convert(text) if re.match(pattern, text) else text
    if language == "java":
        return _java_collection(text, kind, item_kind)
    if kind == "String":
        return text[1:-1] if _quoted(text) else text
    return _js_dict(text) if kind == "dict" else _js_array(text, item_kind) if kind == "array" else text


def _java_collection(text: str, kind: str, item_kind: str | None) -> Any:
    if kind == "ArrayList":
        if m := re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text):
            parts = m.group(1).split(",")
        elif m := re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL):
            parts = re.findall(r"add\((.+?)\)", m.group(1))
        else:
            return [] if re.search(r"new\s+ArrayList<\w*>\(\)", text) else text
        return [p.strip()[1:-1] if item_kind in ("char", "String") else _java_item(p.strip(), item_kind) for p in parts]
    if kind == "Array":
        if not (m := re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)):
            return text
        # BFCL quirk: unlike ArrayList's, Array's String items keep their quotes, so they never
        # equal the ground truth's strings.
        return [_java_item(p.strip(), item_kind) for p in m.group(1).split(",") if p.strip()]
    if kind == "HashMap":
        if m := re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL):
            return {k: _literal("java", v.strip()) for k, v in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1))}
        return {} if re.search(r"new\s+HashMap<.*?>\s*\(\)", text) else text
    return text  # String, any, char; Set/Hashtable/Queue/Stack are not converted


def _java_item(text: str, item_kind: str | None) -> Any:
    return from_source("java", text, item_kind) if item_kind else _literal("java", text)


def _quoted(text: str, quotes: str = "'\"") -> bool:
    return any(text.startswith(q) and text.endswith(q) for q in quotes)


def _literal(language: str, text: str) -> Any:
    """A literal of no declared type: true/false, a quoted string (Java: "" only), Java's 5L and
    1.5f, then an int, a float, else the text itself."""
    text = text.strip() if language == "javascript" else text
    if text in ("true", "false"):
        return text == "true"
    if _quoted(text, '"' if language == "java" else "'\""):
        return text[1:-1]
    for kind in ("long", "float") if language == "java" else ():
        if re.match(_SCALARS["java"][kind][0], text):
            return _SCALARS["java"][kind][1](text)
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


_JS_GRID = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")


def _js_array(text: str, item_kind: str | None) -> Any:
    """BFCL quirks: items are split on every comma (even inside strings); a 2-D array's items are
    untyped literals."""
    code = text.strip()
    try:
        if grid := re.match(_JS_GRID, code):
            rows = [row.strip() for row in re.findall(r"\[(.*?)\]", grid.group(0))]
            rows[0] = rows[0][1:] if rows[0].startswith("[") else rows[0]
            return [[_literal("javascript", e) for e in row.split(",")] for row in rows]
        if not (m := re.match(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)", code)):
            return code
        body = (m.group(1) if m.group(1) is not None else m.group(2) or "").strip()
        parts = [p.strip() for p in body.split(",")] if body else []
        if item_kind:
            return [
                from_source("javascript", p, item_kind, "String" if p.startswith(("'", '"')) else None) for p in parts
            ]
        return [_literal("javascript", p) for p in parts]
    except Exception:
        return code


def _js_dict(text: str) -> Any:
    """BFCL quirks: the object ends at the first "}" (nesting is not tracked), and a quoted value
    loses its quotes before conversion, so '5' becomes the number 5."""
    code = text.strip()
    if code == "{}":
        return {}
    if not (m := re.match(r"\{(.*?)\}", code)):
        return code
    try:
        result: dict[str, Any] = {}
        for key, raw in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
            key, raw = key.strip().strip("'\""), raw.strip()
            if raw.startswith("[") and raw.endswith("]"):
                result[key] = _js_array(raw, None)
            elif raw.startswith("{") and raw.endswith("}"):
                result[key] = _js_dict(raw)
            else:
                result[key] = _literal("javascript", raw.strip("'\""))
        return result
    except Exception:
        return code
