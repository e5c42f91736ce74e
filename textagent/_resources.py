"""The data files textagent ships, read the same way from a source checkout and from a wheel.

``grammars/`` sits at the top of the source tree (it is not Python and other tools read it);
the wheel carries it as ``textagent/grammars`` (pyproject's force-include). Everything else is
inside the package in both layouts.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

_CHECKOUT_GRAMMARS = Path(__file__).resolve().parent.parent / "grammars"


def data_text(*parts: str) -> str:
    """The text of the package file ``textagent/<parts...>``."""
    place = resources.files(__package__)
    for part in parts:
        place = place / part
    return place.read_text(encoding="utf-8")


@cache
def grammar_text(name: str) -> str:
    """The text of ``grammars/<name>``: the installed package's copy, else the source checkout's."""
    place = resources.files(__package__) / "grammars" / name
    if place.is_file():
        return place.read_text(encoding="utf-8")
    checkout = _CHECKOUT_GRAMMARS / name
    if checkout.is_file():
        return checkout.read_text(encoding="utf-8")
    raise FileNotFoundError(f"no grammar {name!r} in textagent/grammars/ nor in {_CHECKOUT_GRAMMARS}")
