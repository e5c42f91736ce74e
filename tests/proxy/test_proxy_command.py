"""`textagent proxy` as a process: it listens, serves the official openai SDK, logs each request
as a JSON line, writes traces, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("uvicorn")

from httpfake import FakeServer  # noqa: E402


def test_the_command_serves_the_openai_sdk(tmp_path):
    with FakeServer() as upstream:
        upstream.json("/health", {"status": "ok"}, repeat=True)
        upstream.json("/completion", {"content": 'TOOL: add ARGS: {"a": 2, "b": 3}', "stop_type": "eos"})
        env = {**os.environ, "TEXTAGENT_PROXY_API_KEY": "k"}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "textagent",
                "proxy",
                "--endpoint",
                upstream.url,
                "--chat-format",
                "chatml",
                "--port",
                "0",
                "--parallel",
                "1",
                "--trace",
                str(tmp_path / "traces"),
            ],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            # Generous bounds: on a loaded 2-core machine the first import of the server stack
            # alone can take tens of seconds; these guard against a hang, they time nothing.
            deadline = time.monotonic() + 120
            url = None
            while url is None and time.monotonic() < deadline:
                line = proc.stderr.readline()
                assert line, "the proxy exited before listening"
                if "listening on " in line:
                    url = line.split("listening on ")[1].split()[0]
            assert url is not None, "the proxy did not say where it listens within 120 s"
            client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=120)
            tools = [
                {
                    "type": "function",
                    "function": {
                        "name": "add",
                        "parameters": {
                            "type": "object",
                            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                            "required": ["a", "b"],
                        },
                    },
                }
            ]
            reply = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "2+3?"}], tools=tools
            )
            call = reply.choices[0].message.tool_calls[0]
            assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0
        logged = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        assert [(r["path"], r["status"]) for r in logged] == [("/v1/chat/completions", 200), ("/v1/models", 401)]
        assert logged[0]["repairs"] == 0 and logged[0]["id"] == reply.id
        assert (tmp_path / "traces" / f"{reply.id}.json").exists()


@pytest.mark.parametrize(
    "value, says",
    [
        ("a", "'a' is not a slot number"),
        ("-1", "slot -1 is negative"),
        ("0,0", "slot 0 is given twice"),
    ],
)
def test_bad_slots_are_one_line_usage_errors(capsys, value, says):
    from textagent.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["proxy", "--endpoint", "http://127.0.0.1:9", "--slots", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"argument --slots: {says}" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "said", "code"),
    [
        (["--api", "completions"], "--api completions needs --endpoint", 1),
        (["--api", "ollama"], "--api ollama needs --endpoint", 1),
        (["--api", "ollama", "--endpoint", "http://127.0.0.1:9", "--mode", "constrained"], "needs a llama.cpp", 1),
        (["--max-repairs", "-1"], "--max-repairs must be 0 or more", 1),
        (["--endpoint", "http://127.0.0.1:9", "--server-arg=--poll"], "size the embedded server", 2),
    ],
)
def test_options_that_do_not_go_together_are_refused_before_anything_starts(monkeypatch, capsys, argv, said, code):
    from textagent.proxy.cli import main

    for name in ("OPENAI_BASE_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.startswith("textagent proxy: ") and said in err and err.count("\n") == 1


def test_a_trace_folder_that_cannot_be_made_is_refused(tmp_path, capsys):
    from textagent.proxy.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--endpoint", "http://127.0.0.1:9", "--trace", str(blocker / "traces")]) == 1
    assert f"--trace {blocker / 'traces'}: " in capsys.readouterr().err


def test_retry_options_reach_the_proxys_repair_loop(capsys):
    from textagent.proxy.cli import build_parser, proxy_config
    from textagent.retry import Retry

    args = build_parser().parse_args(["--retry", "grammar, rewind", "--retry-temperature", "0.5"])
    assert proxy_config(args, None).retry == Retry(grammar=True, rewind=True, rewind_temperature=0.5)
    assert proxy_config(build_parser().parse_args([]), None).retry == Retry()  # none by default
    odds = build_parser().parse_args(["--retry", "odds", "--retry-odds", "0.3"])
    assert proxy_config(odds, None).retry == Retry(odds=0.3)
    verify = build_parser().parse_args(["--retry", "odds,verify", "--retry-verify", "0.7"])
    assert proxy_config(verify, None).retry == Retry(odds=0.1, verify=0.7)
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--retry", "louder"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unknown retry part 'louder'" in err and "Traceback" not in err
