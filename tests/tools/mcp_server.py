"""An MCP server for the tests, written with the official SDK (run: python tests/tools/mcp_server.py).

Tools with ints, strings, enums and nested objects, one that raises, one that sleeps (and says
when it was cancelled), one that kills the server, one with a name the text protocol cannot write.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("textagent-test")
MARKS = os.environ.get("MCP_TEST_MARKS")  # a folder where cancelled calls leave a file


class Address(BaseModel):
    city: str
    zip: str | None = None


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def shout(text: str, times: int = 1) -> str:
    """Upper-case a text, repeated."""
    return " ".join([text.upper()] * times)


@server.tool()
def convert(value: float, unit: Literal["km", "mi"]) -> dict:
    """Convert a distance to the other unit."""
    return {
        "value": round(value * 0.621371 if unit == "km" else value / 0.621371, 3),
        "unit": "mi" if unit == "km" else "km",
    }


@server.tool()
def ship(name: str, address: Address) -> str:
    """Ship a parcel to an address."""
    return f"shipped to {name}, {address.city}{' ' + address.zip if address.zip else ''}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(f"refused: {message}")


@server.tool()
def crash_plain() -> str:
    """Raises an ordinary exception."""
    raise RuntimeError("plain failure")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if MARKS:
            with open(os.path.join(MARKS, "cancelled"), "w") as f:
                f.write(str(seconds))
        raise
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """Ends the server process at once."""
    os._exit(3)


@server.tool(name="météo")
def meteo(city: str) -> str:
    """Weather with an accented name."""
    return f"{city}: sunny"


if __name__ == "__main__":
    print("test server starting", file=sys.stderr, flush=True)
    server.run("stdio")
