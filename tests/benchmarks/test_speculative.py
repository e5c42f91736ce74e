"""The speculative-decoding measurement: configs, server arguments, the table (no server here)."""

from __future__ import annotations

import pytest

from benchmarks import speculative as S


def test_configs_parse_and_become_server_arguments():
    assert S.server_args(S.parse_config("none"), None) == []
    draft = S.parse_config("draft")
    assert draft.draft_max == S.DEFAULT_DRAFT_MAX
    args = S.server_args(S.parse_config("draft:3"), "/m/small.gguf")
    # -md alone loads the draft model without using it: the type is named too
    assert args[:4] == ["--spec-type", "draft-simple", "-md", "/m/small.gguf"]
    assert args[args.index("--spec-draft-n-max") + 1] == "3"
    assert S.server_args(S.parse_config("ngram-simple"), None) == ["--spec-type", "ngram-simple"]
    with pytest.raises(ValueError, match="draft model path"):
        S.server_args(draft, None)
    for bad in ("draft:x", "draft:0", "eagle", ""):
        with pytest.raises(ValueError):
            S.parse_config(bad)


def test_main_refuses_an_unknown_config(capsys):
    assert S.main(["--configs", "none,turbo"]) == 2
    assert "unknown config 'turbo'" in capsys.readouterr().err


def reply(task, text, seconds, n=50, ms=2000.0, drafted=0, accepted=0, ok=True):
    return S.ReplyStats(
        task,
        text,
        ok,
        seconds,
        predicted_n=n,
        predicted_ms=ms,
        prompt_n=400,
        prompt_ms=4000,
        draft_n=drafted,
        draft_accepted=accepted,
    )


def test_table_compares_every_config_with_the_first():
    none = S.ConfigResult("none", [], [reply("a", "TOOL: f", 8.0), reply("b", "TOOL: g", 6.0, ok=False)])
    draft = S.ConfigResult(
        "draft:3",
        ["--spec-type", "draft-simple", "-md", "/x/small.gguf"],
        [
            reply("a", "TOOL: f", 4.0, ms=1000, drafted=60, accepted=45),
            reply("b", "TOOL: h", 3.0, ms=1000, drafted=40, accepted=30),
        ],
    )
    broken = S.ConfigResult("ngram-mod", ["--spec-type", "ngram-mod"], [], error="server did not start: boom")
    table = S.render_table([none, draft, broken])
    rows = table.splitlines()
    assert rows[2].startswith("| none | `—` | 25.0 | 100.0 | 7.00 | 1.00× | — | 1/2 | 2/2 |")
    # twice as fast, 75 % of 100 drafted tokens accepted, one reply changed, the model's path shortened
    assert rows[3] == (
        "| draft:3 | `--spec-type draft-simple -md small.gguf` | 50.0 | 100.0 | 3.50 | 2.00× | 75% of 100 | 2/2 | 1/2 |"
    )
    assert "server did not start: boom" in rows[4]


def test_measure_reads_each_first_reply_from_the_episode_trace(monkeypatch):
    """measure() on a scripted llama.cpp server: the reply's text, token counts and the server's
    draft figures come from the episode's own trace."""
    import functools

    from httpfake import FakeServer

    import textagent.local
    from textagent.bench import backends as B
    from textagent.bench.tasks import load_tasks

    with FakeServer() as srv:
        srv.json(
            "/completion",
            {
                "content": 'TOOL: calculate ARGS: {"expression": "17 * 24"}',
                "stop_type": "word",
                "stopping_word": "\nOBSERVATION:",
                "tokens_evaluated": 500,
                "timings": {
                    "prompt_n": 420,
                    "prompt_ms": 4200.0,
                    "predicted_n": 18,
                    "predicted_ms": 600.0,
                    "draft_n": 12,
                    "draft_n_accepted": 9,
                },
            },
            repeat=True,
        )

        class Server:
            def __init__(self, *args, **kwargs):
                self.url = srv.url

            def start(self):
                return self

            def stop(self):
                pass

        monkeypatch.setattr(textagent.local, "LocalServer", Server)
        # a named chat format: the scripted server has no chat template to render
        monkeypatch.setattr(B, "BackendFactory", functools.partial(B.BackendFactory, chat_format="chatml"))
        config = S.parse_config("ngram-simple")
        result = S.measure(
            config,
            [next(t for t in load_tasks() if t.id == "single-calc-mul")],
            model="m",
            draft_path=None,
            mode="text",
            threads=None,
            reply_tokens=64,
            progress=lambda _: None,
        )
    assert not result.error and len(result.replies) == 1
    got = result.replies[0]
    assert got.text.startswith("TOOL: calculate") and (got.predicted_n, got.prompt_n) == (18, 420)
    assert (got.draft_n, got.draft_accepted, got.prompt_ms) == (12, 9, 4200.0)
