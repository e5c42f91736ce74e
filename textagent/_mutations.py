"""The inputs of the fuzz campaign's mutation phase (``textagent.fuzz``): a corpus of real model
replies, random edits of them that splice in protocol fragments, and delta debugging that shrinks a
failing input to its culprit."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["DEFAULT_CORPUS", "load_corpus", "minimize", "mutate"]

#: Real model replies (Qwen 0.5B, SmolLM2), one per file: package data, so an installed
#: textagent fuzzes with them too.
DEFAULT_CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"

# Fragments that matter to the protocol; mutations splice them in.
_FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "\\",
    ":",
    ",",
    "=",
    "(",
    ")",
    "\n",
    "\r\n",
    "\x00",
    "\ud800",
    "TOOL:",
    "tool:",
    "ARGS:",
    "ANSWER:",
    "FINAL ANSWER:",
    "OBSERVATION:",
    "```",
    "```json\n",
    "**TOOL:**",
    "- ",
    "> ",
    "1. ",
    "`",
    "THOUGHT:",
    "True",
    "None",
    "\t",
    "\u2028",
    "\ufeff",
]


def minimize(text: str, failing: Callable[[str], bool], *, budget: float = 10.0) -> str:
    """Delta debugging, lines then characters, within ``budget`` seconds."""
    deadline = time.monotonic() + budget
    for split in (lambda t: t.splitlines(keepends=True), list):
        parts = split(text)
        chunk = max(1, len(parts) // 2)
        while chunk >= 1 and time.monotonic() < deadline:
            i, shrunk = 0, False
            while i < len(parts) and time.monotonic() < deadline:
                candidate = parts[:i] + parts[i + chunk :]
                if candidate and failing("".join(candidate)):
                    parts, shrunk = candidate, True
                else:
                    i += chunk
            if not shrunk:
                chunk //= 2
        text = "".join(parts)
    return text


def load_corpus(dirs: Iterable[Path | str] = (DEFAULT_CORPUS,)) -> list[str]:
    texts = []
    for d in dirs:
        path = Path(d)
        if path.is_dir():
            texts += [p.read_text(encoding="utf-8", errors="surrogateescape") for p in sorted(path.glob("*.txt"))]
    if not texts:  # a checkout without the corpus still gets a campaign
        texts = [
            'TOOL: calculate ARGS: {"expression": "17 * 24"}',
            "I will check.\nTOOL: get_weather ARGS: city=Paris",
            "ANSWER: 508",
            '```json\nTOOL: calculate(expression="1+1")\n```\nOBSERVATION: 2',
        ]
    return texts


def mutate(text: str, rng: random.Random, corpus: list[str]) -> str:
    """One to four random edits of ``text``."""
    for _ in range(rng.randint(1, 4)):
        n = len(text)
        op = rng.randrange(9)
        i, j = sorted((rng.randint(0, n), rng.randint(0, n)))
        if op == 0:
            text = text[:i] + rng.choice(_FRAGMENTS) + text[i:]
        elif op == 1:
            text = text[:i] + text[j:]
        elif op == 2:
            text = text[:j] + text[i:j] + text[j:]
        elif op == 3:  # blow a span up: quadratic behaviour shows on big inputs only
            text = text[:i] + text[i:j][:64] * rng.choice((10, 100, 1000)) + text[j:]
        elif op == 4:
            lines = text.splitlines(keepends=True)
            rng.shuffle(lines)
            text = "".join(lines)
        elif op == 5:
            other = rng.choice(corpus)
            text = text[:i] + other[rng.randint(0, len(other)) :]
        elif op == 6:
            text = text[:i] + text[i:j].swapcase() + text[j:]
        elif op == 7:
            text = text[:i] + chr(rng.choice((rng.randint(0, 0x7F), rng.randint(0x80, 0x10FFFF)))) + text[i:]
        else:
            text = text[:i]
    return text
