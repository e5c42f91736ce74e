"""The tool list of the system prompt: each tool's name, description and parameters, with the
words a run of descriptions shares said once when asked."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .. import _schema
from .files import template

__all__ = ["SHARED_MIN_CHARS", "SHARED_MIN_TOOLS", "describe_tool", "system_prompt", "tool_listing"]


def describe_tool(tool: Any, text: str | None = None) -> str:
    """One entry of the tool list: the name and description, then a line per parameter with
    its type (``text``: the description to show, when not the tool's own). Nothing here looks like a call: small models copy a listing such as
    ``{"n": integer}`` or ``is_prime(n: integer)`` into their TOOL lines verbatim."""
    params = tool.parameters or {}
    props: dict[str, Any] = params.get("properties", {})
    required = set(params.get("required", []))
    lines = []
    for key, schema in props.items():
        if schema is False:  # JSON Schema's `false`: the key must not be passed
            continue
        if not isinstance(schema, Mapping):
            schema = {}  # `true` (anything), or what the meta-schema let through
        kind = _schema.type_label(schema).replace("|", " or ")
        if key not in required:
            kind += (
                f", optional, default {json.dumps(schema['default'], ensure_ascii=False)}"
                if "default" in schema
                else ", optional"
            )
        description = " ".join(str(schema.get("description") or "").split())
        line = template("tool_param.txt").substitute(name=key, type=kind, description=description)
        lines.append(line if description else line.rstrip().removesuffix(":"))
    if text is None:
        text = " ".join((tool.description or "").split()) or "(no description)"
    return "\n".join([template("tool.txt").substitute(name=tool.name, description=text), *lines])


def tool_listing(tools: Any, *, grouped: bool = False) -> str:
    """The tools as the system prompt lists them (a ToolSet or a sequence of tools).
    ``grouped``: tools listed one after another whose descriptions open (and close) with the
    same words, at least SHARED_MIN_TOOLS of them, have those words said once, above them
    (BFCL's multi-turn functions repeat a paragraph about their class in every description)."""
    tool_list = list(tools.values()) if hasattr(tools, "values") else list(tools)
    if not grouped:
        return "\n".join(describe_tool(t) for t in tool_list) or "(none)"
    lines = []
    for group, head, tail in _shared_words(tool_list):
        if head:
            ends = template("tool_group_tail.txt").substitute(tail=tail) if tail else ""
            lines.append(template("tool_group.txt").substitute(count=len(group), head=head, tail=ends))
        for tool, own in group:
            lines.append(describe_tool(tool, own if head else None))
    return "\n".join(lines) or "(none)"


SHARED_MIN_CHARS = 60  # words shared by fewer characters are not worth a line of their own
SHARED_MIN_TOOLS = 3


def _shared_words(tool_list: list[Any]) -> list[tuple[list[tuple[Any, str]], str, str]]:
    """The tools in runs: (the run's tools with what is their own of their descriptions, the
    opening they share, the closing they share); a tool in no run is a run of one with no
    opening."""
    descs = [" ".join((t.description or "").split()) for t in tool_list]
    runs: list[tuple[list[tuple[Any, str]], str, str]] = []
    i = 0
    while i < len(tool_list):
        j, head = i + 1, ""
        while j < len(tool_list):
            shared = _opening(descs[i : j + 1])
            if len(shared) < SHARED_MIN_CHARS:
                break
            head, j = shared, j + 1
        if j - i < SHARED_MIN_TOOLS or not head:
            runs.append(([(tool_list[i], descs[i] or "(no description)")], "", ""))
            i += 1
            continue
        rests = [d[len(head) :].strip() for d in descs[i:j]]
        tail = _closing(rests)
        own = [r[: len(r) - len(tail)].strip() if tail else r for r in rests]
        runs.append((list(zip(tool_list[i:j], own)), head, tail))
        i = j
    return runs


def _opening(descs: list[str]) -> str:
    """The words every description opens with, up to a word's end, each leaving some of its own."""
    shared = os.path.commonprefix(descs)  # noqa: RUF071 - characters, on purpose
    if any(len(d) == len(shared) for d in descs):
        shared = shared[: min(len(d) for d in descs) - 1]
    cut = shared.rfind(" ")
    return shared[:cut].rstrip() if cut > 0 else ""


def _closing(rests: list[str]) -> str:
    """The sentences every rest ends with (from a sentence's start), each leaving some of its own."""
    reversed_shared = os.path.commonprefix([r[::-1] for r in rests])  # noqa: RUF071 - characters
    shared = reversed_shared[::-1]
    for at in range(len(shared)):
        starts = at > 1 and shared[at - 2 : at] == ". "
        if starts and all(len(r) > len(shared) - at for r in rests):
            tail = shared[at:]
            return tail if len(tail) >= 20 else ""
    return ""


def system_prompt(tools: Any, *, grouped: bool = False) -> str:
    return template("system.txt").substitute(tools=tool_listing(tools, grouped=grouped))
