"""Tools: Python functions the model may call, their JSON schemas, and safe execution.

    @tool
    def get_forecast(city: str, days: int = 3) -> dict:
        '''Weather forecast for a city, e.g. {"city": "Lisbon", "days": 2}.

        Args:
            city: City name, e.g. "Lisbon".
            days: How many days ahead (1-7).
        '''

    tools = ToolSet([get_forecast, some_plain_function])
    outcome = tools.execute(call, timeout=30, limit=4000)   # never raises for model mistakes
    checked = tools.check(call)    # the same validation, the tool not run

A ``Tool`` carries a name, a description (what the model reads), a JSON schema of its
arguments (``parameters``) and the function. Schemas come from type hints and the docstring
(``Tool.from_function``; dataclasses, TypedDicts, Enums, dates and pydantic models included,
and the JSON arguments are turned back into them before the call) or from an OpenAI function
definition (``Tool.from_openai``).
Arguments are validated with jsonschema (Draft 2020-12) before the function runs; every
problem the model can cause becomes a ``ToolOutcome`` with ``ok=False`` and an ``ERROR: ...``
text written for the model, never an exception in the caller.

Modules: ``docstring`` and ``schema`` (schemas from functions), ``binding`` (bare text and
JSON values -> arguments), ``validation`` (limits and messages), ``tool``, ``execution`` and
``toolset``; ``Example`` lives in ``textagent.examples``.
"""

from ..examples import Example
from .binding import bare_target, bare_value, bind_bare
from .docstring import parse_docstring
from .execution import ToolOutcome, render_result, truncate
from .schema import schema_for_type
from .tool import Tool, tool
from .toolset import ToolSet
from .validation import MAX_ARG_CHARS, MAX_ARG_DEPTH

__all__ = [
    "MAX_ARG_CHARS",
    "MAX_ARG_DEPTH",
    "Example",
    "Tool",
    "ToolOutcome",
    "ToolSet",
    "bare_target",
    "bare_value",
    "bind_bare",
    "parse_docstring",
    "render_result",
    "schema_for_type",
    "tool",
    "truncate",
]
