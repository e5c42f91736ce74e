import json

import pytest

from textagent.trace import TraceWriter, load_trace, load_traces


def test_load_trace_takes_the_newest_run_and_skips_a_cut_last_line(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        w.start(task="one", tools=[])
        w.write({"type": "result", "answer": "1", "stop_reason": "answer"})
    with TraceWriter(path) as w:
        w.start(task="two", tools=[])
        w.write({"type": "step", "step": 1})
    with open(path, "a") as f:
        f.write('{"type": "step", "st')  # a crash mid-write
    runs = load_traces(path)
    assert [r.start["task"] for r in runs] == ["one", "two"]
    assert runs[0].complete and not runs[1].complete
    assert [{k: v for k, v in s.items() if k != "run"} for s in load_trace(path).steps] == [{"type": "step", "step": 1}]


def test_writer_accepts_open_files_and_none(tmp_path):
    TraceWriter(None).write({"x": 1})  # no-op
    path = tmp_path / "f.jsonl"
    with open(path, "w") as f:
        w = TraceWriter(f)
        w.write({"type": "start", "task": "é"})
        w.close()
        assert not f.closed  # not ours to close
    assert json.loads(path.read_text())["task"] == "é"


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(ValueError, match="no trace records"):
        load_trace(path)


def _run(path, task, replies):
    from textagent import Agent, ScriptedBackend
    from textagent.toolkits.demo import demo_tools

    return Agent(ScriptedBackend(replies), demo_tools(), trace=path).run(task)


def test_a_run_after_a_crash_mid_record_starts_on_a_fresh_line_and_is_not_merged(tmp_path):
    # #16 item 4: the first run crashed while writing a record; the next run appends to the file
    path = tmp_path / "t.jsonl"
    _run(path, "first", ['TOOL: calculate ARGS: {"expression": "1+1"}', "ANSWER: 2"])
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: text.rindex('{"type": "result"') + 25], encoding="utf-8")  # cut the result line
    _run(path, "second", ['TOOL: calculate ARGS: {"expression": "2+2"}', "ANSWER: 4"])
    for line in path.read_text(encoding="utf-8").splitlines()[-4:]:
        json.loads(line)  # the new run's records are whole lines
    runs = load_traces(path)
    assert [r.start["task"] for r in runs] == ["first", "second"]
    assert [len(r.steps) for r in runs] == [2, 2]
    assert not runs[0].complete and runs[1].complete and runs[1].result["answer"] == "4"


def test_load_traces_does_not_merge_runs_glued_by_an_older_writer(tmp_path):
    # a file where the next run's start record was appended onto the half-written line
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"type": "start", "task": "one"}\n{"type": "step", "step": 1}\n{"type": "st'
        '{"type": "start", "task": "two"}\n{"type": "step", "step": 1}\n'
        '{"type": "result", "answer": "x"}\n',
        encoding="utf-8",
    )
    runs = load_traces(path)
    assert [r.start["task"] for r in runs] == ["one", "two"]
    assert [len(r.steps) for r in runs] == [1, 1]
    # a broken line ends the run it was in even when no start record can be recovered from it
    path.write_text('{"type": "start", "task": "one"}\n{"type": "st\n{"type": "step", "step": 1}\n', encoding="utf-8")
    runs = load_traces(path)
    assert len(runs) == 2 and runs[0].steps == [] and runs[1].start is None and len(runs[1].steps) == 1


def test_trace_lines_are_strict_json(tmp_path):
    # #16 item 5: NaN / Infinity arguments are written as strings, never as bare NaN tokens
    path = tmp_path / "t.jsonl"
    _run(path, "nan", ["TOOL: calculate ARGS: {expression: NaN, x: -Infinity, y: Infinity}", "ANSWER: none"])

    def strict(token):
        raise ValueError(f"not strict JSON: {token}")

    records = [json.loads(line, parse_constant=strict) for line in path.read_text(encoding="utf-8").splitlines()]
    step = records[1]
    assert step["calls"][0]["args"] == {"expression": "NaN", "x": "-Infinity", "y": "Infinity"}


def test_lone_surrogates_are_escaped_in_traces(tmp_path):
    # #16 item 2: "\ud83d" in JSON arguments is a lone surrogate: UTF-8 cannot hold it
    path = tmp_path / "t.jsonl"
    _run(path, "s", ['TOOL: calculate ARGS: {"expression": "\\ud83d"}', "ANSWER: none"])
    raw = path.read_bytes().decode("utf-8")  # strict UTF-8
    assert "\\ud83d" in raw
    step = load_traces(path)[0].steps[0]
    assert step["calls"][0]["args"] == {"expression": "\ud83d"}  # read back exactly


def test_lone_surrogates_in_an_open_file_target(tmp_path):
    path = tmp_path / "f.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        TraceWriter(f).write({"type": "start", "task": "a\udc80b é"})
    assert json.loads(path.read_text(encoding="utf-8"))["task"] == "a\udc80b é"


def test_two_runs_writing_one_trace_at_once_keep_their_own_steps(tmp_path):
    import threading

    path = tmp_path / "shared.jsonl"
    go = threading.Barrier(2)

    def run(task: str, steps: int) -> None:
        with TraceWriter(path) as w:
            w.start(task=task, tools=[])
            go.wait()
            for i in range(steps):
                w.write({"type": "step", "step": i + 1, "raw": task * 2000})  # long lines, many writes
            w.write({"type": "result", "answer": task, "stop_reason": "answer"})

    threads = [threading.Thread(target=run, args=(t, n)) for t, n in (("a", 40), ("b", 25))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs = {r.start["task"]: r for r in load_traces(path)}
    assert sorted(runs) == ["a", "b"]
    assert len(runs["a"].steps) == 40 and len(runs["b"].steps) == 25
    assert all(s["raw"] == "a" * 2000 for s in runs["a"].steps) and runs["a"].result["answer"] == "a"
    assert runs["b"].complete and all(s["raw"] == "b" * 2000 for s in runs["b"].steps)


@pytest.mark.parametrize(
    "mode, replies",
    [
        ("text", ['TOOL: calculate ARGS: {"expression": "2+2"}\nOBSERVATION: made up', "TOOL: nope(", "ANSWER: 4"]),
        (
            "native",
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "calculate", "arguments": '{"expression": "2+2"}'},
                        }
                    ],
                },
                {"role": "assistant", "content": "4"},
            ],
        ),
    ],
)
def test_a_step_reads_back_from_its_record_as_the_trace_wrote_it(tmp_path, mode, replies):
    from textagent import Agent, Step
    from textagent.backends import ScriptedBackend
    from textagent.toolkits.demo import demo_tools

    path = tmp_path / "t.jsonl"
    if mode == "native":
        from textagent.backends.base import Capabilities, Completion

        class Chat(ScriptedBackend):
            capabilities = Capabilities(chat=True)

            def chat_backend(self):
                return self

            def chat(self, messages, **kw):
                message = self.replies.pop(0)
                return Completion(message.get("content") or "", finish_reason="stop", message=message)

        backend = Chat(["x"])
        backend.replies = list(replies)
    else:
        backend = ScriptedBackend(replies)
    result = Agent(backend, demo_tools(), mode=mode, trace=path).run("2+2?")
    written = [{k: v for k, v in s.items() if k != "run"} for s in load_trace(path).steps]
    assert written == [json.loads(json.dumps(s.to_record())) for s in result.steps]
    again = [Step.from_record(r).to_record() for r in written]
    assert again == written
    if mode == "native":
        assert written[0]["calls"][0]["id"] == "c1"


def test_run_records_are_the_lines_the_writer_wrote(tmp_path):
    from textagent import Agent, ScriptedBackend
    from textagent.toolkits.demo import demo_tools
    from textagent.trace import run_records

    path = tmp_path / "t.jsonl"
    agent = Agent(
        ScriptedBackend(['TOOL: calculate ARGS: {"expression": "2+2"}', "TOOL: nope ARGS: {", "ANSWER: 4"]),
        demo_tools(),
        trace=path,
    )
    start = agent.start_record("What is 2+2?")
    result = agent.run("What is 2+2?")
    written = [json.loads(line) for line in path.read_text().splitlines()]
    built = [json.loads(json.dumps(r)) for r in run_records(start, result.steps, result, run_id=written[0]["run"])]
    for a, b in zip(written, built, strict=True):
        assert list(a) == list(b)  # the same fields in the same order
        a.pop("time", None), b.pop("time", None)
        assert a == b
    assert [r["type"] for r in built] == ["start", "step", "step", "step", "result"]
    # a run that raised: what there is, under one new id
    partial = run_records(None, result.steps[:1], None)
    assert [r["type"] for r in partial] == ["step"] and partial[0]["run"] != written[0]["run"]


def test_the_result_line_says_where_the_seconds_went():
    """Every second of a run in one of five places (run -v prints it with the process's own)."""
    from textagent.backends.base import Usage
    from textagent.steps import Result, Step
    from textagent.tools import ToolOutcome
    from textagent.trace import result_record

    first = Step(1, "TOOL: calculate", timings={"prefix_ms": 300.0, "prompt_ms": 1200.0, "predicted_ms": 2000.0})
    first.outcomes.append(ToolOutcome("calculate", {"expression": "17 * 24"}, True, "408", seconds=0.25))
    second = Step(2, "ANSWER: 408", timings={"prompt_ms": 100.0, "predicted_ms": 900.0})
    result = Result("408", "answer", [first, second], Usage(), seconds=5.0)
    spent = result_record(result)["time"]
    assert spent == {"prefix": 0.3, "prompt": 1.3, "generation": 2.9, "tools": 0.25, "other": 0.25}
    assert sum(spent.values()) == pytest.approx(result.seconds)
