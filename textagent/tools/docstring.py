"""Docstrings -> (description, {parameter: description}): Google, reST and NumPy styles."""

from __future__ import annotations

import inspect
import re

from ._text import _one_line

_GOOGLE_PARAMS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
    "other parameters",
}
_GOOGLE_OTHER = {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "examples",
    "example",
    "notes",
    "note",
    "warnings",
    "warning",
    "see also",
    "attributes",
    "todo",
    "references",
    "methods",
}
_GOOGLE_HEADER = re.compile(r"^(\s*)([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:([^:]+?)\s+)?\*{0,2}(\w+)\s*:\s*(.*)$")
_REST_FIELD = re.compile(r"^:\w[^:]*:")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:  # noqa: C901
    """Split a docstring into (description, {param: description}).

    Understands Google style (``Args:`` sections), reST (``:param x:``) and NumPy style
    (``Parameters`` + dashes). The description is the text before the first section, on one
    line; other sections (Returns, Raises, Examples, ...) are left out.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, list[str]] = {}
    state = "desc"  # desc | google | numpy | rest | other
    current: str | None = None
    entry_indent: int | None = None
    header_indent = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        # Section starts (any state)
        if stripped and _NUMPY_RULE.match(nxt) and not _NUMPY_RULE.match(line):
            name = stripped.lower()
            state = "numpy" if name in _GOOGLE_PARAMS else "other"
            current, entry_indent = None, None
            i += 2
            continue
        m = _GOOGLE_HEADER.match(line)
        if m and m.group(2).lower() in (_GOOGLE_PARAMS | _GOOGLE_OTHER):
            state = "google" if m.group(2).lower() in _GOOGLE_PARAMS else "other"
            header_indent = len(m.group(1))
            current, entry_indent = None, None
            i += 1
            continue
        if stripped.startswith(":") and _REST_FIELD.match(stripped):
            rm = _REST_PARAM.match(stripped)
            if rm:
                state, current = "rest", rm.group(2)
                params.setdefault(current, []).append(rm.group(3))
            else:
                state, current = "other", None
            i += 1
            continue
        if state == "desc":
            desc.append(line)
        elif state == "google":
            if stripped and indent <= header_indent:
                state, current = "other", None  # dedented text after the section: not ours
            elif stripped:
                if entry_indent is None:
                    entry_indent = indent
                em = _GOOGLE_ENTRY.match(stripped) if indent == entry_indent else None
                if em:
                    current = em.group(1)
                    params.setdefault(current, []).append(em.group(3))
                elif current is not None:
                    params[current].append(stripped)
        elif state == "numpy":
            if stripped:
                if entry_indent is None:
                    entry_indent = indent
                em = _NUMPY_ENTRY.match(stripped) if indent <= entry_indent else None
                if em:
                    current = em.group(1)
                    params.setdefault(current, [])
                elif current is not None:
                    params[current].append(stripped)
        elif state == "rest" and stripped and current is not None:
            params[current].append(stripped)
        i += 1
    description = _one_line("\n".join(desc))
    return description, {k: _one_line(" ".join(v)) for k, v in params.items() if _one_line(" ".join(v))}
