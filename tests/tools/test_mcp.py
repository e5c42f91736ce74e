"""MCP tools against real servers: tests/tools/mcp_server.py (the official SDK's server class)
over stdio and Streamable HTTP, and the PyPI server mcp-server-time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from textagent import Agent
from textagent.backends.scripted import ScriptedBackend
from textagent.protocol import ToolCall
from textagent.tools.mcp import MCPConnection, MCPServerError, _short_name, mcp_tools, render_result, writable_name

SERVER = [sys.executable, str(Path(__file__).with_name("mcp_server.py"))]


@pytest.fixture(scope="module")
def tools():
    with mcp_tools(SERVER) as toolset:
        yield toolset


def run(tools, tool_name, timeout=10, **args):
    return tools.execute(ToolCall(tool_name, args), timeout=timeout)


def test_the_servers_tools_with_their_schemas(tools):
    assert {"add", "shout", "convert", "ship", "fail", "slow", "die", "meteo"} <= set(tools)
    assert tools["add"].required == ["a", "b"] and tools["add"].properties["a"]["type"] == "integer"
    assert tools["convert"].properties["unit"]["enum"] == ["km", "mi"]
    assert "Add two whole numbers" in tools["add"].description


def test_results_are_the_observation(tools):
    assert run(tools, "add", a=2, b=3).output == "5"  # {"result": 5} not repeated
    assert json.loads(run(tools, "convert", value=10, unit="km").output) == {"value": 6.214, "unit": "mi"}
    assert run(tools, "ship", name="Ann", address={"city": "Oslo", "zip": "0150"}).output == "shipped to Ann, Oslo 0150"
    assert run(tools, "shout", text="hi", times=2).output == "HI HI"


def test_bad_arguments_are_refused_before_anything_is_sent(tools):
    for name, args, words in [
        ("add", {"a": "x", "b": 1}, "'x' is not of type 'integer'"),
        ("convert", {"value": 1, "unit": "yards"}, "km"),
        ("ship", {"name": "Ann", "address": {"zip": "1"}}, "city"),
        ("add", {"a": 1}, "b"),
    ]:
        outcome = tools.execute(ToolCall(name, args))
        assert not outcome.ok and outcome.error == "bad_arguments" and words in outcome.output, outcome.output


def test_an_error_result_is_an_error_observation(tools):
    outcome = run(tools, "fail", message="no way")
    assert not outcome.ok and outcome.error == "tool_error"
    assert outcome.output.startswith("ERROR: MCPToolError:") and "refused: no way" in outcome.output


def test_a_call_past_the_tool_timeout_is_cancelled_on_the_server(tmp_path):
    with mcp_tools(SERVER, env={"MCP_TEST_MARKS": str(tmp_path)}) as tools:
        started = time.monotonic()
        outcome = run(tools, "slow", timeout=1, seconds=30)
        assert not outcome.ok and ("cancelled" in outcome.output or outcome.error == "timeout")
        deadline = time.monotonic() + 10
        while not (tmp_path / "cancelled").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "cancelled").exists(), "the server never heard the request was cancelled"
        assert time.monotonic() - started < 20
        assert run(tools, "add", a=1, b=1).output == "2"  # the connection is still good


def test_calls_from_several_threads_are_not_serialised(tools):
    slow_done = threading.Event()

    def slow():
        run(tools, "slow", seconds=2)
        slow_done.set()

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.2)
    answers = [run(tools, "add", a=i, b=i).output for i in range(5)]
    assert answers == ["0", "2", "4", "6", "8"] and not slow_done.is_set()
    thread.join(10)
    assert slow_done.is_set()


def test_a_server_that_dies_becomes_observations_and_the_run_goes_on():
    replies = ["TOOL: die", 'TOOL: add ARGS: {"a": 1, "b": 2}', "ANSWER: the server is gone"]
    with mcp_tools(SERVER) as tools:
        backend = ScriptedBackend(replies)
        result = Agent(backend, tools, chat_format="chatml", tool_timeout=10).run("Break it.")
    assert result.stop_reason == "answer" and result.answer == "the server is gone"
    first, second = (s.outcomes[0] for s in result.steps[:2])
    assert not first.ok and "connection closed" in first.output.lower()
    assert not second.ok and "MCP server 'server' is gone" in second.output and "cannot be called" in second.output
    assert "is gone" in backend.prompts[2]


def _children(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [pid for pid in out if int(pid) != os.getpid()]


def server_with_a_child(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the test server that first starts a child process of its own (the marker)."""
    marker = f"textagent-mcp-child-{tmp_path.name}"
    script = tmp_path / "own_server.py"
    spawn = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
    )
    source = (
        Path(SERVER[1])
        .read_text()
        .replace("from __future__ import annotations\n", "from __future__ import annotations\n" + spawn, 1)
    )
    script.write_text(source)
    return script, marker


def _gone(*markers: str, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while any(_children(m) for m in markers) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(_children(m) for m in markers)


def test_leaving_the_block_stops_the_server_and_its_children(tmp_path):
    script, marker = server_with_a_child(tmp_path)
    with mcp_tools([sys.executable, str(script)]) as tools:
        assert run(tools, "add", a=1, b=2).output == "3"
        assert _children(str(script)) and _children(marker)
    assert _gone(str(script), marker)
    outcome = run(tools, "add", a=1, b=2)  # after the block: an observation, not a hang
    assert not outcome.ok and "cannot be called" in outcome.output


def test_a_server_that_does_not_start_is_one_clear_error(tmp_path):
    with pytest.raises(MCPServerError, match="could not be started") as err:
        with mcp_tools("textagent-no-such-command-x9"):
            pass
    assert "\n" not in str(err.value).split(";")[0]
    boom = tmp_path / "boom.py"
    boom.write_text("import sys\nprint('boom: missing API key', file=sys.stderr)\nsys.exit(2)\n")
    with pytest.raises(MCPServerError, match="missing API key"):
        with mcp_tools([sys.executable, str(boom)], startup_timeout=20):
            pass
    with pytest.raises(MCPServerError, match="needs a command"):
        MCPConnection("   ")


def test_names_the_protocol_cannot_write_are_mapped_and_called(tools):
    assert "météo" not in tools and tools["meteo"].description.endswith("(MCP tool 'météo')")
    assert run(tools, "meteo", city="Rome").output == "Rome: sunny"
    assert writable_name("get-time") == "get-time"
    assert writable_name("météo") == "meteo" and writable_name("погода") == "tool"
    assert writable_name("1st tool") == "tool_1st_tool" and writable_name("a b") == "a_b"
    assert writable_name("add", {"add"}) == "add_2" and writable_name("x" * 200).startswith("x" * 100)


def test_two_servers_with_one_tool_name_need_a_prefix():
    with pytest.raises(MCPServerError, match="two MCP servers have a tool named 'add'"), mcp_tools(SERVER, SERVER):
        pass
    with mcp_tools(SERVER, [sys.executable, "-m", "mcp_server_time"], prefix=True) as tools:
        assert "server.add" in tools and "time.get_current_time" in tools


KEY = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    "command, name",
    [
        (f"python server.py --api-key {KEY}", "server"),
        (f"python3.11 -u -X dev weather.py --token {KEY}", "weather"),
        ("python -m mcp_server_time --local-timezone Europe/Paris", "time"),
        (f"uvx mcp-server-fetch --user-agent {KEY}", "fetch"),
        (f"uv run --with mcp files.py {KEY}", "files"),
        (f"npx -y @modelcontextprotocol/server-filesystem /home/{KEY}", "filesystem"),
        (f"env API_KEY={KEY} node build/index.js", "index"),
        (f"/usr/local/bin/github-mcp --key {KEY}", "github"),
        (f"docker run -i --rm -e KEY={KEY} mcp/time", "docker"),
        ("https://tools.example.com/mcp?token=x", "tools"),
    ],
)
def test_a_server_is_named_by_its_program_never_by_an_argument(command, name):
    assert _short_name(command) == name


def test_a_key_among_the_arguments_is_no_name_prefix_log_file_or_error(tmp_path):
    with MCPConnection([*SERVER, "--api-key", KEY], prefix="server") as conn:
        assert conn.name == "server" and "server.add" in conn.toolset()
        assert KEY not in str(conn.log_path) and conn.log_path.name.startswith("mcp-server-")
    with mcp_tools([*SERVER, "--api-key", KEY], [*SERVER, "--api-key", "other"], prefix=True) as tools:
        assert {"server.add", "server_2.add"} <= set(tools)  # two servers of one program, told apart
    boom = tmp_path / "boom.py"
    boom.write_text("import sys\nsys.exit(2)\n")
    with pytest.raises(MCPServerError) as err, mcp_tools([sys.executable, str(boom), "--api-key", KEY]):
        pass
    assert "MCP server 'boom' could not be started" in str(err.value) and KEY not in str(err.value)
    with pytest.raises(MCPServerError, match="two MCP servers have a tool named 'add'") as err:
        with mcp_tools([*SERVER, "--api-key", KEY], SERVER):
            pass
    assert KEY not in str(err.value)


def test_an_unclosed_quote_in_a_command_is_one_clear_error():
    with pytest.raises(MCPServerError, match="cannot be split like a shell's: No closing quotation") as err:
        MCPConnection(f'python "server.py --api-key {KEY}')
    assert KEY not in str(err.value)


def test_render_result_reads_every_kind_of_content():
    from mcp_types import CallToolResult, ImageContent, ResourceLink, TextContent

    result = CallToolResult(
        content=[
            TextContent(type="text", text="a chart"),
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
            ResourceLink(type="resource_link", uri="file:///r.csv", name="r.csv"),
        ],
        structured_content={"rows": 3},
    )
    assert render_result(result) == 'a chart\n[image image/png, 3 bytes]\n[resource file:///r.csv r.csv]\n{"rows": 3}'


def test_the_real_time_server():
    with mcp_tools([sys.executable, "-m", "mcp_server_time"]) as tools:
        assert "get_current_time" in tools and "convert_time" in tools
        outcome = run(tools, "get_current_time", timezone="Asia/Tokyo")
        assert outcome.ok and json.loads(outcome.output)["timezone"] == "Asia/Tokyo"
        bad = run(tools, "get_current_time", timezone="Mars/Olympus")
        assert not bad.ok and "Mars/Olympus" in bad.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_streamable_http_server(tmp_path):
    port = _free_port()
    code = (
        f"import runpy, sys; sys.argv = ['x']; ns = runpy.run_path({SERVER[1]!r}, run_name='lib'); "
        f"ns['server'].run('streamable-http', port={port})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        # generous: importing the SDK and its ASGI server took over 30 s beside a model bench
        deadline = time.monotonic() + 120
        listening = False
        while not listening and time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                listening = s.connect_ex(("127.0.0.1", port)) == 0
            time.sleep(0.1)
        assert listening, f"the MCP server did not listen on port {port} (exit code {proc.poll()})"
        with mcp_tools(url) as tools:
            assert run(tools, "add", a=20, b=22).output == "42"
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_terminated_run_stops_its_mcp_servers(tmp_path):
    from httpfake import FakeServer

    script, marker = server_with_a_child(tmp_path)
    with FakeServer() as fake:
        fake.json("/completion", {"content": "ANSWER: late"}, delay=60)  # the model never answers in time
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "textagent",
                "run",
                "--endpoint",
                fake.url,
                "--chat-format",
                "chatml",
                "--mcp",
                f"{sys.executable} {script}",
                "q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not (_children(marker) and fake.requests) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _children(marker), "the MCP server never started"
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "Traceback" not in err
    assert _gone(str(script), marker)


# -- hostile servers (hardening round 4: M1, M2) ------------------------------------------------------

RAW_SERVER = """
import json, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\\n"); sys.stdout.flush()
pages = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": msg["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}})
    elif msg.get("method") == "tools/list":
        pages += 1
        tools = [{"name": f"t{pages}_{i}", "inputSchema": {"type": "object"}} for i in range(50)]
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": tools, "nextCursor": CURSOR}})
"""


@pytest.mark.parametrize(
    "cursor, says", [("'same'", "sent the page cursor 'same' twice"), ("str(pages)", "over more than 100 pages")]
)
def test_a_server_that_pages_for_ever_is_one_clear_error(tmp_path, cursor, says):
    script = tmp_path / "pager.py"
    script.write_text(RAW_SERVER.replace("CURSOR", cursor))
    started = time.monotonic()
    with pytest.raises(MCPServerError, match=says), mcp_tools([sys.executable, str(script)], startup_timeout=60):
        pass
    assert time.monotonic() - started < 30  # 2,100 pages in 22 s before, 800 MB with 50 tools a page


def test_a_server_that_never_answers_initialize_fails_within_the_startup_timeout(tmp_path):
    script = tmp_path / "mute.py"
    script.write_text("import sys, time\nsys.stdin.read()\ntime.sleep(60)\n")
    started = time.monotonic()
    with pytest.raises(MCPServerError, match="did not answer within 2 s"):
        with mcp_tools([sys.executable, str(script)], startup_timeout=2):
            pass
    assert time.monotonic() - started < 12  # ~20 s before, and close() waited 15 s more
