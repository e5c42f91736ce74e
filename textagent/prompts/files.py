"""The template files: every word the model reads, in a family's folder (``text/``, ``native/``,
``proxy/``) laid over ``common/``."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template
from typing import Any

__all__ = ["FAMILIES", "Prompts", "for_family", "template"]


FAMILIES = ("text", "native", "proxy")


@cache
def _read(path: str) -> Template | None:
    place = resources.files(__package__ or "textagent.prompts")
    for part in path.split("/"):
        place = place.joinpath(part)
    if not place.is_file():
        return None
    return Template(place.read_text(encoding="utf-8").rstrip("\n"))


class Prompts:
    """The model-facing text of one mode family, read from this package: the family's folder
    (``text/``: text and constrained modes; ``native/``: native modes; ``proxy/``), laid over
    ``common/``, which holds what every family says alike. A file in the family's folder wins."""

    def __init__(self, family: str = "text"):
        if family not in FAMILIES:
            raise ValueError(f"unknown prompt family {family!r}; choose one of {', '.join(FAMILIES)}")
        self.family = family

    def __repr__(self) -> str:
        return f"Prompts({self.family!r})"

    def template(self, name: str) -> Template:
        name = name.removesuffix(".txt")
        for folder in (self.family, "common"):
            found = _read(f"{folder}/{name}.txt")
            if found is not None:
                return found
        raise FileNotFoundError(f"no prompt {name!r} in textagent/prompts/{self.family}/ or common/")

    def render(self, name: str, **fields: Any) -> str:
        return self.template(name).substitute(fields)


@cache
def for_family(family: str) -> Prompts:
    return Prompts(family)


def template(name: str) -> Template:
    """A text-family template (the proxy's and native mode's own: ``for_family(...)``)."""
    return for_family("text").template(name)
