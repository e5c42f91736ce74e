"""ItemsCheck: an answer that speaks of listed items no call covered is sent back once.

"What time is it in Paris and in Tokyo?" answered after one call for Paris: the model made the
first call and answered for the rest. English only: lists are read by their joins (``and``,
``or``, ``than``, ``vs``, commas) and lead words (``in the``, ``for``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..prompts import listed
from ..steps import Note, SentBack, Step
from .base import RunView

__all__ = ["ItemsCheck", "Unlooked", "unlooked_items"]


class ItemsCheck:
    """Send back, once per run, a final answer that speaks of an item the task lists beside one
    the run called a tool for ("in Paris and in Tokyo" after get_time for Paris), which no call
    and no tool result covers, naming the calls to make. Once they are made, the last result is
    followed by a note that every item now has its result (a small model answers about its
    latest result only). English only (see the module)."""

    name = "items"

    def on_answer(self, run: RunView, answer: str) -> SentBack | None:
        outcomes = [o for s in run.steps for o in s.outcomes]
        if not outcomes or run.sent_back_by(self.name):
            return None
        calls = [(o.name, o.args) for o in outcomes if isinstance(o.args, Mapping)]
        unlooked = unlooked_items(run.task, answer, calls, [o.output for o in outcomes])
        if not unlooked:
            return None
        text = run.prompts.render(
            "unlooked_answer", items=listed([u.item for u in unlooked]), them="it" if len(unlooked) == 1 else "them",
            calls=listed([f"{u.tool} with {json.dumps(dict(u.args), ensure_ascii=False)}" for u in unlooked]))
        return SentBack(self.name, text, tuple(unlooked))

    def on_step(self, run: RunView, step: Step) -> Sequence[Note]:
        sent = run.sent_back_by(self.name)
        if not sent or not step.outcomes:
            return ()
        unlooked: tuple[Unlooked, ...] = sent[-1].sent_back.found   # type: ignore[union-attr]
        later = [s for s in run.steps if s.index > sent[-1].index and s is not step]
        before = [u for u in unlooked if not _called(u, later)]
        if not before or any(not _called(u, [step]) for u in before):
            return ()   # reminded already, or calls still missing
        return (Note(self.name, _all_called(unlooked, run)),)


def _called(item: Unlooked, steps: Sequence[Step]) -> bool:
    return any(o.ok and o.name == item.tool and isinstance(o.args, Mapping)
               and any(isinstance(v, str) and item.item.lower() in v.lower() for v in o.args.values())
               for s in steps for o in s.outcomes)


def _all_called(items: Sequence[Unlooked], run: RunView) -> str:
    """Every item of the list in the task's order: the one beside each item too."""
    names: list[str] = []
    for name in [name for u in items for name in (u.beside, u.item)]:
        if name.lower() not in (n.lower() for n in names):
            names.append(name)
    names.sort(key=lambda n: run.task.lower().find(n.lower()))
    # an item and the one beside it: always two names or more
    return run.prompts.render("items_called", all=listed(names), have="both have" if len(names) == 2 else "all have")



# What joins the items of a list in a question: "A, B and C", "A or B", "A than B", "A vs B".
_JOIN = re.compile(r"(\s*[,;&]\s*(?:(?:and|or)\s+)?|\s+(?:and|or|than|vs\.?|versus)\s+)", re.I)
_WORD = re.compile(r"[^\W\d_][\w'-]*")
# Words that lead into an item without being part of it ("in the hallway", "for Rome").
_LEAD = frozenset("the a an in at for of on to from about with is it its also".split())


@dataclass(frozen=True)
class Unlooked:
    """A listed item an answer spoke of without a call covering it, and the call to make for
    it: the neighbour's call with the item in the neighbour's place. ``beside`` is the item,
    as the task writes it, whose call was made ("Paris" beside "Tokyo")."""
    item: str
    tool: str
    args: Mapping[str, Any]
    beside: str


@dataclass(frozen=True)
class _Source:
    tool: str
    args: Mapping[str, Any]
    key: str
    prefix: str | None   # "Europe/" when the task names only the value's last path part

    def call_for(self, item: str) -> dict[str, Any]:
        value = item if self.prefix is None else self.prefix + item.replace(" ", "_")
        return {**self.args, self.key: value}


def unlooked_items(task: str, answer: str, calls: Sequence[tuple[str, Mapping[str, Any]]],
                   outputs: Iterable[str]) -> list[Unlooked]:
    """The items ``task`` lists beside a string argument of one of ``calls`` (``(tool name,
    arguments)`` pairs) that ``answer`` names although no call argument and no tool result
    mentions them, each once, in the task's order, with the call to make for each: for "in
    Paris and in Tokyo" after get_time("Europe/Paris"), ``Unlooked("Tokyo", "get_time",
    {"timezone": "Europe/Tokyo"})``.

    An item is the word run next to the join: a run of capitalised words beside a capitalised
    value ("New York"), the rest of a short segment beside a lower-case one ("the bathroom");
    lists are followed item by item ("the living room, the hallway and the bathroom")."""
    parts = _JOIN.split(task)
    segments = [[m.group() for m in _WORD.finditer(part)] for part in parts[::2]]
    # joins[k] joins segments k and k+1; True where it is a word ("and", "or", "than"):
    # a comma alone makes no list ("in Berlin, in Celsius"), one that a word closes does.
    worded = [bool(re.search(r"[^\W\d_]", join)) for join in parts[1::2]]
    if len(segments) < 2:
        return []
    values: dict[str, _Source] = {}   # lower-cased value, or its last path part -> its call
    for name, args in calls:
        for key, value in args.items():
            if not isinstance(value, str) or not value.strip():
                continue
            head, _, last = value.rpartition("/")
            forms = [(value, None)] + ([(last.replace("_", " "), head + "/")] if head and last.strip() else [])
            for form, prefix in forms:
                values.setdefault(" ".join(form.lower().split()), _Source(name, args, key, prefix))
    seen_text = " ".join([*(" ".join(str(v) for v in a.values()) for _, a in calls), *outputs]).lower()
    found: list[tuple[str, _Source, str]] = []
    for i, words in enumerate(segments):
        head = _stripped(words)
        for value, source in values.items():
            size = len(value.split())
            if words and _joined(words[-size:]) == value:
                _follow(segments, worded, i, +1, words[-size:], source, found)
            if head and _joined(head[:size]) == value:
                _follow(segments, worded, i, -1, head[:size], source, found)
    listed: list[Unlooked] = []
    for item, source, beside in found:
        key = item.lower()
        if key in values or any(key == u.item.lower() for u in listed):
            continue
        if _mentions(seen_text, key) or not _mentions(answer.lower(), key):
            continue
        listed.append(Unlooked(item, source.tool, source.call_for(item), beside))
    order = {s: n for n, s in enumerate(" ".join(w for seg in segments for w in seg).lower().split())}
    return sorted(listed, key=lambda u: order.get(u.item.lower().split()[0], 0))


def _joined(words: Sequence[str]) -> str:
    return " ".join(words).lower()


def _stripped(words: Sequence[str]) -> list[str]:
    start = 0
    while start < len(words) and words[start].lower() in _LEAD:
        start += 1
    return list(words[start:])


def _follow(segments: list[list[str]], worded: list[bool], index: int, direction: int,
            value_words: Sequence[str], source: _Source, found: list[tuple[str, _Source, str]]) -> None:
    """Collect the items listed after (+1) or before (-1) segment ``index``, whose edge holds
    the called value: the neighbouring segment's edge item, and on through the segments that
    are nothing but an item."""
    capital = value_words[0][:1].isupper()
    index += direction
    while 0 <= index < len(segments):
        join = min(index, index - direction)
        if not any(worded[join:]):   # "A, B and C": a word closes the list
            return
        words = _stripped(segments[index]) if direction > 0 else list(segments[index])
        if capital:
            run = _capital_run(words if direction > 0 else words[::-1])
            item = run if direction > 0 else run[::-1]
            whole = len(item) == len(words)
        else:   # a lower-case item: a short segment, after its lead words ("the hallway")
            leads = [n for n, w in enumerate(words) if w.lower() in _LEAD]
            item = words if direction > 0 or not leads else words[leads[-1] + 1:]
            whole = item is words
            if not 0 < len(item) <= 3 or any(w[:1].isupper() for w in item):
                return
        if not item:
            return
        found.append((" ".join(item), source, " ".join(value_words)))
        if not whole:
            return
        index += direction


def _capital_run(words: Sequence[str]) -> list[str]:
    run = []
    for word in words:
        if not word[:1].isupper():
            break
        run.append(word)
    return run


def _mentions(text: str, item: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(item) + r"(?![\w])", text) is not None
