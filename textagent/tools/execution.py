"""Running calls safely: every problem the model or the tool can cause becomes a
``ToolOutcome`` with ``ok=False`` and an ``ERROR: ...`` text for the model, never an exception
in the caller. ``check`` looks the tool up and binds the arguments (one code path, which
``execute`` runs first); calls run in reused worker threads, abandoned when they time out; an
``async def`` tool is awaited."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import itertools
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import ToolArgumentError
from ._text import say, show
from .validation import suggest

if TYPE_CHECKING:
    from .tool import Tool

log = logging.getLogger("textagent.tools")  # the package's name: what users filter on

# When the running call will be abandoned (time.monotonic()), for tools that wait on something
# they can cancel themselves (a request to another process): see remaining_time().
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("textagent_tool_deadline", default=None)


def remaining_time() -> float | None:
    """Seconds left before the tool call running in this context is abandoned by its timeout,
    or None when it has no timeout (or no call is running). A tool that waits on another process
    uses it to cancel that work itself instead of leaving it running after the agent moved on."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def render_result(value: Any) -> str:
    """What the model sees of a result: str as is, anything else as JSON (default=str)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def truncate(text: str, limit: int | None) -> str:
    """Cut text to at most ``limit`` characters, ending with a visible ``[truncated N chars]``."""
    if limit is None or len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the marker's length depends on N; settle it
        marker = "\n" + say("truncated", count=len(text) - keep)
        keep = max(0, limit - len(marker))
    return text[:keep] + "\n" + say("truncated", count=len(text) - keep)


def cap_outputs(outcomes: list[ToolOutcome], limit: int | None) -> list[ToolOutcome]:
    """The outcomes with their outputs cut to ``limit`` characters together: each keeps what the
    ones before it left (with the ``[truncated N chars]`` marker)."""
    if limit is None or sum(len(o.output) for o in outcomes) <= limit:
        return outcomes
    capped = []
    for outcome in outcomes:
        output = truncate(outcome.output, max(limit, 0))
        capped.append(outcome if output == outcome.output else replace(outcome, output=output))
        limit -= len(output)
    return capped


@dataclass(frozen=True)
class ToolOutcome:
    """One executed call. ``output`` is what the model sees; ``error`` is the failure kind or None:
    "unknown_tool" | "bad_arguments" | "tool_error" | "timeout". ``ignored``: argument names
    the call carried that are not parameters of the tool and were left out (see ToolSet)."""

    name: str
    args: dict[str, Any] | str
    ok: bool
    output: str
    error: str | None = None
    seconds: float = 0.0
    ignored: tuple[str, ...] = ()


def _exc_text(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    name = type(exc).__name__
    return say("tool_exception", kind=name, message=message) if message else say("tool_exception_bare", kind=name)


class _Worker:
    """A daemon thread that runs tool calls one at a time and returns itself to the idle pool
    after each one. Reusing threads keeps a call's overhead in the tens of microseconds; a
    worker whose call timed out is simply not waited for (Python cannot kill a thread) and
    rejoins the pool if the call ever ends."""

    _idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="textagent-tool", daemon=True).start()

    @classmethod
    def get(cls) -> _Worker:
        try:
            return cls._idle.get_nowait()
        except queue.Empty:
            return cls()

    def _loop(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box[0] = fn()
            except BaseException as exc:  # reported to the model, never re-raised here
                box[1] = exc
            del fn
            done.set()
            self._idle.put(self)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


MAX_GENERATED_ITEMS = 1000  # items taken from a tool that yields its results


def _settle(result: Any) -> Any:
    """The value of a tool's result: an ``async def`` tool's coroutine (any awaitable) is run to
    its end on an event loop of its own. When a loop is already running in this thread (the
    agent was called from async code), that loop is blocked by this very call, so the
    awaitable runs in a helper thread with its own loop. A generator's items are taken (inside
    the call's timeout, at most MAX_GENERATED_ITEMS) and shown as a list."""
    if inspect.isgenerator(result):
        items = list(itertools.islice(result, MAX_GENERATED_ITEMS + 1))
        result.close()
        if len(items) > MAX_GENERATED_ITEMS:
            return [*items[:MAX_GENERATED_ITEMS], say("generator_cut", count=MAX_GENERATED_ITEMS)]
        return items
    if inspect.isasyncgen(result):
        raise TypeError("the tool returned an async generator; return its items (a list) instead")
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(result))
    box: list[Any] = [None, None]
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            box[0] = ctx.run(asyncio.run, _awaited(result))
        except BaseException as exc:  # re-raised in the calling thread
            box[1] = exc

    thread = threading.Thread(target=run, name="textagent-async-tool", daemon=True)
    thread.start()
    thread.join()
    if box[1] is not None:
        raise box[1]
    return box[0]


def _run_with_timeout(fn: Callable[[], Any], timeout: float | None) -> tuple[Any, BaseException | None, bool]:
    """(result, exception, timed_out). With a timeout the call runs in a daemon worker thread
    that is abandoned (not killed: Python cannot) when it does not finish in time."""
    if timeout is None:
        try:
            return fn(), None, False
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a tool must never end the run (as in a worker)
            return None, exc, False
    box: list[Any] = [None, None]
    done = threading.Event()
    ctx = contextvars.copy_context()
    ctx.run(_DEADLINE.set, time.monotonic() + timeout)
    _Worker.get().jobs.put((lambda: ctx.run(fn), box, done))
    if not done.wait(timeout):
        return None, None, True
    return box[0], box[1], False


def closest(name: Any, names: Mapping[str, Any]) -> str | None:
    """The name in ``names`` closest to ``name`` (case-insensitive, difflib), or None."""
    return suggest(name, names) if isinstance(name, str) else None


def _taking(args: Any, tools: Mapping[str, Tool]) -> str | None:
    """The one tool of ``tools`` whose schema lists every argument name of ``args`` (a call of
    an unknown tool with the right arguments: named after one of them, or made up), or None when
    no tool or several do. Only the names a schema lists count, so an open schema, which would
    take any name, is never the one."""
    if not isinstance(args, Mapping) or not args:
        return None
    given = set(args)
    fits = [name for name, tool in tools.items() if given <= tool.properties.keys()]
    return fits[0] if len(fits) == 1 else None


def _unknown_hints(name: Any, args: Any, tools: Mapping[str, Tool]) -> str:
    """What the unknown-tool error adds: the listed name closest to the one written, and the
    listed tool that takes the arguments given when that is another."""
    hint, fit = closest(name, tools), _taking(args, tools)
    said = say("tool_suggestion", name=hint) if hint else ""
    if fit is not None and fit != hint:
        said += say("tool_taking", name=fit)
    return said


def _known_part(tool: Tool, args: Any, extra_args: str) -> dict[str, Any] | None:
    """``args`` without the names ``tool`` does not take, when extra_args="ignore" and
    there are such names; else None."""
    if extra_args != "ignore" or tool.closed or not isinstance(args, Mapping):
        return None  # a closed schema's names are the only ones: another is refused, not dropped
    extra = set(tool.unexpected(args))
    return {k: v for k, v in args.items() if k not in extra} if extra else None


def _name_of(raw_name: Any) -> str:
    """The name an outcome shows: the call's own when it is a sane string, else a short repr."""
    return (
        raw_name
        if isinstance(raw_name, str) and len(raw_name) <= 128 and raw_name.isprintable()
        else show(raw_name, 60)
    )


def _checked(
    tools: Mapping[str, Tool], call: Any, *, limit: int | None, extra_args: str
) -> tuple[ToolOutcome, Tool | None, Any]:
    """The one code path that looks a call's tool up and binds its arguments (the
    extra_args="ignore" retry and every bad-arguments message included). Returns the outcome
    (``ok`` with no output when the call may run), the tool and the bound arguments."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of characters or None, got {limit!r}")
    started = time.perf_counter()
    raw_name = getattr(call, "name", None)
    raw_args: Any = getattr(call, "args", None)  # whatever the call carries: a malformed call's is kept as is
    name = _name_of(raw_name)

    def failed(output: str, error: str) -> tuple[ToolOutcome, Tool | None, Any]:
        return (
            ToolOutcome(name, raw_args, False, truncate(output, limit), error, time.perf_counter() - started),
            found,
            None,
        )

    found = tools.get(raw_name) if isinstance(raw_name, str) else None
    if found is None:
        return failed(
            say(
                "tool_unknown",
                name=show(raw_name, 60),
                tools=", ".join(tools) or say("none_valid"),
                suggestion=_unknown_hints(raw_name, raw_args, tools),
            ),
            "unknown_tool",
        )
    ignored: tuple[str, ...] = ()
    try:
        try:
            bound = found.bind(raw_args)
        except ToolArgumentError as first:
            known = _known_part(found, raw_args, extra_args)
            if known is None:
                raise
            try:
                bound = found.bind(known)
            except ToolArgumentError:
                raise first from None  # the rest is not valid either: report everything
            ignored = tuple(k for k in raw_args if k not in known)
    except ToolArgumentError as exc:
        return failed(
            say("tool_bad_arguments", error=_exc_text(exc).rstrip("."), usage=found.signature()), "bad_arguments"
        )
    except RecursionError:
        return failed(say("tool_args_too_deep", usage=found.signature()), "bad_arguments")
    except Exception as exc:  # odd args must not crash the caller
        return failed(
            say("tool_args_unreadable", kind=type(exc).__name__, message=show(str(exc), 200), usage=found.signature()),
            "bad_arguments",
        )
    return ToolOutcome(name, bound, True, "", None, time.perf_counter() - started, ignored), found, bound


def check(tools: Mapping[str, Tool], call: Any, *, limit: int | None = None, extra_args: str = "ignore") -> ToolOutcome:
    """Validate one call without running it; see ToolSet.check."""
    return _checked(tools, call, limit=limit, extra_args=extra_args)[0]


def execute(
    tools: Mapping[str, Tool], call: Any, *, timeout: float | None, limit: int | None, extra_args: str = "ignore"
) -> ToolOutcome:
    """Run one call (anything with ``.name`` and ``.args``) with one of ``tools``: check it, then
    run it; see ToolSet.execute."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
    started = time.perf_counter()
    checked, found, bound = _checked(tools, call, limit=limit, extra_args=extra_args)
    if not checked.ok or found is None:
        return checked
    ignored = checked.ignored

    def done(ok: bool, output: str, error: str | None) -> ToolOutcome:
        if ignored:
            names = ", ".join(f"`{show(k, 40)}`" for k in ignored)
            output += "\n" + say("tool_ignored_args", names=names, tool=found.name)
        return ToolOutcome(
            checked.name, bound, ok, truncate(output, limit), error, time.perf_counter() - started, ignored
        )

    result, exc, timed_out = _run_with_timeout(lambda: _settle(found(**bound)), timeout)
    if timed_out:
        log.info("tool %s did not finish within %g s and was abandoned", found.name, timeout)
        return done(False, say("tool_timeout", name=found.name, seconds=f"{timeout:g}"), "timeout")
    if exc is not None:
        log.debug("tool %s raised %s", found.name, type(exc).__name__, exc_info=exc)
        return done(False, _exc_text(exc), "tool_error")
    try:
        output = render_result(result)
    except Exception as err:  # any failure of the result's own __str__/__repr__, too
        return done(
            False,
            say("tool_result_unshowable", kind=type(err).__name__, name=found.name, message=show(str(err), 200)),
            "tool_error",
        )
    return done(True, output, None)
