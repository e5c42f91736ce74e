"""BFCL items as bench tasks: ``textagent bench --tasks bfcl:simple_python,parallel``.

A task keeps BFCL's id (``--only simple_python_0`` works), its category as the task's kind,
the split of its position (even: dev, odd: test) and the item itself (``Task.bfcl``), which the
runner turns into tools and scores with the AST checker instead of the suite's checks.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..tasks import Task, TaskFileError
from .data import AST_CATEGORIES, BfclDataError, BfclItem, language_of, load_category
from .schema import language_hint

__all__ = ["PREFIX", "MAX_STEPS", "is_bfcl_spec", "bfcl_tasks", "item_documents", "item_question"]

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
    if isinstance(spec, str):
        spec = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
        categories = [c.strip() for c in spec.split(",") if c.strip()]
    else:
        categories = list(spec)
    if not categories:
        raise TaskFileError(f"bfcl: name at least one category: {', '.join(AST_CATEGORIES)}")
    tasks = []
    for category in dict.fromkeys(categories):
        try:
            items = load_category(category, progress=progress)
        except BfclDataError as exc:
            raise TaskFileError(str(exc)) from exc
        for item in items:
            tasks.append(Task(id=item.id, question=item_question(item), tools=tuple(f["name"] for f in item.functions),
                              checks=(), kind=category, max_steps=MAX_STEPS, split=item.split, bfcl=item))
    return tasks
