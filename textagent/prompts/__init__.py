"""Model-facing text. Every word the model reads comes from a template file in this folder:
``files.py`` reads them, ``listing.py`` lists the tools, ``worked.py`` builds the worked examples,
``messages.py`` words the task, observations and feedback."""

from __future__ import annotations

from .files import FAMILIES, Prompts, for_family, template
from .listing import describe_tool, system_prompt, tool_listing
from .messages import cut_feedback, example_call, feedback, listed, observation, parse_feedback, quote_output, task
from .worked import (
    DEFAULT_EXAMPLE_STYLE,
    DEFAULT_EXAMPLE_TOOL,
    EXAMPLE_STYLES,
    EXAMPLE_TOOLS,
    Worked,
    call_groups,
    example_args,
    example_style,
    example_tool,
    example_turns,
    placeholder_examples,
    worked_examples,
)

__all__ = [
    "DEFAULT_EXAMPLE_STYLE",
    "DEFAULT_EXAMPLE_TOOL",
    "EXAMPLE_STYLES",
    "EXAMPLE_TOOLS",
    "FAMILIES",
    "Prompts",
    "Worked",
    "call_groups",
    "cut_feedback",
    "describe_tool",
    "example_args",
    "example_call",
    "example_style",
    "example_tool",
    "example_turns",
    "feedback",
    "for_family",
    "listed",
    "observation",
    "parse_feedback",
    "placeholder_examples",
    "quote_output",
    "system_prompt",
    "task",
    "template",
    "tool_listing",
    "worked_examples",
]
