"""Model-facing text. Every word the model reads comes from a template file in this folder."""

from __future__ import annotations

import difflib
import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from string import Template
from typing import Any, NamedTuple

from .. import _schema
from ..examples import closeness
from ..protocol import ParseError, ToolCall, render_call
from ..protocol.binding import tool_specs
from ..protocol.types import NAME_RE

__all__ = [
    "DEFAULT_EXAMPLE_STYLE",
    "DEFAULT_EXAMPLE_TOOL",
    "EXAMPLE_STYLES",
    "EXAMPLE_TOOLS",
    "FAMILIES",
    "Prompts",
    "Worked",
    "call_groups",
    "cut_feedback",
    "describe_tool",
    "example_args",
    "example_call",
    "example_style",
    "example_tool",
    "example_turns",
    "feedback",
    "for_family",
    "listed",
    "observation",
    "parse_feedback",
    "placeholder_examples",
    "system_prompt",
    "task",
    "template",
    "tool_listing",
    "worked_examples",
]


FAMILIES = ("text", "native", "proxy")
# How placeholder examples show a tool's result and the answer: "placeholder" as a description
# in brackets ("(what f returned)"), "concrete" as made-up values stated in words, "status" as a
# result that carries no value and an answer that says what ran, "value" as a status with a value
# and an answer that names the tool and the value it reported (issue 41: models copied the
# bracketed form, then the concrete values, into their answers). The default, "status" with the
# "closest" tool below: on BFCL dev most of its answers are true after the calls they name (3 to 8
# of 150 claim a call that did not run, against placeholder's copies in about a third), with the
# first replies where placeholder had them (docs/bench.md, #41).
_ANSWERS = {  # style: the answers of the one-call, the pair and the two-tool example
    "placeholder": ("example_answer.txt", "example_pair_answer.txt", "example_two_answer.txt"),
    "concrete": ("example_concrete_answer.txt", "example_concrete_pair_answer.txt", "example_concrete_two_answer.txt"),
    "status": ("example_status_answer.txt", "example_status_pair_answer.txt", "example_status_two_answer.txt"),
    "value": ("example_value_answer.txt", "example_value_pair_answer.txt", "example_value_two_answer.txt"),
}
EXAMPLE_STYLES = tuple(_ANSWERS)
DEFAULT_EXAMPLE_STYLE = "status"


# Which tool the placeholder examples show: "first", the first of the set that takes arguments;
# "closest", the one whose name and description are closest to the question (issue 41: with the
# first, the 1.5B answered from memory on BFCL `multiple` items whose own tool the examples did
# not show; with the status style, the 0.5B lost those items unless the closest tool was shown).
EXAMPLE_TOOLS = ("first", "closest")
DEFAULT_EXAMPLE_TOOL = "closest"


def example_tool(choice: str) -> str:
    """``choice`` if it names a way to choose the examples' tool (EXAMPLE_TOOLS); else ValueError."""
    if choice not in EXAMPLE_TOOLS:
        raise ValueError(f"unknown example tool choice {choice!r}; choose one of {', '.join(EXAMPLE_TOOLS)}")
    return choice


def example_style(style: str) -> str:
    """``style`` if it names an example style (EXAMPLE_STYLES); else ValueError, worded for a user."""
    if style not in EXAMPLE_STYLES:
        raise ValueError(f"unknown example style {style!r}; choose one of {', '.join(EXAMPLE_STYLES)}")
    return style


@cache
def _read(path: str) -> Template | None:
    place = resources.files(__package__)
    for part in path.split("/"):
        place = place.joinpath(part)
    if not place.is_file():
        return None
    return Template(place.read_text(encoding="utf-8").rstrip("\n"))


class Prompts:
    """The model-facing text of one mode family, read from this package: the family's folder
    (``text/``: text and constrained modes; ``native/``: native modes; ``proxy/``), laid over
    ``common/``, which holds what every family says alike. A file in the family's folder wins."""

    def __init__(self, family: str = "text"):
        if family not in FAMILIES:
            raise ValueError(f"unknown prompt family {family!r}; choose one of {', '.join(FAMILIES)}")
        self.family = family

    def __repr__(self) -> str:
        return f"Prompts({self.family!r})"

    def template(self, name: str) -> Template:
        name = name.removesuffix(".txt")
        for folder in (self.family, "common"):
            found = _read(f"{folder}/{name}.txt")
            if found is not None:
                return found
        raise FileNotFoundError(f"no prompt {name!r} in textagent/prompts/{self.family}/ or common/")

    def render(self, name: str, **fields: Any) -> str:
        return self.template(name).substitute(fields)


@cache
def for_family(family: str) -> Prompts:
    return Prompts(family)


def template(name: str) -> Template:
    """A text-family template (the proxy's and native mode's own: ``for_family(...)``)."""
    return for_family("text").template(name)


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


def example_args(tool: Any) -> dict[str, Any]:
    """Plausible arguments for the one-shot example: schema examples first, else typed placeholders."""
    return _schema.example_args(tool.parameters)


def _example_tool(tool_list: list[Any], name: str | None) -> Any:
    chosen = next((t for t in tool_list if t.name == name), None)
    # Prefer a tool that takes arguments: the example should show an ARGS object.
    return chosen or max(tool_list, key=lambda t: bool((t.parameters or {}).get("required")))


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


class Worked(NamedTuple):
    """One worked example as shown: the task, ``(tool, args, result)`` calls, the answer, and
    how many calls each reply writes (empty: one per reply)."""

    task: str
    calls: list[tuple[str, dict[str, Any], str]]
    answer: str
    replies: tuple[int, ...] = ()


def worked_examples(
    tools: Any,
    example: Any = None,
    style: str = DEFAULT_EXAMPLE_STYLE,
    question: str | None = None,
    tool: str = DEFAULT_EXAMPLE_TOOL,
) -> list[Worked]:
    """The worked examples: ``example`` is a tools.Example or a sequence of them; None builds
    placeholder exchanges from the tools of the set, in ``style`` (none for an empty set), around
    the set's first tools or, ``tool="closest"`` (EXAMPLE_TOOLS), those closest to ``question``."""
    example_tool(tool)
    tool_list = list(tools.values()) if hasattr(tools, "values") else list(tools)
    if example is None:
        return placeholder_examples(tool_list, style, question if tool == "closest" else None)
    examples = [example] if hasattr(example, "calls") else list(example)
    return [
        Worked(
            e.task,
            [(name, dict(args), result) for name, args, result in e.calls],
            e.answer,
            tuple(getattr(e, "replies", ())),
        )
        for e in examples
    ]


def placeholder_examples(
    tool_list: list[Any], style: str = DEFAULT_EXAMPLE_STYLE, question: str | None = None
) -> list[Worked]:
    """Worked examples for tools that come without any: one call, a question answered without
    tools, two calls of the same tool in one reply, and (when a second tool takes arguments) two
    tools called in one reply, built from the tools of the set. Each task
    names the values its calls use: a model that sees where a call's values come from takes them
    from its own question, not from the placeholder. ``style`` (EXAMPLE_STYLES) is how results
    and answers read. ``question``: the examples show the tools closest to it (by the words of
    their names and descriptions), not the first of the set."""
    example_style(style)
    if not tool_list:
        return []
    if question is not None:
        score = closeness([f"{t.name} {t.description}" for t in tool_list], question)
        tool_list = [t for _, t in sorted(zip(score, tool_list, strict=True), key=lambda st: -st[0])]
    chosen = _example_tool(tool_list, None)
    args = example_args(chosen)
    props = chosen.properties
    others = {k: _schema.other_value(v, props.get(k) or {}) for k, v in args.items()}
    fields = {"name": chosen.name, "values": _described(args), "others": _described(others)}
    value, value2 = template("example_values.txt").substitute().split()
    fields.update(value=value, value2=value2)
    results = _results(style, fields)
    fields.update(result=results[0], result2=results[1])
    answers = _ANSWERS[style]
    # The order matters to the 0.5B (BFCL dev, docs/bench.md): with the question answered without
    # tools first, it answered single-call questions ("the weather in Paris") in words; shown
    # last, it called a tool on most of BFCL's irrelevance items.
    return [
        Worked(
            template("example_task.txt").substitute(fields),
            [(chosen.name, args, results[0])],
            template(answers[0]).substitute(fields),
        ),
        Worked(
            template("example_direct_task.txt").substitute(), [], template("example_direct_answer.txt").substitute()
        ),
        Worked(
            template("example_pair_task.txt").substitute(fields),
            [(chosen.name, args, results[0]), (chosen.name, others, results[1])],
            template(answers[1]).substitute(fields),
            replies=(2,),
        ),
        *_two_tools(tool_list, chosen, args, results, fields, answers[2], style),
    ]


def _results(style: str, fields: dict[str, str]) -> tuple[str, str]:
    """The made-up results of the examples' first and second call, in ``style``."""
    if style == "concrete":
        return fields["value"], fields["value2"]
    if style == "value":
        shown = template("example_value_result.txt")
        return shown.substitute(value=fields["value"]), shown.substitute(value=fields["value2"])
    if style == "status":
        result = template("example_status_result.txt").substitute()
    else:
        result = template("example_result.txt").substitute(fields)
    return result, result


def _two_tools(
    tool_list: list[Any],
    chosen: Any,
    args: dict[str, Any],
    results: tuple[str, str],
    fields: dict[str, str],
    answer: str,
    style: str,
) -> list[Worked]:
    """Two different tools called in one reply (tuned on BFCL dev: questions asking for two
    functions got one call without it); none when no other tool takes arguments. ``fields``
    are the first tool's, as the other examples show it."""
    second = next((t for t in tool_list if t is not chosen and t.properties), None)
    if second is None:
        return []
    args2 = example_args(second)
    fields = {**fields, "name2": second.name, "values2": _described(args2)}
    result2 = template("example_result.txt").substitute(name=second.name) if style == "placeholder" else results[1]
    return [
        Worked(
            template("example_two_task.txt").substitute(fields),
            [(chosen.name, args, results[0]), (second.name, args2, result2)],
            template(answer).substitute(fields),
            replies=(2,),
        )
    ]


def _described(args: dict[str, Any]) -> str:
    values = [f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in args.items()]
    return listed(values) if values else "no arguments"


def example_turns(examples: Sequence[Worked]) -> list[dict[str, str]]:
    """The worked examples as conversation turns: each task, each TOOL line answered by its
    OBSERVATION (a result starting with "ERROR:" as a failed call), then the ANSWER."""
    turns: list[dict[str, str]] = []
    for worked in examples:
        turns.append({"role": "user", "content": task(worked.task)})
        for group in call_groups(worked):
            turns.append(
                {
                    "role": "assistant",
                    "content": "\n".join(render_call(ToolCall(name, dict(args))) for name, args, _ in group),
                }
            )
            turns.append(
                {
                    "role": "user",
                    "content": "\n".join(
                        observation(name, result, failed=result.startswith("ERROR:")) for name, _, result in group
                    ),
                }
            )
        turns.append({"role": "assistant", "content": "ANSWER: " + worked.answer})
    return turns


def call_groups(worked: Worked) -> list[list[tuple[str, dict[str, Any], str]]]:
    """The calls of a worked example, grouped into the replies that write them."""
    sizes = worked.replies or (1,) * len(worked.calls)
    groups, at = [], 0
    for size in sizes:
        groups.append(list(worked.calls[at : at + size]))
        at += size
    return groups


# Every further line of a multi-line tool result is quoted with this, so a result holding
# "TOOL: ..." or "ANSWER: ..." lines can never read as a line the model wrote.
QUOTE = "  | "


def quote_output(output: str) -> str:
    lines = output.splitlines() or [""]
    return "\n".join([lines[0], *(QUOTE + line for line in lines[1:])])


def observation(name: str, output: str, *, failed: bool = False) -> str:
    return template("observation_error.txt" if failed else "observation.txt").substitute(
        name=name, output=quote_output(output)
    )


def listed(words: list[str], last: str = "and") -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" {last} " + words[-1]


def feedback(text: str) -> str:
    return template("feedback.txt").substitute(feedback=text)


def task(text: str) -> str:
    return template("task.txt").substitute(task=text)


def parse_feedback(err: ParseError, tools: Any = None) -> str:
    """What the model reads about a reply that did not parse: what is wrong, where, how to fix
    it, and one correct call to copy. ``tools`` (else ``err.tools``, those the reply was read
    against) make that call use a real tool: the one the model tried, else the closest name."""
    text = for_family("text")
    specs = tool_specs(tools if tools is not None else err.tools)
    names = ", ".join(specs) if specs else ""
    expected = ", ".join(err.expected) if err.expected else ""
    values = {
        "message": err.message,
        "line": str(err.line),
        "column": str(err.column),
        "excerpt": "\n".join("    " + ln for ln in (err.excerpt or text.render("format_no_excerpt")).split("\n")),
        "hint": err.hint,
        "expected": text.render("format_expected", expected=expected) if expected else "",
        "example": example_call(specs, err.name),
        "tools": text.render("format_tools", tools=names) if names else "",
    }
    out = text.template("format_error").safe_substitute(values)
    return re.sub(r"\n{3,}", "\n\n", out).strip()


def cut_feedback(reply: str, err: ParseError) -> str | None:
    """What the model reads about a reply the length limit cut off where it stops parsing (on
    its last line: the cut, not a mistake of the model): that it was cut, and the line it
    repeats when it wrote one over and over. None when the error comes before the last line."""
    lines = reply.rstrip("\n").split("\n")
    if err.line < len(lines):
        return None
    text = for_family("text")
    counts = Counter(line.strip() for line in lines[:-1] if line.strip())
    repeated, count = counts.most_common(1)[0] if counts else ("", 0)
    repeats = text.render("reply_cut_repeats", repeated=repeated[:200], count=count) if count > 1 else ""
    return text.render("reply_cut", line=len(lines), repeats=repeats)


def example_call(specs: Mapping[str, Mapping[str, Any]], name: str | None) -> str:
    """A correct call to show (``specs``: tool name -> parameter schema): the tool the model
    tried, else the closest name, else one that takes arguments, with placeholder values for its
    required parameters."""
    if not specs:
        return render_call(ToolCall(name if name and NAME_RE.match(name) else "tool_name", {"key": "value"}))
    chosen = None
    if name in specs:
        chosen = name
    elif name:
        close = difflib.get_close_matches(name, list(specs), n=1, cutoff=0.5)
        chosen = close[0] if close else None
    if chosen is None:
        chosen = next((n for n, p in specs.items() if p.get("required")), next(iter(specs)))
    params = specs[chosen]
    props = params.get("properties") or {}
    required = params.get("required", list(props))
    args = {k: _schema.example_value(props.get(k) or {}) for k in required if k in props}
    if not NAME_RE.match(chosen):  # pragma: no cover - tool layers validate names
        return f"TOOL: {chosen} ARGS: {json.dumps(args, ensure_ascii=False)}"
    return render_call(ToolCall(chosen, args))
