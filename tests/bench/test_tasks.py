"""The task file format, the shipped suite, the checkers and the bench tools (no model)."""

from __future__ import annotations

import json
import re

import pytest

from textagent.bench import tasks as T
from textagent.bench.reference import check_suite
from textagent.bench.tools import Env, make_toolset
from textagent.protocol import ToolCall

# -- the shipped suite ------------------------------------------------------------------------


def test_shipped_suite_has_every_kind_and_at_least_40_tasks():
    suite = T.load_tasks()
    assert len(suite) >= 40
    kinds = T.iter_kinds(suite)
    for kind in T.KINDS:
        assert kinds.get(kind, 0) >= 3, (kind, kinds)
    assert len({t.id for t in suite}) == len(suite)


def test_every_shipped_task_is_solved_by_its_reference_replies():
    results = check_suite(T.load_tasks())
    failed = {t.id: (e.failure, e.checks, e.error) for t, e in results if e is None or not e.success}
    assert not failed


def test_seed_scenarios_are_in_the_suite():
    ids = {t.id for t in T.load_tasks()}
    assert {"chain-calc-seed", "chain-tokyo-light-seed", "chain-paris-coat-seed"} <= ids


def test_a_wrong_reference_fails_its_checks():
    task = next(t for t in T.load_tasks() if t.id == "chain-tokyo-light-seed")
    wrong = T.Task(
        task.id,
        task.question,
        task.tools,
        task.checks,
        task.kind,
        task.max_steps,
        task.setup,
        reference=(task.reference[0], task.reference[1], "ANSWER: 250, and the light is off."),
    )
    ((_, episode),) = check_suite([wrong])
    assert episode is not None and not episode.success
    assert {c.type for c in episode.checks if not c.ok} == {"calls", "state"}


# -- file format --------------------------------------------------------------------------------


def _write(tmp_path, *lines):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(x) if not isinstance(x, str) else x for x in lines) + "\n")
    return path


GOOD = {"id": "t1", "question": "What is 2+2?", "tools": ["calculate"], "check": {"type": "numeric", "value": 4}}


def test_load_user_file_with_header_and_blank_lines(tmp_path):
    path = _write(tmp_path, {"format": "textagent-bench", "version": 1, "name": "mine"}, "", GOOD)
    (task,) = T.load_tasks(path)
    assert task.id == "t1" and task.max_steps == T.DEFAULT_MAX_STEPS and task.checks[0]["type"] == "numeric"
    assert not task.needs_tools and not task.needs_no_tool


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "tasks.jsonl:1: not valid JSON"),
        ({**GOOD, "tools": ["nope"]}, "unknown tools nope"),
        ({**GOOD, "check": {"type": "vibes"}}, 'each check needs a "type"'),
        ({**GOOD, "check": {"type": "numeric"}}, "needs 'value', 'values' or 'only'"),
        ({**GOOD, "check": {"type": "regex", "pattern": "("}}, "bad regex"),
        ({**GOOD, "check": {"type": "calls", "calls": [{}]}}, "a call spec needs"),
        ({**GOOD, "max_steps": 0}, "'max_steps' must be a positive integer"),
        ({"id": "x", "question": "q"}, "missing 'tools'"),
        ({"format": "textagent-bench", "version": 99}, "newer than this textagent understands"),
    ],
)
def test_bad_task_files_name_the_line(tmp_path, line, message):
    path = _write(tmp_path, line, GOOD)
    with pytest.raises(T.TaskFileError, match=message.replace("(", r"\(").replace("+", r"\+")):
        T.load_tasks(path)


def test_duplicate_ids_and_empty_files_are_refused(tmp_path):
    with pytest.raises(T.TaskFileError, match="duplicate task id 't1'"):
        T.load_tasks(_write(tmp_path, GOOD, GOOD))
    with pytest.raises(T.TaskFileError, match="no tasks"):
        T.load_tasks(_write(tmp_path, ""))
    with pytest.raises(T.TaskFileError, match="cannot read"):
        T.load_tasks(tmp_path / "missing.jsonl")


def test_module_function_tools_are_allowed_when_asked_for(tmp_path):
    path = _write(tmp_path, {**GOOD, "tools": ["calculate", "textagent.toolkits.demo:multiply"]})
    (task,) = T.load_tasks(path, allow_imports=True)
    tools = make_toolset(task.tools, Env())
    assert set(tools) == {"calculate", "multiply"}


@pytest.mark.parametrize(
    "extra", [{"tools": ["os:system"]}, {"mcp": ["python -m some_server"]}, {"mcp": [["python", "server.py"]]}]
)
def test_a_task_file_that_names_code_to_run_is_refused_by_default(tmp_path, extra):
    path = _write(tmp_path, {**GOOD, **extra})
    with pytest.raises(T.TaskFileError, match="names code to run .* --allow-imports"):
        T.load_tasks(path)
    assert T.load_tasks(_write(tmp_path, {**GOOD, "mcp": ["http://127.0.0.1:9/mcp"]}))  # a URL runs nothing here


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"setup": [1]}, "'setup' must be an object"),
        ({"setup": {"lights": {"kitchen": "on"}}}, "'setup' must be an object"),
        ({"check": {"type": "state", "lights": 5}}, "'lights' must be an object of room: true/false"),
        ({"check": {"type": "contains", "all": 5}}, "'all' must be a list of strings"),
        ({"check": {"type": "numeric", "value": "abc"}}, "'value' must be a number"),
        ({"check": {"type": "numeric", "values": []}}, "'values' must be a non-empty list of numbers"),
        ({"check": {"type": "numeric", "value": 3, "tol": -1}}, "'tol' must be a number >= 0"),
        ({"check": {"type": "not_called", "tools": "calculate"}}, "'tools' must be a list of tool names"),
        ({"check": {"type": "regex", "pattern": 5}}, "'pattern' must be a string"),
    ],
)
def test_malformed_setup_and_checks_are_refused_when_the_file_is_loaded(tmp_path, bad, words):
    with pytest.raises(T.TaskFileError, match=re.escape(words)):
        T.load_tasks(_write(tmp_path, {**GOOD, **bad}))


# -- checkers -------------------------------------------------------------------------------------


def test_envs_are_isolated_and_the_clock_is_frozen():
    a, b = Env(lights={"kitchen": True}), Env()
    ta, tb = make_toolset(["toggle_light", "get_time"], a), make_toolset(["toggle_light"], b)
    assert ta.execute(ToolCall("toggle_light", {"room": "kitchen", "on": False})).ok
    assert a.lights["kitchen"] is False and b.lights["kitchen"] is False
    assert tb.execute(ToolCall("toggle_light", {"room": "office", "on": True})).ok
    assert a.lights["office"] is False and b.lights["office"] is True
    tokyo = ta.execute(ToolCall("get_time", {"timezone": "Asia/Tokyo"}))
    assert "2025-06-14T21:00:00+09:00" in tokyo.output and "Saturday" in tokyo.output
    assert a.calls == {"toggle_light": 1, "get_time": 1}


def test_demo_tools_keep_their_descriptions():
    from textagent.toolkits import demo

    tools = make_toolset(["calculate", "get_time", "toggle_light"], Env())
    for name in tools:
        original = getattr(demo, name)
        assert tools[name].description == original.description and tools[name].parameters == original.parameters
    # the demo's examples that fit (all calls within the set), after the direct-answer one
    assert tools.examples[0] is demo.DEMO_EXAMPLES[0] and not tools.examples[0].calls
    assert demo.DEMO_EXAMPLES[1] in tools.examples
    assert all({c[0] for c in e.calls} <= set(tools) for e in tools.examples)
    full = make_toolset(["calculate", "get_time", "get_weather", "multiply", "toggle_light"], Env())
    assert full.examples == demo.DEMO_EXAMPLES
    assert make_toolset(["search_web"], Env()).examples == ()  # nothing fits: the agent builds a placeholder


def test_stock_tool_fails_once_per_episode():
    env = Env()
    tools = make_toolset(["get_stock_price"], env)
    first = tools.execute(ToolCall("get_stock_price", {"symbol": "ACME"}))
    assert not first.ok and first.error == "tool_error" and "retry" in first.output
    second = tools.execute(ToolCall("get_stock_price", {"symbol": "ACME"}))
    assert second.ok and "123.45" in second.output
    assert not make_toolset(["get_stock_price"], Env()).execute(ToolCall("get_stock_price", {"symbol": "ACME"})).ok


def test_long_outputs_are_truncated_but_keep_the_answer():
    tools = make_toolset(["read_manual", "list_orders", "read_log"], Env())
    for call in (
        ToolCall("read_manual", {"product": "X200"}),
        ToolCall("list_orders", {"customer_id": "C-1001"}),
        ToolCall("read_log", {"service": "payments"}),
    ):
        outcome = tools.execute(call, limit=4000)
        assert outcome.ok and "[truncated" in outcome.output, call
    assert "4200 mAh" in tools.execute(ToolCall("read_manual", {"product": "X200"}), limit=4000).output


def test_typed_tools_validate_enums():
    tools = make_toolset(["convert_currency", "book_table", "convert_units"], Env())
    assert (
        "40000"
        in tools.execute(
            ToolCall("convert_currency", {"amount": 250, "from_currency": "EUR", "to_currency": "JPY"})
        ).output
    )
    bad = tools.execute(ToolCall("book_table", {"restaurant": "X", "people": 2, "time": "7pm"}))
    assert not bad.ok and bad.error == "bad_arguments" and "19:00" in bad.output
    wrong_dim = tools.execute(ToolCall("convert_units", {"value": 1, "from_unit": "km", "to_unit": "kg"}))
    assert not wrong_dim.ok and "cannot convert" in wrong_dim.output


def test_a_task_may_name_mcp_servers_for_its_tools(tmp_path):
    import sys
    from pathlib import Path

    from textagent.backends.scripted import ScriptedBackend
    from textagent.bench.episode import run_episode
    from textagent.bench.tools import MCP_POOL

    server = [sys.executable, str(Path(__file__).resolve().parents[1] / "tools" / "mcp_server.py")]
    task = T.parse_task(
        {
            "id": "mcp-add",
            "question": "What is 2 + 40?",
            "tools": ["calculate"],
            "mcp": [server],
            "check": {"type": "numeric", "value": 42},
        }
    )
    assert task.mcp == (tuple(server),) and task.to_dict()["mcp"] == [server]
    try:
        record = run_episode(
            task, "text", ScriptedBackend(['TOOL: add ARGS: {"a": 2, "b": 40}', "ANSWER: 42"])
        ).to_record()
        again = run_episode(task, "text", ScriptedBackend(["ANSWER: 42"])).to_record()  # the same server, started once
    finally:
        MCP_POOL.close()
    assert record["success"] and record["calls"][0]["name"] == "add" and record["calls"][0]["output"] == "42"
    assert again["success"]
    for bad in ([5], "python x.py", [[]], [""]):
        with pytest.raises(T.TaskFileError, match="'mcp' must be a list"):
            T.parse_task({"id": "x", "question": "q", "tools": [], "mcp": bad, "check": {"type": "no_calls"}})


def test_bench_refuses_a_task_file_that_imports_code_without_the_flag(tmp_path, capsys):
    from textagent.bench import cli

    path = _write(tmp_path, {**GOOD, "tools": ["os:system"]})
    assert cli.main(["--tasks", str(path), "--check-suite"]) == 2
    assert "--allow-imports" in capsys.readouterr().err
    args = cli.build_parser().parse_args(["--tasks", str(path), "--allow-imports"])
    assert [t.id for t in cli.load_selected(args)] == [GOOD["id"]]
