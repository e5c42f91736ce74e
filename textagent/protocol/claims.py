"""The tools an answer says ran: the worked examples' status form ("f ran with x 1 and reported
success.") written where f never ran is the model answering as if it had called f (an answer from
memory wearing a call's form). Read here, with every other reading of a reply; the loop
(``Retry(claims=True)``) and the bench's counts ask it."""

from __future__ import annotations

import re

__all__ = ["claimed_tools"]

# The status form in whatever words it says what f reported ("f ran with league "NBA"; it reported
# the record ..."), or with no word of a report when f looks like a function name
# ("maps.route_times ran with route ...; it returned the estimated time", "get_snow_report ran with
# location "Boston""): a name with a dot or an underscore, so that "The job ran for 2 hours." is
# no claim.
_STATUS = re.compile(r"\b([\w.-]+) ran (?:with|for)\b.*\breported\b", re.I | re.S)
_NAMED_RUN = re.compile(r"\b([\w.-]*[_.][\w.-]*) ran (?:with|for)\b", re.I)


def claimed_tools(answer: str) -> list[str]:
    """The names an answer says ran, in the status form, each once, in the order it names them."""
    found = [(m.start(), m.group(1)) for m in _NAMED_RUN.finditer(answer)]
    status = _STATUS.search(answer)
    if status is not None:
        found.append((status.start(), status.group(1)))
    return list(dict.fromkeys(name for _, name in sorted(found)))
