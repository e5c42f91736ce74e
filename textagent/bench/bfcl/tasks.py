"""BFCL items as bench tasks: ``textagent bench --tasks bfcl:simple_python,parallel``.

A task keeps BFCL's id (``--only simple_python_0`` works), its category as the task's kind,
the split of its position (even: dev, odd: test) and the item itself (``Task.bfcl``), which the
runner turns into tools and scores with the AST checker instead of the suite's checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..tasks import Task, TaskFileError
from .data import AST_CATEGORIES, BfclDataError, BfclItem, language_of, load_category
from .multi_turn import MAX_CALL_STEPS, MULTI_TURN_CATEGORIES, MultiTurnItem, load_multi_turn
from .schema import language_hint

__all__ = [
    "MAX_STEPS",
    "PREFIX",
    "bfcl_tasks",
    "is_bfcl_spec",
    "is_multi_turn",
    "item_documents",
    "item_question",
    "item_task",
]

PREFIX = "bfcl:"
#: Steps an agent gets on one BFCL item: the calls, maybe a correction, the answer.
MAX_STEPS = 4


def is_bfcl_spec(spec: str | None) -> bool:
    return bool(spec) and str(spec).startswith(PREFIX)


def item_documents(item: BfclItem) -> list[dict]:
    """The functions as every mode sees them: with BFCL's language notes."""
    return language_hint(item.functions, language_of(item.category))


def item_question(item: BfclItem) -> str:
    """The user turn; an item's own system turn (a few live items have one) comes first."""
    return "\n\n".join(t for t in (item.system_text, item.user_text) if t)


def bfcl_tasks(spec: str | Sequence[str], *, progress: Callable[[str], None] = lambda _: None) -> list[Task]:
    """Tasks of ``bfcl:CAT[,CAT...]`` (or a list of categories), in BFCL's order per category."""
    known = ", ".join(AST_CATEGORIES + MULTI_TURN_CATEGORIES)
    # ``bfcl:a,b`` and ``bfcl:a,bfcl:b`` name the same two categories
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    categories = [c.strip().removeprefix(PREFIX).strip() for c in names]
    categories = [c for c in categories if c]
    if not categories:
        raise TaskFileError(f"bfcl: name at least one category: {known}")
    unknown = [c for c in categories if c not in AST_CATEGORIES and c not in MULTI_TURN_CATEGORIES]
    if unknown:
        raise TaskFileError(f"unknown or unsupported BFCL category {unknown[0]!r}; the categories: {known}")
    tasks = []
    for category in dict.fromkeys(categories):
        if category in MULTI_TURN_CATEGORIES:
            tasks += _multi_turn_tasks(category, progress)
            continue
        try:
            items = load_category(category, progress=progress)
        except BfclDataError as exc:
            raise TaskFileError(str(exc)) from exc
        tasks += [item_task(item) for item in items]
    return tasks


def item_task(item: BfclItem) -> Task:
    """The bench's task of a single-turn item: its question, its functions as the tools, its
    category as the kind."""
    return Task(
        id=item.id,
        question=item_question(item),
        tools=tuple(f["name"] for f in item.functions),
        checks=(),
        kind=item.category,
        max_steps=MAX_STEPS,
        split=item.split,
        bfcl=item,
    )


def _multi_turn_tasks(category: str, progress: Callable[[str], None]) -> list[Task]:
    """A multi-turn category's items as tasks, ordered by tool set (items with the same system
    prompt one after another keep it in the server's cache), BFCL's order within a tool set.
    ``max_steps`` is per user turn."""
    try:
        items = load_multi_turn(category, progress=progress)
    except BfclDataError as exc:
        raise TaskFileError(str(exc)) from exc
    items = sorted(items, key=lambda i: (i.tool_set_key(), i.index))
    return [
        Task(
            id=i.id,
            question=i.turn_text(0),
            tools=tuple(f["name"] for f in i.functions),
            checks=(),
            kind=category,
            max_steps=MAX_CALL_STEPS + 1,
            split=i.split,
            bfcl=i,
        )
        for i in items
    ]


def is_multi_turn(task: Task) -> bool:
    return isinstance(task.bfcl, MultiTurnItem)
