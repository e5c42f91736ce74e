"""Benchmark tasks: the JSONL file format and loading (the checkers run in bench.checking).

A task file is JSON Lines. An optional first line is a header::

    {"format": "textagent-bench", "version": 1, "name": "default", "description": "..."}

Every other non-blank line is one task::

    {"id": "chain-tokyo", "kind": "chain",
     "question": "Get the weather in Tokyo, multiply the temperature by 10, then turn off the kitchen light.",
     "tools": ["get_weather", "multiply", "toggle_light"],
     "setup": {"lights": {"kitchen": true}},
     "check": [{"type": "calls", "calls": [{"name": "get_weather", "args": {"city": "Tokyo"}}]},
               {"type": "state", "lights": {"kitchen": false}}],
     "max_steps": 8,
     "reference": ["TOOL: get_weather ARGS: {\\"city\\": \\"Tokyo\\"}", "...", "ANSWER: ..."]}

``tools`` are bench tool names (``textagent.bench.tools``) or ``module:function``; ``mcp``
(optional) is a list of MCP servers (a command line, an argv list or an ``http(s)://`` URL) whose
tools are added, each server started once per bench run. ``check`` is
one checker or a list (all must pass); an episode succeeds when the model gave a final answer
and every check passes. ``reference`` (optional) is a correct run written in the text protocol:
the tests replay it to prove every task is solvable and its checks are right. ``split``
(optional) is ``"dev"`` or ``"test"``: prompts, examples and checks are tuned on dev only, and
the headline numbers are the test split (``textagent bench --split test``).

Checkers (strings compare case-insensitively):

=============  =================================================================================
``exact``      ``value``: the answer equals it, ignoring case, surrounding quotes/punctuation
``numeric``    ``value`` (or ``values``: all of them) appears as a number in the answer, within
               ``tol`` (absolute, default 1e-6) or ``rel`` (relative); ``only``: every number
               the answer states is one of these (a comparison with a made-up value fails)
``contains``   ``all`` / ``any`` / ``none``: substrings of the answer (``value`` = one ``all``)
``regex``      ``pattern`` searches the answer (case-insensitive)
``calls``      ``calls``: each spec is matched by a distinct successful call: ``name`` (or
               ``any_of`` names), ``args`` (a subset; a value may be ``{"any": [...]}``),
               ``output_contains``
``no_calls``   no tool call was attempted at all (a question that needs no tool)
``not_called`` ``tools``: none of these was called
``state``      ``lights``: the episode's final light states
``answered``   a non-empty final answer
=============  =================================================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..jsonl import JsonlError, read_jsonl
from .tools import check_tool_names

__all__ = [
    "CHECK_TYPES",
    "FORMAT_VERSION",
    "SPLITS",
    "Task",
    "TaskFileError",
    "default_suite_path",
    "load_tasks",
]

FORMAT_VERSION = 1
KINDS = ("single", "chain", "parallel", "bare", "typed", "no_tool", "error_recovery", "long_output", "distractor")
CHECK_TYPES = ("exact", "numeric", "contains", "regex", "calls", "no_calls", "not_called", "state", "answered")
DEFAULT_MAX_STEPS = 8
SPLITS = ("dev", "test")


class TaskFileError(ValueError):
    """A task file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Task:
    id: str
    question: str
    tools: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]
    kind: str = "other"
    max_steps: int = DEFAULT_MAX_STEPS
    setup: dict[str, Any] = field(default_factory=dict)
    reference: tuple[str, ...] = ()
    notes: str = ""
    split: str = ""  # "dev" (tune on it) or "test" (report it); "" = unassigned
    bfcl: Any = None  # the BFCL item (bench.bfcl.data.BfclItem) a task was made from
    mcp: tuple[Any, ...] = ()  # MCP servers whose tools the task adds (commands, argv lists, URLs)

    @property
    def needs_tools(self) -> bool:
        """A call is required: some check asks for one."""
        return any(c["type"] == "calls" for c in self.checks)

    @property
    def needs_no_tool(self) -> bool:
        return any(c["type"] == "no_calls" for c in self.checks)

    @property
    def required_tools(self) -> set[str]:
        names: set[str] = set()
        for c in self.checks:
            if c["type"] == "calls":
                for spec in c["calls"]:
                    names.update(spec.get("any_of") or [spec["name"]])
        return names

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "question": self.question,
            "tools": list(self.tools),
            "check": list(self.checks),
            "max_steps": self.max_steps,
        }
        if self.setup:
            out["setup"] = self.setup
        if self.mcp:
            out["mcp"] = [s if isinstance(s, str) else list(s) for s in self.mcp]
        if self.reference:
            out["reference"] = list(self.reference)
        if self.notes:
            out["notes"] = self.notes
        if self.split:
            out["split"] = self.split
        return out


def default_suite_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("suite.jsonl")))


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _strings(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


# The type of every field a checker reads: a malformed check is refused when the file is loaded,
# never found while an episode is scored (it would be recorded as a harness error and retried).
_FIELD_TYPES: dict[str, dict[str, tuple[Any, str]]] = {
    "exact": {"value": (lambda x: isinstance(x, (str, int, float)) and not isinstance(x, bool), "a string or number")},
    "numeric": {
        "value": (_is_number, "a number"),
        "values": (lambda x: isinstance(x, list) and x and all(map(_is_number, x)), "a non-empty list of numbers"),
        "only": (lambda x: isinstance(x, list) and all(map(_is_number, x)), "a list of numbers"),
        "tol": (lambda x: _is_number(x) and x >= 0, "a number >= 0"),
        "rel": (lambda x: _is_number(x) and x >= 0, "a number >= 0"),
    },
    "contains": {
        "value": (lambda x: isinstance(x, str), "a string"),
        "all": (_strings, "a list of strings"),
        "any": (_strings, "a list of strings"),
        "none": (_strings, "a list of strings"),
    },
    "regex": {"pattern": (lambda x: isinstance(x, str), "a string")},
    "not_called": {"tools": (_strings, "a list of tool names")},
    "state": {
        "lights": (
            lambda x: isinstance(x, Mapping) and all(isinstance(k, str) and isinstance(v, bool) for k, v in x.items()),
            "an object of room: true/false",
        )
    },
}


def _check_types(check: Mapping[str, Any], kind: str, where: str) -> None:
    for key, (ok, what) in _FIELD_TYPES.get(kind, {}).items():
        if key in check and not ok(check[key]):
            raise TaskFileError(f"{where}: a {kind!r} check's {key!r} must be {what}, not {check[key]!r:.80}")


def _validate_check(check: Any, where: str) -> dict[str, Any]:
    if not isinstance(check, Mapping) or check.get("type") not in CHECK_TYPES:
        raise TaskFileError(f'{where}: each check needs a "type", one of {", ".join(CHECK_TYPES)}; got {check!r:.120}')
    kind = check["type"]
    need = {
        "exact": ("value",),
        "regex": ("pattern",),
        "calls": ("calls",),
        "not_called": ("tools",),
        "state": ("lights",),
    }.get(kind, ())
    for key in need:
        if key not in check:
            raise TaskFileError(f"{where}: a {kind!r} check needs {key!r}")
    if kind == "numeric" and not any(k in check for k in ("value", "values", "only")):
        raise TaskFileError(f"{where}: a 'numeric' check needs 'value', 'values' or 'only'")
    if kind == "contains" and not any(k in check for k in ("value", "all", "any", "none")):
        raise TaskFileError(f"{where}: a 'contains' check needs 'value', 'all', 'any' or 'none'")
    _check_types(check, kind, where)
    if kind == "regex":
        try:
            re.compile(check["pattern"])
        except re.error as exc:
            raise TaskFileError(f"{where}: bad regex {check['pattern']!r}: {exc}") from None
    if kind == "calls":
        if not isinstance(check["calls"], list) or not check["calls"]:
            raise TaskFileError(f"{where}: 'calls' must be a non-empty list of call specs")
        for spec in check["calls"]:
            if not isinstance(spec, Mapping) or not (isinstance(spec.get("name"), str) or spec.get("any_of")):
                raise TaskFileError(f'{where}: a call spec needs "name" (or "any_of"): {spec!r:.120}')
    return dict(check)


def parse_task(data: Any, where: str = "task") -> Task:
    if not isinstance(data, Mapping):
        raise TaskFileError(f"{where}: a task must be a JSON object")
    for key in ("id", "question", "tools"):
        if key not in data:
            raise TaskFileError(f"{where}: missing {key!r}")
    if not isinstance(data["id"], str) or not data["id"]:
        raise TaskFileError(f"{where}: 'id' must be a non-empty string")
    tools = data["tools"]
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise TaskFileError(f"{where}: 'tools' must be a list of tool names")
    unknown = check_tool_names(tools)
    if unknown:
        raise TaskFileError(f"{where}: unknown tools {', '.join(unknown)} (bench tools or module:function)")
    raw_checks = data.get("check", [])
    if isinstance(raw_checks, Mapping):
        raw_checks = [raw_checks]
    if not isinstance(raw_checks, list) or not raw_checks:
        raise TaskFileError(f"{where}: 'check' must be a checker object or a non-empty list of them")
    checks = tuple(_validate_check(c, where) for c in raw_checks)
    max_steps = data.get("max_steps", DEFAULT_MAX_STEPS)
    if not isinstance(max_steps, int) or max_steps < 1:
        raise TaskFileError(f"{where}: 'max_steps' must be a positive integer")
    reference = data.get("reference", [])
    if not isinstance(reference, list) or not all(isinstance(r, str) for r in reference):
        raise TaskFileError(f"{where}: 'reference' must be a list of replies (strings)")
    split = data.get("split", "")
    if split not in (*SPLITS, ""):
        raise TaskFileError(f"{where}: 'split' must be one of {', '.join(SPLITS)}, not {split!r}")
    mcp = data.get("mcp", [])
    if not isinstance(mcp, list) or not all(
        (isinstance(m, str) and m.strip()) or (isinstance(m, list) and m and all(isinstance(a, str) for a in m))
        for m in mcp
    ):
        raise TaskFileError(f"{where}: 'mcp' must be a list of MCP servers: command lines, argv lists or URLs")
    setup = data.get("setup") or {}
    lights = setup.get("lights", {}) if isinstance(setup, Mapping) else None
    if (
        not isinstance(setup, Mapping)
        or not isinstance(lights, Mapping)
        or not all(isinstance(k, str) and isinstance(v, bool) for k, v in lights.items())
    ):
        raise TaskFileError(f'{where}: \'setup\' must be an object, e.g. {{"lights": {{"kitchen": true}}}}')
    return Task(
        id=data["id"],
        question=str(data["question"]),
        tools=tuple(tools),
        checks=checks,
        kind=str(data.get("kind", "other")),
        max_steps=max_steps,
        setup=dict(setup),
        reference=tuple(reference),
        notes=str(data.get("notes", "")),
        split=split,
        mcp=tuple(m if isinstance(m, str) else tuple(m) for m in mcp),
    )


def code_it_runs(task: Task) -> list[str]:
    """What of a task runs code of its own: ``module:function`` tools and MCP server commands."""
    return [t for t in task.tools if ":" in t] + [
        m if isinstance(m, str) else " ".join(m)
        for m in task.mcp
        if not (isinstance(m, str) and m.strip().lower().startswith(("http://", "https://")))
    ]


def load_tasks(path: str | Path | None = None, *, allow_imports: bool = False) -> list[Task]:
    """Tasks of a JSONL file (default: the shipped suite). Raises TaskFileError naming the line.

    A task file is data: one that names code to run (a ``module:function`` tool imports it, an
    ``mcp`` command starts it) is refused unless ``allow_imports`` (``bench --allow-imports``)."""
    path = Path(path) if path is not None else default_suite_path()
    tasks: list[Task] = []
    seen: set[str] = set()
    try:
        for line in read_jsonl(path, what="task file"):
            where, data = line.where, line.value
            if isinstance(data, Mapping) and "format" in data and "id" not in data:
                if data.get("version", FORMAT_VERSION) > FORMAT_VERSION:
                    raise TaskFileError(
                        f"{where}: task format version {data.get('version')} is newer than this "
                        f"textagent understands ({FORMAT_VERSION}); upgrade textagent"
                    )
                continue
            task = parse_task(data, where)
            code = code_it_runs(task)
            if code and not allow_imports:
                raise TaskFileError(
                    f"{where}: task {task.id!r} names code to run ({', '.join(code)}); a task "
                    "file runs no code unless you pass --allow-imports (allow_imports=True)"
                )
            if task.id in seen:
                raise TaskFileError(f"{where}: duplicate task id {task.id!r}")
            seen.add(task.id)
            tasks.append(task)
    except JsonlError as exc:
        raise TaskFileError(str(exc)) from None
    if not tasks:
        raise TaskFileError(f"{path}: no tasks in this file")
    return tasks


def iter_kinds(tasks: Iterable[Task]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.kind] = counts.get(t.kind, 0) + 1
    return counts
