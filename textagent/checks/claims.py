"""Claims: an answer that says a tool ran when it did not, or that is an example's wording.

Small models copy the worked examples' answers ("f returned: (what f returned).", "f ran with x 1
and reported success.") into answers of their own: after calls whose results they then do not
state, and instead of making the call at all (#41). Both are visible in the answer's words: a
listed tool named as having run (returned, reported) where no call to it ran for this question,
or the examples' wording that states no result (their bracketed blank where a value belongs,
"returned a result for each"). Opt-in, like every check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..prompts import listed
from ..steps import SentBack
from .base import RunView

__all__ = ["WORDING", "Claims", "unrun_claims", "wording"]

# The placeholder examples' blanks (prompts/common/example_*answer.txt) as models write them into
# answers: "(what f returned)", "(f returned)", and the form the models made their own where a value
# belongs, described and never stated ("are: (list of movie titles)", "is (name of the python
# file)": no digit, at most 12 words); and the several-call answers' "returned a result for each",
# which says the calls returned without saying what. bench.metrics counts the same as copies.
WORDING = (
    r"\((?:what )?[\w.]+ returned\)"
    r"|(?:\b(?:is|are|was|were)\b:?|:)\s*"
    r"\((?:what|the|name of|list of|number of|result|details|value|information|calculate)\b(?:[^()\d\s]*\s?){1,12}\)"
    r"|returned a result (?:for )?each\b"
)
_WORDING = re.compile(WORDING, re.I)

# a tool named, then within the same sentence a verb saying it ran: "f returned: …", "f ran with x
# 1 and reported success", "f and g returned a result each"
_RAN = r"(?:ran|returned|reported|returns|reports)"
# calls the tool set answered without running the tool: the model's call was wrong
_NOT_RUN = ("unknown_tool", "bad_arguments")


def unrun_claims(answer: str, tools: Iterable[str], ran: Iterable[str]) -> list[str]:
    """The names of ``tools`` that ``answer`` says ran (returned, reported something) although
    they are not among ``ran``, in the order the answer names them."""
    done = set(ran)
    found: list[tuple[int, str]] = []
    for name in tools:
        if name in done:
            continue
        claim = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])[^.!?\n]{{0,80}}?\b{_RAN}\b", answer, re.I)
        if claim:
            found.append((claim.start(), name))
    return [name for _, name in sorted(found)]


def wording(answer: str) -> list[str]:
    """The worked examples' wording ``answer`` holds that states no result, as written (of a blank
    where a value belongs, the brackets)."""
    found = (m.group(0) for m in _WORDING.finditer(answer))
    return [phrase[phrase.index("(") :] if "(" in phrase else phrase for phrase in found]


class Claims:
    """Send back, once per question, a final answer that says a listed tool ran (returned,
    reported) when no call to it ran for this question, or that holds the worked examples'
    wording that states no result. A call its tool refused (unknown tool, arguments outside the
    schema) did not run; one that raised or timed out did. The text names the tools, or quotes
    the wording; each mode words it with its own prompts (``claimed_unrun``, ``copied_wording``)."""

    name = "claims"

    def on_answer(self, run: RunView, answer: str) -> SentBack | None:
        if run.sent_back_by(self.name):
            return None
        ran = [o.name for s in run.steps for o in s.outcomes if o.error not in _NOT_RUN]
        claimed = unrun_claims(answer, run.tools, ran)
        if claimed:
            one = len(claimed) == 1
            text = run.prompts.render(
                "claimed_unrun",
                names=listed([f"`{n}`" for n in claimed]),
                has="has" if one else "have",
                it="it" if one else "them",
            )
            return SentBack(self.name, text, tuple(claimed))
        found = wording(answer)
        if found:
            return SentBack(self.name, run.prompts.render("copied_wording", wording=found[0]), tuple(found))
        return None
