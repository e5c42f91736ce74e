"""Docstrings -> (description, {parameter: description}): Google, reST and NumPy styles."""

from __future__ import annotations

import inspect
import re

from ._text import one_line

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


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {param: description}).

    Understands Google style (``Args:`` sections), reST (``:param x:``) and NumPy style
    (``Parameters`` + dashes). The description is the text before the first section, on one
    line; other sections (Returns, Raises, Examples, ...) are left out.
    """
    if not doc:
        return "", {}
    reader = _Reader(inspect.cleandoc(doc).splitlines())
    reader.read()
    params = {k: one_line(" ".join(v)) for k, v in reader.params.items()}
    return one_line("\n".join(reader.desc)), {k: v for k, v in params.items() if v}


class _Reader:
    """One pass over a docstring's lines: a section header switches the state (desc, google,
    numpy, rest or other); every other line goes to the description or to a parameter."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.desc: list[str] = []
        self.params: dict[str, list[str]] = {}
        self.state = "desc"  # desc | google | numpy | rest | other
        self.current: str | None = None  # the parameter the next continuation line belongs to
        self.entry_indent: int | None = None  # the indent of the section's entries
        self.header_indent = 0

    def read(self) -> None:
        i = 0
        while i < len(self.lines):
            i += self._section(i) or self._line(self.lines[i])

    def _enter(self, state: str) -> None:
        self.state, self.current, self.entry_indent = state, None, None

    def _section(self, i: int) -> int:
        """How many lines a section header at line ``i`` takes (0: none there)."""
        line = self.lines[i]
        stripped = line.strip()
        nxt = self.lines[i + 1] if i + 1 < len(self.lines) else ""
        if stripped and _NUMPY_RULE.match(nxt) and not _NUMPY_RULE.match(line):
            self._enter("numpy" if stripped.lower() in _GOOGLE_PARAMS else "other")
            return 2
        m = _GOOGLE_HEADER.match(line)
        if m and m.group(2).lower() in (_GOOGLE_PARAMS | _GOOGLE_OTHER):
            self._enter("google" if m.group(2).lower() in _GOOGLE_PARAMS else "other")
            self.header_indent = len(m.group(1))
            return 1
        if stripped.startswith(":") and _REST_FIELD.match(stripped):
            rm = _REST_PARAM.match(stripped)
            self._enter("rest" if rm else "other")
            if rm:
                self._start(rm.group(2), rm.group(3))
            return 1
        return 0

    def _start(self, name: str, text: str | None) -> None:
        self.current = name
        self.params.setdefault(name, []).extend([text] if text is not None else [])

    def _line(self, line: str) -> int:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if self.state == "desc":
            self.desc.append(line)
        elif not stripped or self.state == "other":
            pass
        elif self.state == "google" and indent <= self.header_indent:
            self._enter("other")  # dedented text after the section: not ours
        elif self.state in ("google", "numpy"):
            if self.entry_indent is None:
                self.entry_indent = indent
            google = self.state == "google"
            at_entry = indent == self.entry_indent if google else indent <= self.entry_indent
            em = (_GOOGLE_ENTRY if google else _NUMPY_ENTRY).match(stripped) if at_entry else None
            if em:
                self._start(em.group(1), em.group(3) if google else None)
            elif self.current is not None:
                self.params[self.current].append(stripped)
        elif self.current is not None:  # rest: a continuation line
            self.params[self.current].append(stripped)
        return 1
