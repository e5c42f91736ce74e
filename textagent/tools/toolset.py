"""``ToolSet``: the tools an agent may call, by name, with their worked examples."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

from ..examples import Example, select_examples
from .execution import ToolOutcome, check, closest, execute
from .tool import Tool


class ToolSet(Mapping[str, Tool]):
    """An immutable name -> Tool mapping that executes model calls safely.

    ``ToolSet([tool_a, plain_function, ...])`` or ``ToolSet({"name": fn_or_tool})``; plain
    callables are wrapped with Tool.from_function. Duplicate names are an error. A ToolSet in
    the list brings its tools and examples: ``toolset.with_tools(f)``, ``toolset + [f]`` and
    ``toolset.select("a", "b")`` make new sets that keep the examples that still apply. ``example``
    is the worked exchange the agent shows the model, or several in the order shown (else
    one is built from a tool of the set); ``examples`` holds them as a tuple.

    ``max_examples``: show at most this many examples that call tools, chosen per task: the
    ones whose questions share the most words with it (rare words count more), the closest
    last, where the model looks. Examples without calls are always shown: they teach when
    not to call. They come first, unless one of them is closer to the task than every tool
    example: then they come last. None (default) shows every example in the given order. A
    large pool then costs no prompt: the model sees the exchanges its question resembles, not
    a list of unrelated ones whose numbers it would copy.

    ``extra_args``: what execute() does with a call that names arguments the tool does not
    have, when the rest of the call is valid: "ignore" (default) runs it without them and says
    so in the output, as pydantic ignores unknown fields; "error" refuses the call. Small
    models add fields of the result they expect (`"confirmation": "..."` to a booking) and
    then repeat the refused call word for word.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any] | ToolSet] | Mapping[str, Any] | Tool | None = (),
        *,
        example: Example | Iterable[Example] | None = None,
        max_examples: int | None = None,
        extra_args: Literal["ignore", "error"] = "ignore",
    ) -> None:
        if extra_args not in ("ignore", "error"):
            raise ValueError(f'extra_args must be "ignore" or "error", not {extra_args!r}')
        if max_examples is not None and (
            isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 0
        ):
            raise ValueError(f"max_examples must be None or a whole number >= 0, not {max_examples!r}")
        self.extra_args, self.max_examples = extra_args, max_examples
        self._tools: dict[str, Tool] = {}
        examples = () if example is None else (example,) if isinstance(example, Example) else tuple(example)
        if not all(isinstance(e, Example) for e in examples):
            raise TypeError("example must be a tools.Example or a sequence of them")
        self.examples: tuple[Example, ...] = examples
        if tools is None:
            return
        for item in self._collect(tools):
            if item.name in self._tools:
                raise ValueError(f"two tools are named {item.name!r}; tool names must be unique")
            self._tools[item.name] = item
        unknown = sorted({name for e in self.examples for name, _, _ in e.calls if name not in self._tools})
        if unknown:
            raise ValueError(f"the example calls tools that are not in this set: {', '.join(unknown)}")

    def _collect(self, tools: Any) -> list[Tool]:
        """The Tools that ``tools`` holds; a ToolSet among them brings its examples along, and its
        ``max_examples`` when this set has none."""
        if isinstance(tools, (Tool, ToolSet)) or (callable(tools) and not isinstance(tools, (Mapping, Iterable))):
            tools = [tools]
        if isinstance(tools, Mapping):
            return [
                (value if value.name == key else value._renamed(key))
                if isinstance(value, Tool)
                else Tool.from_function(value, name=key)
                for key, value in tools.items()
            ]
        items: list[Tool] = []
        for item in tools:
            if isinstance(item, ToolSet):
                items.extend(item.values())
                self.examples += tuple(e for e in item.examples if e not in self.examples)
                if self.max_examples is None:
                    self.max_examples = item.max_examples
            elif isinstance(item, str):
                raise TypeError(
                    f"got the tool name {item!r}: pass the ToolSet itself or toolset.values() "
                    "(iterating a ToolSet gives its tool names), and add tools with "
                    "toolset.with_tools(f) or toolset + [f], which keep its examples"
                )
            else:
                items.append(item if isinstance(item, Tool) else Tool.from_function(item))
        return items

    def with_tools(self, *tools: Tool | Callable[..., Any] | ToolSet) -> ToolSet:
        """A new ToolSet: these tools (Tools, functions, or ToolSets, whose examples come too)
        added to this set's, with this set's examples, ``max_examples`` and ``extra_args``.
        ``toolset + [f, g]`` is the same."""
        return ToolSet([self, *tools], max_examples=self.max_examples, extra_args=self.extra_args)

    def select(self, *names: str) -> ToolSet:
        """A new ToolSet of the named tools only, in the order given, keeping the examples whose
        calls use only those tools (the ones answered without tools among them)."""
        missing = [n for n in names if n not in self._tools]
        if missing:
            raise KeyError(f"no tool named {missing[0]!r} in this set; it has {', '.join(self._tools)}")
        kept = tuple(e for e in self.examples if all(name in names for name, _, _ in e.calls))
        return ToolSet(
            [self._tools[n] for n in dict.fromkeys(names)],
            example=kept,
            max_examples=self.max_examples,
            extra_args=self.extra_args,
        )

    def __add__(self, other: Any) -> ToolSet:
        if isinstance(other, (Tool, ToolSet)) or (callable(other) and not isinstance(other, Iterable)):
            return self.with_tools(other)
        if isinstance(other, Mapping):
            return self.with_tools(ToolSet(other))
        if isinstance(other, Iterable) and not isinstance(other, str):
            return self.with_tools(*other)
        return NotImplemented

    def __radd__(self, other: Any) -> ToolSet:
        if isinstance(other, Iterable) and not isinstance(other, (str, Mapping)):  # [f] + toolset
            return ToolSet([*other, self], max_examples=self.max_examples, extra_args=self.extra_args)
        return NotImplemented

    @property
    def example(self) -> Example | None:
        """The first worked example, or None."""
        return self.examples[0] if self.examples else None

    def examples_for(self, task: str) -> tuple[Example, ...]:
        """The examples to show before ``task`` (see ``max_examples``)."""
        return select_examples(self.examples, task, self.max_examples)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolSet([{', '.join(self._tools)}])"

    def to_openai(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self._tools.values()]

    def closest(self, name: str) -> str | None:
        """The tool name closest to ``name`` (case-insensitive, difflib), or None."""
        return closest(name, self._tools)

    def check(self, call: Any, *, limit: int | None = 4000) -> ToolOutcome:
        """Validate one call (anything with ``.name`` and ``.args``) without running its tool:
        an unknown tool or bad arguments give the very outcome execute() would (``error``, the
        ``ERROR: ...`` output, cut to ``limit``); valid arguments ``ok=True`` with the bound
        ``args`` (and ``ignored``) and an empty output. No thread, no timeout: nothing runs."""
        return check(self._tools, call, limit=limit, extra_args=self.extra_args)

    def execute(self, call: Any, *, timeout: float | None = 30, limit: int | None = 4000) -> ToolOutcome:
        """Run one call (anything with ``.name`` and ``.args``): check() it, then run it. Never
        raises for model mistakes or tool failures: they become a ToolOutcome with ``ok=False``
        and an ``ERROR: ...`` output."""
        return execute(self._tools, call, timeout=timeout, limit=limit, extra_args=self.extra_args)
