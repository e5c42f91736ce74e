"""The command line, in process against a scripted llama.cpp-style server, and as a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from textagent.cli import EXIT_CODES, main
from textagent.errors import TextagentError
from textagent.steps import SentBack
from textagent.toolkits import demo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from httpfake import FakeServer, closed_port_url


@pytest.fixture
def server():
    srv = FakeServer()
    yield srv
    srv.stop()


def completion(text):
    return {
        "content": text,
        "stop_type": "eos",
        "tokens_evaluated": 10,
        "tokens_predicted": 5,
        "timings": {"prompt_n": 10, "predicted_n": 5, "cache_n": 0},
    }


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- parse ---------------------------------------------------------------------------------------


def test_parse_prints_calls_answer_thought_dropped(tmp_path, capsys):
    reply = tmp_path / "reply.txt"
    reply.write_text('I will compute.\nTOOL: calculate ARGS: {"expression": "17 * 24"}\nOBSERVATION: 408\n')
    code, out, _ = run_cli(capsys, "parse", str(reply))
    data = json.loads(out)
    assert code == 0
    assert data["calls"] == [{"name": "calculate", "args": {"expression": "17 * 24"}}]
    assert data["thought"] == "I will compute." and data["answer"] is None
    assert data["dropped"][0]["kind"] == "observation" and data["dropped"][0]["line"] == 3


def test_parse_error_exits_2_with_position_and_feedback(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO('TOOL: calculate ARGS: {"expression": "1"\n'))
    code, out, _ = run_cli(capsys, "parse")
    error = json.loads(out)["error"]
    assert code == 2
    assert error["line"] == 1 and error["column"] >= 1 and error["expected"] and error["feedback"]
    assert set(error) >= {"message", "line", "column", "expected", "feedback"}


def test_parse_binds_bare_arguments_with_tools(tmp_path, capsys):
    reply = tmp_path / "r.txt"
    reply.write_text("TOOL: calculate ARGS: 17 * 24\n")
    assert json.loads(run_cli(capsys, "parse", str(reply))[1])["calls"][0]["args"] == "17 * 24"
    _code, out, _ = run_cli(capsys, "parse", str(reply), "--tools", "calculate")
    assert json.loads(out)["calls"][0]["args"] == {"expression": "17 * 24"}


def test_parse_help_explains_the_forms(capsys):
    with pytest.raises(SystemExit):
        main(["parse", "--help"])
    out = capsys.readouterr().out
    for form in ("JSON object", "relaxed", "key=value", "shorthand", "bare argument", "ANSWER:", "OBSERVATION"):
        assert form in out


# -- run -----------------------------------------------------------------------------------------


def test_run_answers_and_prints_steps(server, capsys, tmp_path):
    demo.reset_lights()
    server.json("/completion", completion('TOOL: calculate ARGS: {"expression": "17 * 24"}'))
    server.json("/completion", completion('TOOL: calculate ARGS: {"expression": "408 + 100"}'))
    server.json("/completion", completion("ANSWER: 508"))
    trace = tmp_path / "trace.jsonl"
    code, out, err = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "-v",
        "--json",
        "--trace",
        str(trace),
        "What's 17 times 24, then add 100?",
    )
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary == {"answer": "508", "stop_reason": "answer", "steps": 3, "usage": summary["usage"]}
    assert summary["usage"]["prompt_tokens"] == 30
    assert "step 1: calling calculate({'expression': '17 * 24'}) -> 408" in err
    assert "step 2: calling calculate({'expression': '408 + 100'}) -> 508" in err
    sent = server.bodies("/completion")
    assert all(b["cache_prompt"] is True and "OBSERVATION" in b["stop"] for b in sent)
    assert len(trace.read_text().splitlines()) == 5


class CliCheck:
    name = "cli"

    def on_answer(self, run, answer):
        return None if run.sent_back_by(self.name) else SentBack(self.name, "Once more.", ("509",))


def test_run_takes_checks_by_module_and_name_and_runs_none_by_default(server, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "clichecks", types.SimpleNamespace(CliCheck=CliCheck))
    for text in ('TOOL: calculate ARGS: {"expression": "17 * 24"}', "ANSWER: 408, plus 100 is 509", "ANSWER: 508"):
        server.json("/completion", completion(text))
    code, out, err = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "-v",
        "--json",
        "--checks",
        "clichecks:CliCheck",
        "What's 17 times 24, then add 100?",
    )
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["answer"] == "508"
    assert "step 2: answer sent back by the cli check: 509" in err
    assert "Once more." in server.bodies("/completion")[2]["prompt"]
    for text in ('TOOL: calculate ARGS: {"expression": "17 * 24"}', "ANSWER: 408, plus 100 is 509"):
        server.json("/completion", completion(text))
    code, out, _ = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "--json",
        "What's 17 times 24, then add 100?",
    )
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["answer"] == "408, plus 100 is 509"


def test_unknown_checks_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        run_cli(capsys, "run", "--checks", "numbers", "q")
    assert "unknown check 'numbers': give module:Name" in capsys.readouterr().err


@pytest.mark.parametrize(
    "reason, argv, replies",
    [
        ("max_steps", ["--max-steps", "2"], ["TOOL: get_time"] * 2),
        ("format_errors", [], ["TOOL:"] * 3),
        ("token_budget", ["--token-budget", "25"], ["TOOL: get_time"] * 3),
        ("repeated", ["--max-repeats", "2"], ["TOOL: get_time"] * 2),
        ("call_errors", ["--max-call-errors", "2"], ["TOOL: teleport"] * 2),
    ],
)
def test_each_stop_reason_has_its_exit_code(server, capsys, reason, argv, replies):
    for text in replies:
        server.json("/completion", completion(text))
    code, out, err = run_cli(capsys, "run", "--endpoint", server.url, "--chat-format", "plain", "--json", *argv, "q")
    assert json.loads(out.strip().splitlines()[-1])["stop_reason"] == reason
    assert code == EXIT_CODES[reason] != 0
    assert f"stopped: {reason}" in err


def test_json_output_carries_the_error_of_a_backend_error(capsys):
    code, out, _ = run_cli(capsys, "run", "--endpoint", closed_port_url(), "--chat-format", "chatml", "--json", "q")
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == EXIT_CODES["backend_error"] and summary["stop_reason"] == "backend_error"
    assert summary["error"]["type"] == "BackendConnectionError" and "no server at" in summary["error"]["message"]


def test_reply_tokens_caps_each_reply_and_max_tokens_is_the_deprecated_budget(server, capsys):
    for _ in range(3):
        server.json("/completion", completion("TOOL: get_time"))
    code, out, err = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "plain",
        "--json",
        "--reply-tokens",
        "7",
        "--max-tokens",
        "25",
        "q",
    )
    assert (
        code == EXIT_CODES["token_budget"] and json.loads(out.strip().splitlines()[-1])["stop_reason"] == "token_budget"
    )
    assert "--max-tokens as the run's token budget is deprecated" in err and "--token-budget" in err
    assert server.bodies("/completion")[0]["n_predict"] == 7


def test_model_names_the_remote_model_and_gguf_the_embedded_one(server, capsys, monkeypatch):
    server.json("/v1/completions", {"choices": [{"text": "ANSWER: ok", "finish_reason": "stop"}]}, repeat=True)
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--api", "completions", "--model", "qwen-7b", "q")
    assert code == 0 and server.bodies("/v1/completions")[-1]["model"] == "qwen-7b" and "deprecated" not in err
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--api", "completions", "--model-name", "old", "q")
    assert code == 0 and server.bodies("/v1/completions")[-1]["model"] == "old"
    assert "--model-name is deprecated; use --model" in err
    started = []

    class FakeLocal:
        def __init__(self, model, **kw):
            started.append(model)

        def start(self):
            raise TextagentError("no llama-server here")

        def stop(self):
            pass

    monkeypatch.setattr("textagent.local.LocalServer", FakeLocal)
    monkeypatch.setattr("textagent.local.running_server", lambda: None)
    assert run_cli(capsys, "run", "--gguf", "smollm2", "q")[0] == 1 and started == ["smollm2"]
    code, _, err = run_cli(capsys, "run", "--model", "/m/tiny.gguf", "q")  # the old spelling
    assert code == 1 and started[-1] == "/m/tiny.gguf"
    assert "--model without --endpoint naming the embedded server's model is deprecated; use --gguf" in err


def test_endpoint_and_api_key_come_from_the_usual_environment_variables(server, capsys, monkeypatch):
    server.json("/v1/completions", {"choices": [{"text": "ANSWER: ok", "finish_reason": "stop"}]}, repeat=True)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert run_cli(capsys, "run", "--api", "completions", "q")[0] == 0
    assert server.requests[-1].headers["authorization"] == "Bearer sk-from-env"
    assert run_cli(capsys, "run", "--api", "completions", "--api-key", "sk-flag", "q")[0] == 0
    assert server.requests[-1].headers["authorization"] == "Bearer sk-flag"  # the flag wins
    server.json("/completion", completion("ANSWER: ok"))
    assert run_cli(capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "q")[0] == 0
    assert "authorization" not in server.requests[-1].headers  # never sent to llama.cpp
    server.ndjson("/api/generate", [{"response": "ANSWER: ok", "done": True, "done_reason": "stop"}])
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{server.port}")
    assert run_cli(capsys, "run", "--api", "ollama", "--model", "m", "q")[0] == 0
    assert server.requests[-1].path == "/api/generate" and server.bodies("/api/generate")[-1]["model"] == "m"
    sent = len(server.requests)
    code, _, err = run_cli(capsys, "run", "--api", "ollama", "q")  # no default model: one rule everywhere
    assert code == 1 and "needs a model" in err and len(server.requests) == sent


def test_retries_are_logged_with_verbose_or_log_level(server, capsys):
    for _ in range(2):
        server.json("/completion", {"error": "busy"}, status=503)
        server.json("/completion", completion("ANSWER: ok"))
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "-v", "q")
    assert code == 0 and "textagent.backends._http: INFO: POST " in err and "answered HTTP 503; retry 1 of 2" in err
    code, _, err = run_cli(
        capsys, "--log-level", "warning", "run", "--endpoint", server.url, "--chat-format", "chatml", "-v", "q"
    )
    assert code == 0 and "retry 1 of 2" not in err


def test_exit_codes_are_distinct():
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES) and EXIT_CODES["answer"] == 0


def test_dead_server_says_what_to_do(capsys):
    code, _out, err = run_cli(capsys, "run", "--endpoint", closed_port_url(), "--chat-format", "chatml", "q")
    assert code == EXIT_CODES["backend_error"]
    assert "no server at" in err and "textagent serve" in err and "Traceback" not in err


def test_http_error_reports_status_and_body(server, capsys):
    server.json("/completion", {"error": {"code": 500, "message": "model exploded"}}, status=500)
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "q")
    assert code == EXIT_CODES["backend_error"] and "500" in err and "model exploded" in err


def test_server_chat_format_is_learned_from_apply_template(server, capsys):
    def chatml(messages):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + "<|im_start|>assistant\n"

    probe = [
        {"role": r, "content": c}
        for r, c in [
            ("system", "TXA5SYSTEMTXA5"),
            ("user", "TXA5USER1TXA5"),
            ("assistant", "TXA5ASSISTANT1TXA5"),
            ("user", "TXA5USER2TXA5"),
        ]
    ]
    server.json("/apply-template", {"prompt": chatml(probe)})
    server.json("/completion", completion("ANSWER: hi"))
    code, out, _ = run_cli(capsys, "run", "--endpoint", server.url, "q")
    assert code == 0 and out.strip() == "hi"
    prompt = server.bodies("/completion")[0]["prompt"]
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("q<|im_end|>\n<|im_start|>assistant\n")


def test_tools_option_loads_demo_names_and_module_functions(server, capsys):
    server.json("/completion", completion("ANSWER: ok"))
    code, _, _ = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "--tools",
        "calculate,textagent.toolkits.demo:multiply",
        "q",
    )
    assert code == 0
    prompt = server.bodies("/completion")[0]["prompt"]
    assert "- multiply: " in prompt and "- calculate: " in prompt and "get_weather" not in prompt


def test_run_writes_the_examples_in_the_benchs_chosen_style_and_offers_no_other(server, capsys):
    """The example style and tool choice are the bench's ablations (``bench --example-style``,
    ``Agent(example_style=)``): ``run`` takes the defaults, the status style and the closest tool."""
    server.json("/completion", completion("ANSWER: ok"), repeat=True)
    tools = "textagent.toolkits.demo:multiply,textagent.toolkits.demo:get_weather"
    args = ["run", "--endpoint", server.url, "--chat-format", "chatml", "--tools", tools]
    code, _, _ = run_cli(capsys, *args, "What is the weather in Rome?")
    assert code == 0
    prompt = server.bodies("/completion")[-1]["prompt"]
    assert re.search(r"TOOL: (\w+) ARGS", prompt).group(1) == "get_weather"
    assert 'OBSERVATION (get_weather): {"status": "success"}' in prompt
    for option in ("--example-style", "--example-tool"):
        with pytest.raises(SystemExit) as exc:
            run_cli(capsys, *args, option, "first", "q")
        assert exc.value.code == 2 and f"unrecognized arguments: {option}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "chat", "proxy"])
def test_the_users_commands_offer_no_example_style_or_tool(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "--example-style" not in text and "--example-tool" not in text


def test_bench_keeps_the_example_style_and_tool_for_its_ablations(capsys):
    from textagent.bench.cli import main as bench_main

    assert bench_main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "--example-style" in text and "--example-tool" in text


def test_tools_option_keeps_the_demo_examples_of_the_chosen_tools(server, capsys):
    server.json("/completion", completion("ANSWER: 36"))
    code, _, _ = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "--tools",
        "calculate,get_weather",
        "What is 3% of 1200?",
    )
    prompt = server.bodies("/completion")[0]["prompt"]
    assert code == 0 and "What is 2.5% of 3200?" in prompt and "Good morning!" in prompt
    assert "get_time" not in prompt and "toggle_light" not in prompt


def test_unknown_tool_option_is_a_clear_error(capsys):
    code, _, err = run_cli(capsys, "run", "--endpoint", "http://127.0.0.1:9", "--tools", "teleport", "q")
    assert code == 1 and "unknown tool 'teleport'" in err and "calculate" in err
    code, _, err = run_cli(capsys, "run", "--endpoint", "http://127.0.0.1:9", "--tools", "nosuchmodule:f", "q")
    assert code == 1 and "cannot load" in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "--timeout", "0", "q"], "argument --timeout: must be a finite number greater than 0"),
        (["run", "--max-steps", "0", "q"], "argument --max-steps: must be a finite number greater than 0"),
        (["run", "--max-repeats", "1", "q"], "argument --max-repeats: the same calls 2 or more times in a row, not 1"),
        (["chat", "--max-repeats", "two"], "argument --max-repeats: 'two' is not a whole number"),
        (["run", "--max-call-errors", "0", "q"], "argument --max-call-errors: must be a finite number greater than 0"),
        (["run", "--max-seconds", "nan", "q"], "argument --max-seconds: must be a finite number greater than 0"),
        (["run", "--max-steps", "two", "q"], "argument --max-steps: 'two' is not a whole number"),
    ],
)
def test_bad_numbers_are_one_line_usage_errors(capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--endpoint", closed_port_url(), *argv[1:]])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and says in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["parse", "/nonexistent/file.txt"], "cannot read /nonexistent/file.txt: No such file or directory"),
        (["run", "--trace", "/nonexistent/dir/t.jsonl", "q"], "--trace /nonexistent/dir/t.jsonl: cannot write it"),
        (["run", "--tools", "os:sep", "q"], "--tools os:sep: not a usable tool (a tool needs a callable, got str)"),
        (["run", "--tools", ":f", "q"], "--tools :f: cannot load it"),
        (
            [
                "run",
                "  ",
            ],
            "the question is empty",
        ),
    ],
)
def test_user_mistakes_are_one_line_errors_before_anything_is_sent(server, capsys, argv, says):
    if argv[0] == "run":
        argv = ["run", "--endpoint", server.url, "--chat-format", "chatml", *argv[1:]]
    code, _, err = run_cli(capsys, *argv)
    assert code == 1 and err.startswith("textagent: ")
    assert says in err and len(err.strip().splitlines()) == 1
    assert server.requests == []


def test_version_comes_from_the_package_metadata(capsys):
    from importlib.metadata import version

    import textagent

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert (
        capsys.readouterr().out.strip() == f"textagent {version('textagent')}" == f"textagent {textagent.__version__}"
    )


def test_models_list(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TEXTAGENT_CACHE", str(tmp_path))
    code, out, _ = run_cli(capsys, "models")
    assert code == 0 and "qwen2.5-coder-0.5b" in out and "smollm2" in out and "not cached" in out
    assert "qwen2.5-coder-1.5b" in out
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF" * 10)  # cut short
    code, out, _ = run_cli(capsys, "models")
    assert "smollm2" in out and "incomplete or corrupt" in out and "textagent models fetch smollm2" in out


def test_no_traceback_reaches_the_user_from_a_real_process():
    proc = subprocess.run(
        [sys.executable, "-m", "textagent", "run", "--endpoint", closed_port_url(), "q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == EXIT_CODES["backend_error"]
    assert "Traceback" not in proc.stderr and "no server at" in proc.stderr


def test_bench_and_fuzz_are_subcommands(capsys):
    assert main(["fuzz", "--examples", "60", "--no-adversarial"]) == 0
    out = capsys.readouterr().out
    assert "examples: " in out and "failures: 0" in out
    assert main(["bench", "--help"]) == 0
    assert "textagent bench" in capsys.readouterr().out


def test_parse_of_a_lone_surrogate_prints_valid_json_from_a_real_process():
    # #16 item 2: "\ud83d" in JSON arguments decodes to a lone surrogate, which UTF-8 cannot hold
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "textagent", "parse"],
        input='TOOL: calculate ARGS: {"expression": "\\ud83d"}\n',
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\\ud83d" in proc.stdout
    assert json.loads(proc.stdout)["calls"] == [{"name": "calculate", "args": {"expression": "\ud83d"}}]


def test_run_with_trace_survives_a_lone_surrogate_in_the_arguments(server, capsys, tmp_path):
    server.json("/completion", completion('TOOL: calculate ARGS: {"expression": "\\ud83d"}'))
    server.json("/completion", completion("ANSWER: none"))
    trace = tmp_path / "trace.jsonl"
    code, _out, err = run_cli(
        capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "--json", "--trace", str(trace), "q"
    )
    assert code == 0, err
    step = json.loads(trace.read_bytes().decode("utf-8").splitlines()[1])
    assert step["calls"][0]["args"] == {"expression": "\ud83d"}


# -- run --mcp -------------------------------------------------------------------------------------

MCP_SERVER = f"{sys.executable} {Path(__file__).resolve().parent / 'tools' / 'mcp_server.py'}"


def test_run_with_an_mcp_server_gets_its_tools_only(server, capsys):
    server.json("/completion", completion('TOOL: add ARGS: {"a": 2, "b": 40}'))
    server.json("/completion", completion("ANSWER: 42"))
    code, out, _ = run_cli(
        capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "--mcp", MCP_SERVER, "What is 2 + 40?"
    )
    assert code == 0 and out.strip() == "42"
    first, second = (b["prompt"] for b in server.bodies("/completion"))
    assert "- add: " in first and "- meteo: " in first and "get_weather" not in first and "calculate" not in first
    assert "OBSERVATION" in second and "42" in second.split("What is 2 + 40?")[-1]


def test_run_with_mcp_and_tools_and_a_prefix(server, capsys):
    server.json("/completion", completion("ANSWER: ok"))
    code, _, err = run_cli(
        capsys,
        "run",
        "--endpoint",
        server.url,
        "--chat-format",
        "chatml",
        "--mcp",
        MCP_SERVER,
        "--mcp-prefix",
        "--tools",
        "calculate",
        "-v",
        "q",
    )
    prompt = server.bodies("/completion")[0]["prompt"]
    assert code == 0 and "- server.add: " in prompt and "- calculate: " in prompt
    assert "MCP tools: server.add" in err


def test_run_with_an_mcp_server_that_does_not_start(server, capsys):
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--mcp", "textagent-no-such-server-x9", "q")
    assert code != 0 and "could not be started" in err and "Traceback" not in err
    assert not server.bodies("/completion")


def test_a_trace_path_that_is_a_fifo_is_refused_at_once(server, capsys, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--trace", str(fifo), "q")
    assert code != 0 and "not a regular file" in err and not server.requests
    code, _, err = run_cli(capsys, "run", "--endpoint", server.url, "--trace", str(tmp_path), "q")
    assert code != 0 and "not a regular file" in err


def test_version_and_help_import_neither_the_parser_nor_the_validator():
    # what `textagent --version` / `--help` cost is mostly imports: lark, jsonschema and requests
    # are not needed, nor (for --help) importlib.metadata
    code = (
        "import sys, runpy; sys.argv = ['textagent', '{flag}']\n"
        "try:\n    runpy.run_module('textagent', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('lark', 'jsonschema', 'requests', 'textagent.agent', 'textagent.protocol',"
        " 'importlib.metadata') if m in sys.modules))"
    )
    for flag, loaded in (("--version", "['importlib.metadata']"), ("--help", "[]")):
        out = (
            subprocess.run([sys.executable, "-c", code.format(flag=flag)], capture_output=True, text=True, timeout=60)
            .stdout.strip()
            .splitlines()[-1]
        )
        assert out == loaded, (flag, out)


# -- chat ----------------------------------------------------------------------------------------


def _typed(monkeypatch, lines):
    """input() answers with these lines, then Ctrl-D (an exception in the list is raised instead)."""
    feed = iter(lines)

    def fake_input(prompt=""):
        item = next(feed, EOFError())
        if isinstance(item, BaseException):
            raise item
        return item

    monkeypatch.setattr("builtins.input", fake_input)


def test_chat_keeps_the_conversation_and_reset_starts_afresh(server, capsys, monkeypatch):
    server.json("/completion", completion('TOOL: calculate ARGS: {"expression": "17 * 24"}'))
    server.json("/completion", completion("ANSWER: 408"))
    server.json("/completion", completion('TOOL: calculate ARGS: {"expression": "408 + 100"}'))
    server.json("/completion", completion("ANSWER: 508"))
    server.json("/completion", completion("ANSWER: hello"))
    _typed(monkeypatch, ["What's 17 times 24?", "", "Now add 100.", "/nope", "/reset", "Hi."])
    code, out, err = run_cli(capsys, "chat", "--endpoint", server.url, "--chat-format", "chatml")
    assert code == 0 and out.split() == ["408", "508", "hello"]
    prompts = [b["prompt"] for b in server.bodies("/completion")]
    assert "OBSERVATION (calculate): 408" in prompts[2] and "Now add 100." in prompts[2]
    assert prompts[2].startswith(prompts[1])  # one conversation, only ever appended to
    assert "17 times 24" not in prompts[4]  # after /reset
    assert "unknown command /nope" in err and "(a new conversation)" in err


def test_chat_ctrl_c_at_the_prompt_leaves_cleanly_and_during_a_question_drops_it(server, capsys, monkeypatch):
    from textagent.agent import Agent

    real_run = Agent.run
    calls = iter([KeyboardInterrupt(), None])

    def run_or_interrupt(self, task):
        item = next(calls)
        if isinstance(item, BaseException):
            self.mode.start(task, [])  # half a question written, then Ctrl-C
            raise item
        return real_run(self, task)

    monkeypatch.setattr(Agent, "run", run_or_interrupt)
    server.json("/completion", completion("ANSWER: fine"))
    _typed(monkeypatch, ["first?", "second?", KeyboardInterrupt()])
    code, out, err = run_cli(capsys, "chat", "--endpoint", server.url, "--chat-format", "chatml")
    assert code == 0 and out.strip() == "fine" and "that question is dropped" in err
    (body,) = server.bodies("/completion")
    assert "first?" not in body["prompt"] and "second?" in body["prompt"]


def test_chat_as_a_process_reads_questions_until_end_of_input(server):
    server.json("/completion", completion("ANSWER: one"))
    server.json("/completion", completion("ANSWER: two"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "textagent",
            "chat",
            "--endpoint",
            server.url,
            "--chat-format",
            "chatml",
            "--prompt",
            "",
        ],
        input="a?\nb?\n",
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 0 and done.stdout.split() == ["one", "two"] and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "--endpoint", "", "q"], "argument --endpoint: --endpoint is empty"),
        (["chat", "--endpoint", " "], "argument --endpoint: --endpoint is empty"),
        (["run", "--api-key", "", "--endpoint", "http://127.0.0.1:9", "q"], "argument --api-key: --api-key is empty"),
        (["serve", "--port", "99999"], "argument --port: a port is 0 (a free one) to 65535, not 99999"),
        (["bench", "--endpoint", "", "--out", "x"], "argument --endpoint: --endpoint is empty"),
        (["proxy", "--port", "99999"], "argument --port: a port is 0 (a free one) to 65535, not 99999"),
        (["proxy", "--api-key", ""], "argument --api-key: --api-key is empty"),
        (["proxy", "--endpoint", ""], "argument --endpoint: --endpoint is empty"),
        (["fuzz", "--seconds", "nan"], "argument --seconds: must be a finite number greater than 0"),
        (["fuzz", "--seconds", "-1"], "argument --seconds: must be a finite number greater than 0"),
        (["fuzz", "--examples", "0"], "argument --examples: must be a finite number greater than 0"),
    ],
)
def test_empty_or_impossible_values_are_usage_errors_before_anything_starts(capsys, monkeypatch, argv, says):
    import textagent.local

    monkeypatch.setattr(textagent.local.LocalServer, "start", lambda self: pytest.fail("a server was started"))
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err


def test_an_endpoints_password_never_reaches_stderr_the_trace_or_json(capsys, tmp_path):
    url = closed_port_url().replace("http://", "http://admin:s3cr3t-pw@")
    trace = tmp_path / "t.jsonl"
    code, out, err = run_cli(
        capsys, "run", "--endpoint", url, "--chat-format", "chatml", "--json", "--trace", str(trace), "q"
    )
    assert code == EXIT_CODES["backend_error"]
    shown = out + err + trace.read_text()
    assert "s3cr3t-pw" not in shown and "admin:" not in shown and "http://***@127.0.0.1" in shown


def test_bench_records_and_run_json_hold_no_endpoint_password(tmp_path):
    import argparse

    from textagent.bench.backends import Slot
    from textagent.bench.episode import Settings
    from textagent.bench.run_file import new_meta
    from textagent.bench.runner import _error_episode
    from textagent.bench.tasks import Task

    url = "http://admin:s3cr3t-pw@127.0.0.1:9"
    args = argparse.Namespace(
        _argv=["--endpoint", url, "--out", "x"],
        api="llamacpp",
        api_key="k3y-value",
        tasks=None,
        repeat=1,
        concurrency=1,
    )
    meta = new_meta(args, [], ["text"], {}, [url], "m", Settings())
    record = _error_episode(Task("t", "q", (), ()), "text", 0, Slot(url, 0), RuntimeError("x")).to_record()
    shown = json.dumps(meta) + json.dumps(record)
    assert "s3cr3t-pw" not in shown and "k3y-value" not in shown and "http://***@127.0.0.1:9" in shown


def test_the_command_line_takes_its_choices_from_the_tables_without_loading_backends():
    """--api and --chat-format list what backends.APIS and templates.FORMATS offer; reading
    those tables loads no HTTP client (the backends package loads its names on first use)."""
    from textagent.backends import APIS
    from textagent.conventions import API_CHOICES, CHAT_FORMAT_CHOICES, DEFAULT_EXAMPLE_STYLE, EXAMPLE_STYLE_CHOICES
    from textagent.prompts import DEFAULT_EXAMPLE_STYLE as PROMPTS_DEFAULT
    from textagent.prompts import EXAMPLE_STYLES
    from textagent.templates import FORMATS

    assert tuple(APIS) == API_CHOICES and ("server", *FORMATS) == CHAT_FORMAT_CHOICES
    assert EXAMPLE_STYLES == EXAMPLE_STYLE_CHOICES and DEFAULT_EXAMPLE_STYLE == PROMPTS_DEFAULT
    from textagent import conventions, prompts

    assert prompts.EXAMPLE_TOOLS == conventions.EXAMPLE_TOOL_CHOICES
    assert prompts.DEFAULT_EXAMPLE_TOOL == conventions.DEFAULT_EXAMPLE_TOOL
    code = (
        "import sys, textagent.cli\n"
        "print(sorted(m for m in sys.modules if m == 'requests' or m.startswith('textagent.backends.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['textagent.backends.base', 'textagent.backends.factory']"


# -- h66: chat's refused questions and SIGTERM, --ctx-size, input that ended in a traceback ---------------
_TOO_LONG = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it"}}
_TOO_LONG_SIZED = {
    "error": {
        "code": 400,
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9001,
        "n_ctx": 8192,
        "message": "request (9001 tokens) exceeds the available context size (8192 tokens), try increasing it",
    }
}


@pytest.mark.parametrize("refusal, size", [(_TOO_LONG, 4096), (_TOO_LONG_SIZED, 8192)])
def test_chat_drops_a_question_the_server_refused_and_names_the_context_and_reset(
    server, capsys, monkeypatch, refusal, size
):
    server.json("/completion", completion("ANSWER: 408"))
    server.add("/completion", status=400, json=refusal)
    server.json("/completion", completion("ANSWER: fine"))
    server.json("/props", {"default_generation_settings": {"n_ctx": 4096}})  # asked when the refusal has no size
    _typed(monkeypatch, ["What's 17 times 24?", "a question too long " * 50, "And then?"])
    code, out, err = run_cli(capsys, "chat", "--endpoint", server.url, "--chat-format", "chatml")
    assert code == 0 and out.split() == ["408", "fine"]
    (said,) = [line for line in err.splitlines() if "context" in line]
    assert f"the model's context ({size} tokens)" in said and "question is dropped" in said and "/reset" in said
    last = server.bodies("/completion")[-1]["prompt"]
    assert "17 times 24" in last and "too long" not in last and "And then?" in last  # dropped, the rest kept


def test_chat_ctx_size_starts_the_embedded_server_with_that_context(capsys, monkeypatch):
    import textagent.local

    started = []

    class Server:
        def __init__(self, gguf, **options):
            started.append(options)

        def start(self):
            raise TextagentError("stand-in server: not started")

        def stop(self):
            pass

    monkeypatch.setattr(textagent.local, "LocalServer", Server)
    monkeypatch.setattr(textagent.local, "running_server", lambda: {"url": "http://127.0.0.1:9"})
    code, _, err = run_cli(capsys, "chat", "--ctx-size", "16384")
    assert code == 1 and "stand-in server" in err and started[0]["ctx_size"] == 16384  # not `serve`'s server
    with pytest.raises(SystemExit) as exit_:
        main(["chat", "--endpoint", "http://127.0.0.1:9", "--ctx-size", "4096"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--ctx-size sizes the embedded server" in err


def test_sigterm_during_a_chat_question_ends_the_session_and_its_server(server, capsys, monkeypatch):
    import signal
    import time

    from textagent.agent import Agent
    from textagent.endpoint import Endpoint

    def killed(self, task):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here
        pytest.fail("SIGTERM did not end the question")

    stopped = []
    real_stop = Endpoint.stop
    monkeypatch.setattr(Endpoint, "stop", lambda self: (stopped.append(self), real_stop(self)))
    monkeypatch.setattr(Agent, "run", killed)
    server.json("/completion", completion("ANSWER: never"))
    _typed(monkeypatch, ["first?", "second?"])
    before = signal.getsignal(signal.SIGTERM)
    code, out, err = run_cli(capsys, "chat", "--endpoint", server.url, "--chat-format", "chatml")
    assert code == 130 and "terminated" in err and "dropped" not in err and out == ""
    assert stopped and server.requests == [] and signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--mcp", 'python "server.py --api-key sk-1'], "argument --mcp: cannot be split like a shell's command line"),
        (["--mcp", " "], "argument --mcp: --mcp is empty"),
        (["--temperature", "nan"], "argument --temperature: must be a finite number from 0 (got nan)"),
        (["--temperature", "inf"], "argument --temperature: must be a finite number from 0 (got inf)"),
        (["--temperature", "-1"], "argument --temperature: must be a finite number from 0 (got -1)"),
    ],
)
def test_a_bad_mcp_command_or_temperature_is_a_one_line_usage_error(server, capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--endpoint", server.url, *argv, "q"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and says in err and "Traceback" not in err and "sk-1" not in err
    assert server.requests == []


@pytest.mark.parametrize("answer_chars", [10, 1_000_000])
def test_parse_into_a_pipe_closed_early_ends_quietly(tmp_path, answer_chars):
    """`textagent parse FILE | head -c 5`: the reader leaves before (or while) the JSON is written."""
    reply = tmp_path / "reply.txt"
    reply.write_text("ANSWER: " + "x" * answer_chars)
    proc = subprocess.Popen(
        [sys.executable, "-m", "textagent", "parse", str(reply)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    if answer_chars > 10:
        assert proc.stdout.read(5) == b'{"cal'
    proc.stdout.close()  # the short one: closed before the process writes anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""


# -- one stack stops what a command started ------------------------------------------------------------


def test_a_run_stops_what_it_started_in_reverse_order_and_puts_the_sigterm_handler_back(server, capsys, monkeypatch):
    import contextlib
    import signal

    import textagent.tools.mcp
    from textagent.endpoint import Endpoint

    events = []

    @contextlib.contextmanager
    def mcp_tools(*commands, prefix=None):
        events.append("mcp started")
        yield demo.demo_tools()
        events.append("mcp stopped")

    real_stop = Endpoint.stop
    monkeypatch.setattr(Endpoint, "stop", lambda self: (events.append("endpoint stopped"), real_stop(self)))
    monkeypatch.setattr(textagent.tools.mcp, "mcp_tools", mcp_tools)
    server.json("/completion", completion("ANSWER: 4"))
    before = signal.getsignal(signal.SIGTERM)
    code, out, _ = run_cli(
        capsys, "run", "--mcp", "python server.py", "--endpoint", server.url, "--chat-format", "chatml", "2+2?"
    )
    assert code == 0 and out.strip() == "4"
    # started: MCP servers, then the endpoint; stopped the other way round, the handler last
    assert events == ["mcp started", "endpoint stopped", "mcp stopped"]
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_endpoint_that_fails_to_open_is_stopped_all_the_same(capsys, monkeypatch):
    import signal

    from textagent.endpoint import Endpoint

    stopped = []

    def fail(self):
        raise TextagentError("the model would not load")

    monkeypatch.setattr(Endpoint, "open", fail)
    monkeypatch.setattr(Endpoint, "stop", lambda self: stopped.append(self))
    before = signal.getsignal(signal.SIGTERM)
    code, _, err = run_cli(capsys, "run", "--endpoint", "http://127.0.0.1:9", "q?")
    assert code == 1 and "the model would not load" in err
    assert len(stopped) == 1 and signal.getsignal(signal.SIGTERM) == before


def test_serve_stops_its_server_and_forgets_it_through_the_same_stack(capsys, monkeypatch):
    import signal

    import textagent.local

    events = []

    class Server:
        def __init__(self, gguf, **options):
            pass

        def start(self):
            raise TextagentError("no llama-server")

        def stop(self):
            events.append("stopped")

    monkeypatch.setattr(textagent.local, "LocalServer", Server)
    monkeypatch.setattr(textagent.local, "clear_state", lambda: events.append("forgotten"))
    before = signal.getsignal(signal.SIGTERM)
    code, _, err = run_cli(capsys, "serve")
    assert code == 1 and "no llama-server" in err
    assert events == ["stopped", "forgotten"] and signal.getsignal(signal.SIGTERM) == before


def test_retry_reaches_the_agent_of_run(server, capsys):
    # the same unknown tool twice, then an answer: under --retry grammar the reply after a failure
    # is asked under the tool set's grammar
    for text in ['TOOL: teleport ARGS: {"to": "Paris"}', 'TOOL: teleport ARGS: {"to": "Paris"}', "ANSWER: done"]:
        server.json("/completion", completion(text))
    code, out, _ = run_cli(
        capsys, "run", "--endpoint", server.url, "--chat-format", "chatml", "--json", "--retry", "grammar", "q"
    )
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["answer"] == "done"
    bodies = server.bodies("/completion")
    assert "grammar" not in bodies[0] and "grammar" in bodies[1]


def test_an_unknown_retry_part_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--retry", "harder", "q"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unknown retry part 'harder'" in err and "Traceback" not in err
