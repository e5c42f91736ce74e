"""bench/bfcl/prompt_mode.py: BFCL's prompt, its decoder, and the zero-retry loop."""

from __future__ import annotations

import json
import time

import pytest

from textagent import Agent, ScriptedBackend
from textagent.bench.baseline import AGENT_OPTIONS
from textagent.bench.bfcl.prompt_mode import BfclPromptMode, DecodeError, decode, system_prompt
from textagent.bench.bfcl.schema import make_tools

DOCS = [
    {
        "name": "spotify.play",
        "description": "Play.",
        "parameters": {
            "type": "dict",
            "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
            "required": ["artist", "duration"],
        },
    }
]


def test_system_prompt_is_bfcls_default() -> None:
    text = system_prompt(DOCS)
    assert text.startswith("You are an expert in composing functions.You are given a question")
    assert (
        "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)].  You "
        "SHOULD NOT include any other text in the response." in text
    )
    assert text.endswith(
        "Here is a list of functions in json format that you can invoke.\n" + json.dumps(DOCS, indent=4) + "\n"
    )


@pytest.mark.parametrize(
    "reply, calls",
    [
        (
            '[spotify.play(artist="A", duration=20), spotify.play(artist="B", duration=15)]',
            [("spotify.play", {"artist": "A", "duration": 20}), ("spotify.play", {"artist": "B", "duration": 15})],
        ),
        ('spotify.play(artist="A", duration=20)', [("spotify.play", {"artist": "A", "duration": 20})]),
        (
            "`[f(x=2**3, y=-1.5, z=[1, 'a'], w={'k': (1, 2)}, v=None, u=g(a=1))]`",
            [("f", {"x": 8, "y": -1.5, "z": [1, "a"], "w": {"k": (1, 2)}, "v": None, "u": {"g": {"a": 1}}})],
        ),
        ("[f(name=somevar, call=len(x))]", [("f", {"name": "somevar", "call": "len(x)"})]),
        ("[]", []),
    ],
)
def test_decode_reads_as_bfcl_does(reply: str, calls: list) -> None:
    assert decode(reply) == calls


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot answer that with these functions.",
        "```python\n[f(a=1)]\n```",  # BFCL strips backticks, not the language tag: not decodable
        "[f(a=1), 3]",
        "[f(a=__import__('os').system('true'))]",  # never evaluated, read as text ... but not a list of calls
    ],
)
def test_decode_refuses_what_bfcl_cannot_decode(reply: str) -> None:
    if "__import__" in reply:
        assert decode(reply) == [("f", {"a": "__import__('os').system('true')"})]
        return
    with pytest.raises(DecodeError):
        decode(reply)


def test_decode_does_not_compute_huge_powers() -> None:
    with pytest.raises(DecodeError):
        decode("[f(x=10**100000)]")


def test_decode_bounds_the_result_of_arithmetic_not_only_the_exponent() -> None:
    """Hardening h66, 21: ``((9**512)**512)**512`` (27 characters) never finished, a fourth level
    ran out of memory; ``(9**512)**512`` decoded to 250,000 digits the call's JSON cannot hold."""
    assert decode("[f(x=(9**512)**8)]")[0][1]["x"] == 9**4096  # 3,909 digits: within the bound
    started = time.monotonic()
    for reply in (
        "[f(x=(9**512)**512)]",
        "[f(x=((9**512)**512)**512)]",
        "[f(x=(((9**512)**512)**512)**512)]",
        "[f(x=(2**512)**27*(2**512)**27)]",
    ):
        with pytest.raises(DecodeError, match="number too large"):
            decode(reply)
    assert time.monotonic() - started < 1
    for reply in ("[f(x=1/0)]", "[f(x=5%0)]", "[f(x=(9**512)**-2)]"):  # BFCL's eval fails on these too
        with pytest.raises(DecodeError, match="cannot evaluate"):
            decode(reply)
    # in the loop: a reply that does not decode, never an exception out of the step
    tools, _ = make_tools(DOCS)
    backend = ScriptedBackend(['[spotify.play(artist="A", duration=(9**512)**512)]', "never asked"])
    result = run_bfcl_prompt(backend, tools, "Play A.", functions=DOCS)
    assert result.stop_reason == "answer" and result.steps[0].details["bfcl_decode"] == "number too large"


def run_bfcl_prompt(backend, tools, task, *, functions, **kw):
    return Agent(backend, tools, mode=BfclPromptMode(functions), chat_format="chatml", **AGENT_OPTIONS, **kw).run(task)


def test_loop_runs_calls_then_takes_a_reply_without_calls_as_the_answer() -> None:
    tools, _ = make_tools(DOCS)
    backend = ScriptedBackend(['[spotify.play(artist="A", duration=20)]', "Playing A now."])
    result = run_bfcl_prompt(backend, tools, "Play A for 20 minutes.", functions=DOCS, max_steps=4)
    assert result.stop_reason == "answer" and result.answer == "Playing A now."
    assert [(o.name, o.ok) for o in result.steps[0].outcomes] == [("spotify.play", True)]
    assert result.steps[0].details["bfcl_decode"] == "ok"
    # the result as BFCL's Qwen handler shows a tool message: in <tool_response> tags in a user turn
    assert "<|im_start|>user\n<tool_response>\n" in backend.prompts[1]


def test_an_undecodable_reply_ends_the_run_without_retry() -> None:
    tools, _ = make_tools(DOCS)
    backend = ScriptedBackend(["Sure! spotify.play(artist=A", "never asked"])
    result = run_bfcl_prompt(backend, tools, "Play A.", functions=DOCS)
    assert result.stop_reason == "answer" and len(result.steps) == 1
    assert result.steps[0].details["bfcl_decode"].startswith("not a Python list of calls")
