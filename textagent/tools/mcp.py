"""Tools from MCP (Model Context Protocol) servers, for models that write the text protocol.

    from textagent.tools.mcp import mcp_tools

    with mcp_tools("python -m mcp_server_time") as tools:       # a command, an argv list or a URL
        Agent(backend, tools + demo_tools()).run("What time is it in Tokyo?")

Each tool the server lists becomes a textagent ``Tool``: its name (made writable in the text
protocol when MCP's wider alphabet is used), its description, and its ``inputSchema`` as the JSON
schema, validated like every tool's arguments before anything is sent. A call goes to the server
(stdio: the command runs as a child process; ``http(s)://...``: Streamable HTTP) and its result
becomes the observation: the text content, the structured content when it adds something, a
short note for images, audio and resources.

What the model sees instead of a traceback: an ``isError`` result, a server that crashed, a call
that outlives the tool timeout (the request is cancelled on the server, not left running) all
become ``ERROR: ...`` observations through the ordinary tool path. Leaving the ``with`` block stops
the server and its children. The official ``mcp`` SDK is async: it runs on an event loop in a
thread of its own, so the ToolSet works from plain synchronous code and from several threads at
once (calls are not serialised). Needs the ``mcp`` extra (``pip install 'textagent[mcp]'``).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shlex
import threading
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from ..errors import TextagentError
from ..protocol.types import is_tool_name
from .execution import remaining_time
from .tool import Tool, lists_names
from .toolset import ToolSet

__all__ = ["MCPConnection", "MCPServerError", "MCPToolError", "mcp_tools", "render_result", "writable_name"]

log = logging.getLogger("textagent.tools.mcp")

DEFAULT_TIMEOUT = 30.0  # one call, when no tool timeout of the Agent applies
DEFAULT_STARTUP_TIMEOUT = 60.0  # start the server, initialize, list its tools
MAX_TOOL_PAGES = 100  # pages of tools/list one server may send
_STARTING = threading.Lock()


class MCPServerError(TextagentError):
    """An MCP server could not be started, reached or listed (the message says which and why)."""


class MCPToolError(TextagentError):
    """A call the server answered with an error, or could not answer. Raised inside a tool, it
    becomes the model's ``ERROR: MCPToolError: ...`` observation."""


# --------------------------------------------------------------------------------------------
# Names and results
# --------------------------------------------------------------------------------------------


def writable_name(name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A name the text protocol can write for an MCP tool name (``[A-Za-z_][A-Za-z0-9_.-]*``,
    at most 128 characters), distinct from ``taken``. Accents are dropped (``météo`` -> ``meteo``),
    other characters become ``_``; a name with nothing writable left becomes ``tool``."""
    if is_tool_name(name) and name not in taken:
        return name
    ascii_form = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", ascii_form).strip("_.-")
    base = re.sub(r"_{2,}", "_", base)
    if not base or not re.match(r"[A-Za-z_]", base):
        base = f"tool_{base}" if base else "tool"
    base = base[:120]
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def _content_text(item: Any) -> str:
    kind = getattr(item, "type", "")
    if kind == "text":
        return str(getattr(item, "text", ""))
    if kind in ("image", "audio"):
        data = getattr(item, "data", "") or ""
        return f"[{kind} {getattr(item, 'mime_type', '') or ''}, {len(data) * 3 // 4} bytes]"
    if kind == "resource_link":
        label = getattr(item, "name", "") or ""
        return f"[resource {getattr(item, 'uri', '')}{' ' + label if label else ''}]"
    if kind == "resource":
        resource = getattr(item, "resource", None)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return text
        return f"[resource {getattr(resource, 'uri', '')}, {getattr(resource, 'mime_type', '') or 'binary'}]"
    return f"[{kind or 'content'}]"


def render_result(result: Any) -> str:
    """What the model sees of a ``CallToolResult``: the text of its content items (a short note
    for images, audio and resources), then the structured content as JSON unless the text
    already says the same (servers often send both)."""
    texts = [_content_text(item) for item in getattr(result, "content", None) or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        joined = "\n".join(texts)
        try:
            same = json.loads(joined) == structured
        except ValueError:
            same = False
        if not same and isinstance(structured, dict) and list(structured) == ["result"]:
            # a non-object return value, wrapped by the server: the same as the text when it reads so
            value = structured["result"]
            with contextlib.suppress(ValueError):
                same = json.loads(joined) == value
            same = same or joined == str(value)
        if not same:
            texts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(texts)


# --------------------------------------------------------------------------------------------
# One server
# --------------------------------------------------------------------------------------------


def _argv(server: str | Sequence[str]) -> list[str]:
    try:
        argv = shlex.split(server) if isinstance(server, str) else [str(a) for a in server]
    except ValueError as exc:  # an unclosed quote; the command itself is not shown: it may hold a key
        raise MCPServerError(f"an MCP server's command line cannot be split like a shell's: {exc}") from None
    if not argv:
        raise MCPServerError('an MCP server needs a command (e.g. "python -m mcp_server_time") or a URL')
    return argv


def _is_url(server: Any) -> TypeGuard[str]:
    return isinstance(server, str) and server.strip().lower().startswith(("http://", "https://"))


class _Caller:
    """The function behind one MCP tool: keyword arguments in, observation text out."""

    def __init__(self, connection: MCPConnection, name: str):
        self.connection, self.name = connection, name

    def __call__(self, **arguments: Any) -> str:
        return self.connection.call(self.name, arguments)


class MCPConnection:
    """A connection to one MCP server, on an event loop in a thread of its own.

    ``server``: a command line (split like a shell: ``"python server.py --flag"``), an argv list,
    or an ``http(s)://`` URL of a Streamable HTTP server. ``env`` adds variables to the few the
    SDK passes on (PATH, HOME, ...); ``cwd`` is the server's working directory. ``timeout``: one
    call's limit when no tool timeout applies (inside an Agent, its ``tool_timeout`` wins and the
    request is cancelled when it runs out). The server's stderr goes to ``log_path``.
    """

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        prefix: str | None = None,
        log_path: str | os.PathLike[str] | None = None,
    ):
        self.url = server.strip() if _is_url(server) else None
        self.argv = None if self.url else _argv(server)
        self.env, self.cwd = dict(env or {}), cwd
        self.name = name or _short_name(server)  # what messages call it: the module, script or host
        self.source = self.url or shlex.join(self.argv or [])
        self.timeout, self.startup_timeout, self.prefix = timeout, startup_timeout, prefix
        self.log_path = Path(log_path) if log_path else None
        self.skipped: dict[str, str] = {}  # MCP tool name -> why it is not offered
        self.names: dict[str, str] = {}  # writable name -> MCP tool name
        self._tools: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._closing: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._gone: str | None = None  # why calls can no longer be made
        self._errlog: Any = None
        self._groups: set[int] = set()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> MCPConnection:
        if self._thread is not None:
            return self
        try:
            import mcp  # noqa: F401 - only whether the SDK is installed
        except ImportError:
            raise MCPServerError("MCP tools need the official SDK: pip install 'textagent[mcp]'") from None
        if self.argv is not None:
            if self.log_path is None:
                from ..local import cache_dir

                slug = re.sub(r"[^\w.-]+", "_", self.name)[:40]
                self.log_path = cache_dir() / "logs" / f"mcp-{slug}-{os.getpid()}.log"
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._errlog = open(self.log_path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by close()
        with _STARTING:  # one start at a time, so the new process group is this server's
            before = _session_children()
            self._thread = threading.Thread(target=self._run, name=f"textagent-mcp-{self.name[:30]}", daemon=True)
            self._thread.start()
            atexit.register(self.close)
            ready = self._ready.wait(self.startup_timeout)
            self._groups = _session_children() - before  # the server's process group (the SDK gives it a session)
        if not ready:
            self.close()
            raise MCPServerError(
                f"MCP server {self.name!r} did not answer within {self.startup_timeout:g} s{self._log_hint()}"
            )
        if self._failure is not None or self._client is None:
            why = _describe(self._failure) if self._failure is not None else "it stopped before listing its tools"
            self.close()
            raise MCPServerError(f"MCP server {self.name!r} could not be started: {why}{self._log_hint()}")
        return self

    def close(self) -> None:
        """Stop the server (and its children) and the loop; safe to call twice."""
        loop, closing, thread, task = self._loop, self._closing, self._thread, self._task
        started = self._client is not None
        if loop is not None and closing is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                # a server still starting (no answer to `initialize`, tools still listing) is not
                # waiting for `closing`: its start is cancelled
                loop.call_soon_threadsafe(closing.set if started or task is None else task.cancel)
        if thread is not None and thread is not threading.current_thread():
            thread.join(15 if started else 5)
        # The SDK kills the server's process tree only when the server outlives its closed stdin;
        # a server that exits leaves its own children behind. They share its process group.
        groups, self._groups = self._groups, set()
        _stop_groups(groups)
        self._gone = self._gone or "the connection was closed"
        if self._errlog is not None:
            with contextlib.suppress(OSError):
                self._errlog.close()
            self._errlog = None
        atexit.unregister(self.close)

    def __enter__(self) -> MCPConnection:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _log_hint(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        with contextlib.suppress(OSError):
            if self._errlog is not None:
                self._errlog.flush()
            tail = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            if tail:
                return f"; its stderr ({self.log_path}) ends with:\n" + "\n".join(tail)
        return ""

    def _transport(self) -> Any:
        if self.url is not None:
            return self.url
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert self.argv is not None
        cwd = None if self.cwd is None else Path(self.cwd)
        params = StdioServerParameters(command=self.argv[0], args=self.argv[1:], env=self.env or None, cwd=cwd)
        return stdio_client(params, errlog=self._errlog)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start() or by the next call
            self._failure = self._failure or exc
        finally:
            self._gone = self._gone or f"the MCP server {self.name!r} stopped"
            self._ready.set()

    async def _main(self) -> None:
        from mcp import Client

        self._loop = asyncio.get_running_loop()
        self._closing = asyncio.Event()
        self._task = asyncio.current_task()
        try:
            async with Client(self._transport()) as client:
                tools: list[Any] = []
                cursor: str | None = None
                seen: set[str] = set()
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools += list(page.tools)
                    cursor = getattr(page, "next_cursor", None)
                    if not cursor:
                        break
                    # a server that repeats a cursor, or never stops paging, would be asked for ever
                    if cursor in seen:
                        raise MCPServerError(
                            f"it sent the page cursor {str(cursor)[:80]!r} twice while listing its tools"
                        )
                    if len(seen) + 1 >= MAX_TOOL_PAGES:
                        raise MCPServerError(f"it listed its tools over more than {MAX_TOOL_PAGES} pages")
                    seen.add(cursor)
                self._tools, self._client = tools, client
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:  # an ExceptionGroup from the SDK's task groups, too
            if self._client is None:
                self._failure = exc
            else:
                self._gone = f"the MCP server {self.name!r} stopped ({_describe(exc)})"
                log.warning("%s", self._gone)
        finally:
            self._client = None
            self._gone = self._gone or "the connection was closed"

    # -- tools and calls ------------------------------------------------------------------------
    def toolset(self) -> ToolSet:
        """The server's tools as a ToolSet (names made writable, ``prefix.`` in front if given)."""
        tools: list[Tool] = []
        taken: set[str] = set()
        for spec in self._tools:
            wanted = f"{self.prefix}.{spec.name}" if self.prefix else spec.name
            name = writable_name(wanted, taken)
            description = spec.description or getattr(spec, "title", None) or ""
            if name != wanted:
                description = f"{description} (MCP tool {spec.name!r})".strip()
            schema = dict(spec.input_schema or {"type": "object", "properties": {}})
            schema.pop("$schema", None)  # the dialect is JSON Schema either way; the check is 2020-12
            try:
                tool = Tool(name, description, schema, _Caller(self, spec.name), closed=lists_names(schema))
            except (TypeError, ValueError) as exc:
                self.skipped[spec.name] = str(exc)
                log.warning("MCP server %r: tool %r is not offered: %s", self.name, spec.name, exc)
                continue
            taken.add(name)
            self.names[name] = spec.name
            tools.append(tool)
        return ToolSet(tools)

    def call(self, name: str, arguments: Mapping[str, Any], *, timeout: float | None = None) -> str:
        """Call one tool; the observation text. Raises MCPToolError for an ``isError`` result,
        a server that is gone, and a request that did not finish in time (it is then cancelled)."""
        client, loop = self._client, self._loop
        if client is None or loop is None or self._gone:
            raise MCPToolError(f"{self._gone or 'the MCP server is not connected'}; `{name}` cannot be called")
        limit = timeout if timeout is not None else self.timeout
        left = remaining_time()
        if left is not None:
            limit = left if limit is None else min(limit, left)
        future = asyncio.run_coroutine_threadsafe(client.call_tool(name, dict(arguments)), loop)
        try:
            result = future.result(limit)
        except concurrent.futures.TimeoutError:
            # also a TimeoutError the SDK raised (one class from Python 3.11): then there was no limit
            within = f" within {round(limit, 2):g} s" if limit is not None else ""
            raise MCPToolError(f"`{name}` did not answer{within}; the request was cancelled") from None
        except concurrent.futures.CancelledError:
            raise MCPToolError(f"{self._gone or 'the connection was closed'}; `{name}` was not answered") from None
        except Exception as exc:  # the SDK's errors, a closed connection, a bad result
            if "connection closed" in str(exc).lower():
                self._gone = f"the MCP server {self.name!r} is gone (its connection closed)"
                raise MCPToolError(
                    f"{self._gone}; `{name}` was not answered and none of its tools can be called now"
                ) from exc
            raise MCPToolError(f"`{name}` failed on the MCP server: {_describe(exc)}") from exc
        finally:
            if not future.done():
                future.cancel()  # reaches the request: the SDK tells the server it was cancelled
        text = render_result(result)
        if getattr(result, "is_error", False):
            raise MCPToolError(text or f"`{name}` reported an error without a message")
        return text


def _session_children() -> set[int]:
    """Our child processes that lead a session of their own (Linux; empty elsewhere)."""
    found: set[int] = set()
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                ppid, pgid, sid = int(fields[1]), int(fields[2]), int(fields[3])
                if ppid == me and pgid == sid == int(entry.name):
                    found.add(pgid)
    return found


def _stop_groups(groups: set[int], grace: float = 2.0) -> None:
    """SIGTERM every process left in these process groups, SIGKILL what is still there after
    ``grace`` seconds. Never our own group."""
    import signal
    import time

    groups = {g for g in groups if g > 1 and g != os.getpgrp()}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = set()
        for group in groups:
            try:
                os.killpg(group, sig)
                alive.add(group)
            except (ProcessLookupError, PermissionError):
                pass
        if not alive or sig == signal.SIGKILL:
            return
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            for group in list(alive):
                try:
                    os.killpg(group, 0)
                except (ProcessLookupError, PermissionError):
                    alive.discard(group)
        groups = alive


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside the exception groups anyio raises."""
    # an exception group by its shape: BaseExceptionGroup is a builtin from Python 3.11 on only
    while isinstance(getattr(exc, "exceptions", None), (list, tuple)) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@contextlib.contextmanager
def mcp_tools(
    *servers: str | Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    prefix: bool | str = False,
) -> Iterator[ToolSet]:
    """A ToolSet of the tools of one or more MCP servers, connected for the ``with`` block.

    ``prefix``: False (default) keeps the servers' tool names, and two tools of one name are an
    error naming both servers; True puts each server's short name in front (``time.get_current_time``);
    a string is the prefix of a single server.
    """
    if not servers:
        raise MCPServerError("mcp_tools() needs at least one server: a command, an argv list or a URL")
    if isinstance(prefix, str) and len(servers) > 1:
        raise ValueError("a string prefix names one server; use prefix=True for several")
    with contextlib.ExitStack() as stack:
        sets: list[tuple[MCPConnection, ToolSet]] = []
        names: set[str] = set()
        for server in servers:
            name = writable_name(_short_name(server), names)  # two servers of one program: server, server_2
            names.add(name)
            conn = MCPConnection(
                server,
                env=env,
                cwd=cwd,
                name=name,
                timeout=timeout,
                startup_timeout=startup_timeout,
                prefix=(prefix if isinstance(prefix, str) else name if prefix else None),
            )
            stack.enter_context(conn)
            sets.append((conn, conn.toolset()))
        owner: dict[str, str] = {}
        for conn, tools in sets:
            for name in tools:
                if name in owner:
                    raise MCPServerError(
                        f"two MCP servers have a tool named {name!r}: {owner[name]!r} and "
                        f"{conn.name!r}; pass prefix=True (--mcp-prefix) to tell them apart"
                    )
                owner[name] = conn.name  # not its command line, which may hold a key
        yield ToolSet([tools for _, tools in sets])


# Programs that run another one named in their arguments: the server is named after that one.
_INTERPRETERS = frozenset({"python", "pypy", "node", "deno", "bun", "ruby", "perl", "php", "sh", "bash"})
_LAUNCHERS = _INTERPRETERS | {"npx", "bunx", "npm", "pnpm", "yarn", "uv", "uvx", "pipx", "poetry", "hatch", "env"}
_SUBCOMMANDS = frozenset({"run", "exec", "dlx", "x", "tool"})  # uv run, npm exec, pnpm dlx, deno run ...
_VALUE_OPTIONS = frozenset({"-X", "-W", "-p", "--with", "--from", "--python", "--package", "--directory", "--project"})


def _program(argv: Sequence[str]) -> str:
    """The name of the program a command line runs: ``-m``'s module, the script or package a
    launcher (python, node, npx, uvx, ...) is given, else the command's own name. Never an
    argument of that program (a key after ``--api-key`` would become the server's name)."""
    command = Path(argv[0]).name
    launcher = re.sub(r"[\d.]*(\.exe)?$", "", command.lower())  # python3.11 -> python
    if launcher not in _LAUNCHERS:
        return Path(command).stem
    words = iter(argv[1:])
    for word in words:
        if word == "-m":
            return next(words, launcher)
        if word in ("-c", "-e", "--eval"):  # code on the command line: no program of its own
            break
        if word in _VALUE_OPTIONS:
            next(words, None)
        elif not (word.startswith("-") or word in _SUBCOMMANDS or (launcher == "env" and "=" in word)):
            if launcher == "env":
                return _program([word, *words])
            return Path(re.sub(r"(?<=.)@[^/]*$", "", word)).stem  # an npm package's @version
    return launcher


def _short_name(server: str | Sequence[str]) -> str:
    """A prefix for a server: the program it runs (see _program) or the URL's host."""
    if _is_url(server):
        from urllib.parse import urlsplit

        host = urlsplit(str(server)).hostname or "mcp"
        return writable_name(host.split(".")[0])
    word = _program(_argv(server))
    word = re.sub(r"^mcp[_-]server[_-]|^server[_-]|[_-]mcp$|^mcp[_-]", "", word) or word
    return writable_name(word.replace(".", "_"))
