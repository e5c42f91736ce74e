"""Worked examples shown to the model before its task, and the choice of them per task."""

from __future__ import annotations

import collections
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Example", "closeness", "relevance", "select_examples"]


@dataclass(frozen=True)
class Example:
    """A worked exchange shown to the model before its task (one-shot prompting).

    ``calls`` are ``(tool name, args, result text)`` in order; each becomes a TOOL line and the
    OBSERVATION that answers it (a result starting with "ERROR:" is shown as a failed call).
    No calls: a question answered directly. Small models copy a concrete exchange far better
    than a rule, and copy its words too: give each example a task unlike the others and an
    answer that restates its own results.

    ``replies``: how many of the calls each reply writes, in order; calls that do not depend on
    each other (several items asked about at once) are shown in one reply, their results coming
    back together: ``replies=(2, 1)`` for two lookups and then a calculation with both. Empty
    (default): one call per reply, each waiting for the result of the one before.
    """

    task: str
    calls: tuple[tuple[str, dict[str, Any], str], ...]
    answer: str
    replies: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.replies and (sum(self.replies) != len(self.calls) or min(self.replies) < 1):
            raise ValueError(
                f"Example {self.task!r}: replies {self.replies} must be positive and add up to "
                f"its {len(self.calls)} calls"
            )


# words of a question that name no tool's job (relevance leaves them out)
_FUNCTION_WORDS = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "when",
        "where",
        "why",
        "how",
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "these",
        "those",
        "from",
        "into",
        "about",
        "are",
        "was",
        "were",
        "can",
        "could",
        "would",
        "should",
        "will",
        "you",
        "your",
        "me",
        "my",
        "our",
        "please",
        "tell",
        "give",
        "show",
        "get",
        "does",
        "did",
        "has",
        "have",
        "had",
        "its",
        "there",
        "their",
        "then",
        "than",
        "any",
        "some",
        "all",
        "not",
        "but",
        "also",
        "just",
    ]
)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def closeness(texts: list[str], question: str) -> list[float]:
    """How close each of ``texts`` is to ``question``, 0 to 1: a weighted Jaccard of their
    words, each word weighted by its rarity among ``texts`` ("what", "the" say little), so that a
    short text that is all about the question beats a long one that merely contains it."""
    words = [_words(t) for t in texts]
    wanted = _words(question)
    df = collections.Counter(w for ws in words for w in ws)
    weight = {w: 1 + math.log((1 + len(texts)) / (1 + df[w])) for w in set(df) | wanted}
    return [sum(weight[w] for w in ws & wanted) / (sum(weight[w] for w in ws | wanted) or 1) for ws in words]


def relevance(texts: list[str], question: str) -> list[float]:
    """How much of ``question`` each of ``texts`` speaks of, 0 to 1: the share of the question's
    words (weighted by rarity, as in :func:`closeness`) that the text holds. Unlike closeness, a
    long description is not marked down for its length. Words that say nothing of a tool (short
    ones, question words, articles) are left out of the question."""
    words = [_words(t) for t in texts]
    wanted = {w for w in _words(question) if len(w) > 2 and w not in _FUNCTION_WORDS}
    df = collections.Counter(w for ws in words for w in ws)
    weight = {w: 1 + math.log((1 + len(texts)) / (1 + df[w])) for w in set(df) | wanted}
    total = sum(weight[w] for w in wanted) or 1
    return [sum(weight[w] for w in ws & wanted) / total for ws in words]


def select_examples(pool: tuple[Example, ...], task: str, max_examples: int | None) -> tuple[Example, ...]:
    """The examples to show before ``task``: all of ``pool`` when ``max_examples`` is None, else
    the examples without calls and the ``max_examples`` tool examples closest to the task (see
    ToolSet)."""
    if max_examples is None:
        return pool
    score = closeness([e.task for e in pool], task)
    calling = [i for i, e in enumerate(pool) if e.calls]
    direct = [i for i, e in enumerate(pool) if not e.calls]
    ranked = sorted(calling, key=lambda i: -score[i])[:max_examples]  # stable: ties by order
    chosen = [pool[i] for i in reversed(ranked)]
    # The closest example goes last, where the model looks; when that is one answered
    # without tools ("What is the chemical symbol for gold?" is nearer "What is the
    # opposite of 'hot'?" than any lookup), the direct answers follow the tool examples.
    if direct and max(score[i] for i in direct) > max((score[i] for i in ranked), default=0):
        return (*chosen, *(pool[i] for i in sorted(direct, key=lambda i: score[i])))
    return (*(pool[i] for i in direct), *chosen)
