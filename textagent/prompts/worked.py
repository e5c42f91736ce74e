"""Worked examples: a tool set's own, or placeholder exchanges built from its tools in a style,
and their turns as the conversation shows them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import _schema
from ..examples import closeness
from ..protocol import ToolCall, render_call
from .files import template
from .messages import listed, observation, task

__all__ = [
    "DEFAULT_EXAMPLE_STYLE",
    "DEFAULT_EXAMPLE_TOOL",
    "EXAMPLE_STYLES",
    "EXAMPLE_TOOLS",
    "Worked",
    "call_groups",
    "example_args",
    "example_style",
    "example_tool",
    "example_turns",
    "placeholder_examples",
    "worked_examples",
]


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


def example_args(tool: Any) -> dict[str, Any]:
    """Plausible arguments for the one-shot example: schema examples first, else typed placeholders."""
    return _schema.example_args(tool.parameters)


def _example_tool(tool_list: list[Any], name: str | None) -> Any:
    chosen = next((t for t in tool_list if t.name == name), None)
    # Prefer a tool that takes arguments: the example should show an ARGS object.
    return chosen or max(tool_list, key=lambda t: bool((t.parameters or {}).get("required")))
