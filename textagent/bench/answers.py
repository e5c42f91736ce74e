"""What a final answer holds: a worked example's phrase, a claim that a tool ran when it did not,
the loop's own feedback; and whether an episode answered without the call it needed."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..protocol.claims import claimed_tools

if TYPE_CHECKING:
    from .records import Episode

__all__ = [
    "called_tools",
    "claimed_call",
    "copied_example",
    "feedback_sentences",
    "repeated_feedback",
    "skipped_call",
]


# The phrases of the placeholder worked examples (prompts/common/example_*.txt) that a model copies
# into its answers: "math_factorial returned: 120", "(what f returned)" or "(f returned)", "returned a
# result each"; their bracketed form made the model's own where a value belongs ("are: (list of movie
# titles)", "is (name of the python file)": described, never stated; no digit, at most 12 words);
# and the concrete style's made-up results, 42 and 17 ("The result is 42.", and "The result is 17."
# after a call whose result the model had not seen).
_COPIED = re.compile(
    r"\b[\w.]+ returned: |\((?:what )?[\w.]+ returned\)|returned a result (?:for )?each\b"
    r"|(?:\b(?:is|are|was|were)\b:?|:)\s*"
    r"\((?:what|the|name of|list of|number of|result|details|value|information|calculate)\b(?:[^()\d\s]*\s?){1,12}\)"
    r"|\b42 and 17\b|^\s*the result is (?:42|17)\.?\s*$"
    # the value style's made-up values, stated as reported ("f reported success with the value 42.")
    r"|\breported (?:success with the value )?(?:42|17)\b(?![.,]\d)"
    # the direct example's tail ("...; no tool is needed for that.") given as the whole answer
    r"|^\s*no tool is needed(?: for (?:that|this))?\.?\s*$",
    re.I,
)


def copied_example(answer: Any, called: Collection[str] | None = None) -> bool:
    """Whether a final answer holds a phrase of the worked examples, or their bracketed placeholder
    where a value belongs. ``called``: the names of the tools the episode (or turn) ran; a status
    answer counts unless the tool it names is among them (all of them count when None)."""
    if not isinstance(answer, str):
        return False
    if _COPIED.search(answer):
        return True
    claimed = set(claimed_tools(answer))
    return bool(claimed) and (called is None or not claimed <= set(called))


def claimed_call(answer: Any, called: Collection[str]) -> bool:
    """Whether a final answer says a tool ran ("f ran with x 1 and reported ...") that the episode
    (or turn) did not run: ``called``, the names of the tools it ran."""
    return isinstance(answer, str) and not set(claimed_tools(answer)) <= set(called)


# Feedback the model is sent when a reply or a call goes wrong (prompts/<family>/<name>.txt).
_FEEDBACK_TEMPLATES = (
    ("text", "observation_error"),
    ("text", "format_error"),
    ("text", "empty_reply"),
    ("text", "reply_cut"),
    ("native", "tool_error"),
    ("native", "bad_arguments"),
    ("native", "empty_reply"),
)


@functools.cache
def feedback_sentences() -> tuple[str, ...]:
    """The sentences of textagent's feedback to the model that stand whole in their templates
    (no placeholder in them, at least five words), lower-cased: what an answer repeats when the
    model parrots the feedback ("The call failed. Call the tool again ...") instead of answering."""
    from .. import prompts

    found: list[str] = []
    for family, name in _FEEDBACK_TEMPLATES:
        text = prompts.for_family(family).template(name).template
        for piece in re.split(r"\$\{?\w+\}?", text):
            for sentence in re.split(r"(?<=[.;:])\s+|\n", piece):
                sentence = " ".join(sentence.split()).strip(" ,.;:")
                if len(sentence.split()) >= 5 and sentence.lower() not in found:
                    found.append(sentence.lower())
    return tuple(found)


def repeated_feedback(answer: Any) -> bool:
    """Whether a final answer holds a whole sentence of textagent's feedback to the model."""
    if not isinstance(answer, str):
        return False
    text = " ".join(answer.split()).lower()
    return any(sentence in text for sentence in feedback_sentences())


def called_tools(episode: Episode) -> set[str]:
    """The names of the tools an episode ran (its ``calls``)."""
    return {c.name for c in episode.calls}


def skipped_call(episode: Episode) -> bool:
    """An episode that needed a call and made none, answering instead (BFCL items: a category with
    calls to make whose first reply had none; the suite: a task that needs tools, no call attempted)."""
    if episode.stop_reason in ("backend_error", "error"):
        return False
    if episode.bfcl is not None:
        return "irrelevance" not in str(episode.kind) and episode.bfcl.first.error_type == "no_call"
    return bool(episode.needs_tools) and not episode.attempted
