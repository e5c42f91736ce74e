"""Tools and call stand-ins shared by the tests in this folder."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from textagent.tools import tool


@dataclass(frozen=True)
class Call:
    """Stands in for protocol.ToolCall: the tool layer only reads .name and .args."""

    name: Any
    args: Any = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Tools used across tests
# --------------------------------------------------------------------------------------------


@tool
def get_forecast(city: str, days: int = 3, unit: Literal["c", "f"] = "c") -> dict:
    """Weather forecast for a city.

    Returns one entry per day.

    Args:
        city: City name, e.g. "Lisbon".
        days: How many days ahead,
            between 1 and 7.
        unit: Temperature unit.

    Returns:
        A dict.
    """
    return {"city": city, "days": days, "unit": unit}


class Thing:
    """Not a JSON type."""


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def everything(
    s: str,
    i: int,
    f: float,
    b: bool,
    lit: Literal["a", "b"],
    opt: int | None,
    union: int | None,
    many: list[str],
    table: dict[str, int],
    anything,
    color: Color = Color.RED,
    bare_list: list = None,  # noqa: RUF013 - the implicit Optional is what is tested
    pair: tuple[int, str] = (1, "x"),
    nums: tuple[float, ...] = (),
    note: Annotated[str, "a note"] = "",
    ex: Annotated[int, {"minimum": 0}] = 0,
    mixed: int | str = 0,
):
    return locals()


def _boom(x: int = 0) -> int:
    raise ValueError(f"bad value {x}")


@tool
async def fetch_price(item: str) -> dict:
    """Price of an item."""
    import asyncio

    await asyncio.sleep(0.01)
    return {"item": item, "price": 3}
