"""The dev/test split: every kind in both halves, and no worked example paraphrasing a test question.

Prompts, examples and checks are tuned on the dev split only; the headline numbers are the test
split. A worked example whose question is close to a test question would teach the answer to
that question: this test measures the closeness (Jaccard overlap of the content words) of every
example shown with the shipped tools against every test question, and fails above THRESHOLD,
printing the closest pairs.
"""

from __future__ import annotations

import re
from collections import Counter

from textagent.bench.examples import EXAMPLES
from textagent.bench.tasks import load_tasks
from textagent.toolkits.demo import DEMO_EXAMPLES

THRESHOLD = 0.3
# Words that say nothing about what a question asks (English; the suite is English).
STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "so",
        "what",
        "whats",
        "which",
        "who",
        "whom",
        "how",
        "many",
        "much",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "i",
        "me",
        "my",
        "you",
        "your",
        "we",
        "our",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "there",
        "here",
        "please",
        "tell",
        "give",
        "get",
        "right",
        "now",
        "current",
        "currently",
        "use",
        "using",
        "tool",
        "s",
    ]
)


def content_words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - STOP


def overlap(a: str, b: str) -> float:
    x, y = content_words(a), content_words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def test_every_kind_is_in_both_splits_and_about_half_is_test():
    tasks = load_tasks()
    assert {t.split for t in tasks} == {"dev", "test"}
    by_split = {s: Counter(t.kind for t in tasks if t.split == s) for s in ("dev", "test")}
    assert set(by_split["dev"]) == set(by_split["test"]) == {t.kind for t in tasks}
    assert 0.4 <= sum(by_split["test"].values()) / len(tasks) <= 0.6


def test_no_worked_example_is_close_to_a_test_question():
    tests = [t for t in load_tasks() if t.split == "test"]
    pairs = sorted(
        ((overlap(e.task, t.question), e.task, t.id, t.question) for e in (*DEMO_EXAMPLES, *EXAMPLES) for t in tests),
        reverse=True,
    )
    close = [p for p in pairs if p[0] >= THRESHOLD]
    report = "\n".join(f"{score:.2f}  {example!r} ~ {tid}: {question!r}" for score, example, tid, question in pairs[:8])
    assert not close, f"worked examples too close to test questions (>= {THRESHOLD}); closest pairs:\n{report}"


def test_the_measure_catches_a_paraphrase():
    assert overlap("Is 221 a prime number?", "Is 97 a prime number?") >= THRESHOLD
    assert (
        overlap(
            "How many warnings did the search service log today?", "How many errors did the payments service log today?"
        )
        >= THRESHOLD
    )
    assert overlap("What is the opposite of 'hot'?", "What is the capital of France?") < THRESHOLD


def test_bfcl_items_alternate_dev_and_test():
    from textagent.bench.bfcl.data import split_of

    assert [split_of(i) for i in range(4)] == ["dev", "test", "dev", "test"]
