"""bench/bfcl/bounds.py and the Simulator's timeout path: no call of a model holds up the bench.

Hardening h66, 20: ``logarithm(precision=10**7)`` ran mpmath at ten million digits under the
simulators' one lock; the tool timed out but its thread kept the lock, so the episode and every
other worker waited for ever, and the scoring would have replayed the call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from textagent.backends.scripted import ScriptedBackend
from textagent.bench.bfcl import multi_turn as mt
from textagent.bench.bfcl.data import fetch_wheel
from textagent.bench.bfcl.episode import run_multi_turn, simulator_tools
from textagent.bench.episode import Settings
from textagent.protocol import ToolCall

_MATH_API = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api"


@pytest.fixture(scope="module")
def wheel():
    return fetch_wheel()


def _math_item(wheel) -> mt.MultiTurnItem:
    return next(i for i in mt.load_multi_turn("multi_turn_base", wheel=wheel) if "MathAPI" in i.involved_classes)


_HEAVY = """
import json, sys, time
from pathlib import Path
from textagent.bench.bfcl import multi_turn as mt
wheel = Path(sys.argv[1])
item = next(i for i in mt.load_multi_turn("multi_turn_base", wheel=wheel) if "MathAPI" in i.involved_classes)
with mt.Simulator(item, wheel=wheel) as sim:
    for name, args in json.loads(sys.argv[2]):
        started = time.monotonic()
        print(json.dumps([sim.execute(name, args), time.monotonic() - started]), flush=True)
"""


def test_calls_that_would_run_for_hours_answer_at_once(wheel) -> None:
    # in a process of its own: without the bounds each of these runs for hours (or exhausts memory)
    heavy = [
        ["logarithm", {"value": 980.0, "base": 20, "precision": 10**7}],
        ["logarithm", {"value": 980.0, "base": 20, "precision": "10000000"}],  # mpmath reads the string
        ["square_root", {"number": 2, "precision": 10**7}],
        ["power", {"base": 3, "exponent": 10**9}],
        ["round_number", {"number": 5, "decimal_places": -(10**9)}],
    ]
    done = subprocess.run(
        [sys.executable, "-c", _HEAVY, str(wheel), json.dumps(heavy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r for r, _ in results] == [
        '{"error": "Precision must be at most 1000 digits."}',
        '{"error": "Precision must be at most 1000 digits."}',
        '{"error": "Precision must be at most 1000 digits."}',
        '{"error": "The result would have more than 4300 digits."}',
        '{"result": 0}',  # what Python's round gives, without computing 10**(10**9) first
    ]
    assert all(seconds < 1 for _, seconds in results)


def test_sane_math_calls_are_bfcls_own(wheel) -> None:
    with mt.Simulator(_math_item(wheel), wheel=wheel) as sim:
        assert sim.execute("logarithm", {"value": 980.0, "base": 20, "precision": 10}) == (
            "{'result': mpf('2.299121531134')}"
        )
        assert sim.execute("square_root", {"number": 2, "precision": 1000}).startswith(
            "{'result': Decimal('1.41421356237309504880168872420969807856967187537694"
        )
        assert json.loads(sim.execute("power", {"base": 3, "exponent": 9000})) == {"result": 3**9000}  # 4,294 digits
        assert json.loads(sim.execute("round_number", {"number": 12345, "decimal_places": -2})) == {"result": 12300}
        assert "missing 1 required positional argument: 'precision'" in sim.execute(
            "logarithm", {"value": 2, "base": 2}
        )  # BFCL's own error for arguments the method does not take


@pytest.fixture
def stalled_mean(wheel, monkeypatch: pytest.MonkeyPatch):
    """MathAPI.mean made to hang until the test lets it go (at most 20 s), like a call that overruns."""
    mt.runtime(wheel)
    release = threading.Event()

    def mean(self, numbers):
        release.wait(20)
        return {"result": 0.0}

    monkeypatch.setattr(sys.modules[_MATH_API].MathAPI, "mean", mean)
    yield release
    release.set()


def test_a_call_past_its_timeout_holds_no_lock_and_is_not_replayed(wheel, stalled_mean) -> None:
    item = _math_item(wheel)
    with mt.Simulator(item, wheel=wheel) as sim, mt.Simulator(item, wheel=wheel) as other:
        executed: list[str] = []
        tools, _ = simulator_tools(item.functions, sim, executed)
        slow = tools.execute(ToolCall("mean", {"numbers": [1, 2]}), timeout=0.5, limit=None)
        assert not slow.ok and slow.error in ("timeout", "tool_error")
        assert executed == []  # a call that did not end is never replayed by the scoring
        # another episode's simulator is not held up by it
        started = time.monotonic()
        other_tools, _ = simulator_tools(item.functions, other, [])
        quick = other_tools.execute(ToolCall("add", {"a": 1, "b": 2}), timeout=5, limit=None)
        assert quick.ok and json.loads(quick.output) == {"result": 3} and time.monotonic() - started < 2
        # this episode's next call never runs beside the one still going, and says so in time
        again = tools.execute(ToolCall("add", {"a": 1, "b": 2}), timeout=0.5, limit=None)
        assert not again.ok and executed == []
        stalled_mean.set()
        after = tools.execute(ToolCall("add", {"a": 1, "b": 2}), timeout=5, limit=None)
        assert after.ok and executed == ["add(a=1,b=2)"]


def test_an_episode_with_a_call_past_its_timeout_ends_and_scores_without_it(wheel, stalled_mean) -> None:
    item = _math_item(wheel)
    replies = ['TOOL: mean ARGS: {"numbers": [1, 2]}', *["ANSWER: done"] * (len(item.turns) + 1)]
    started = time.monotonic()
    out = run_multi_turn(
        item, "text", ScriptedBackend(replies), chat_format="chatml", settings=Settings(), options={"tool_timeout": 0.5}
    ).to_record()
    assert time.monotonic() - started < 10  # the scoring did not replay the stalled call
    assert out["error"] is None and out["stop_reason"] == "answer"
    assert not any("mean(" in call for turn in out["multi_turn"]["executed"] for step in turn for call in step)
    assert out["calls"][0]["name"] == "mean" and not out["calls"][0]["ok"]
