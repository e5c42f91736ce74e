"""The seed scenarios in examples/ run as scripts (scripted replies; the real model is in test_integration)."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROOT = EXAMPLES.parent


def run_example(name, *args):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TEXTAGENT_CACHE": "/nonexistent-textagent-cache"}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    "name, expected",
    [
        ("calculator.py", ["calculate({'expression': '17 * 24'}) -> 408", "-> 508", "Agent (answer)"]),
        ("weather_coat.py", ["get_weather({'city': 'Paris'})", "take a coat"]),
        ("tokyo_light.py", ["multiply({'a': 25, 'b': 10}) -> 250", "toggle_light", "Agent (answer)"]),
    ],
)
def test_seed_example_runs(name, expected):
    proc = run_example(name, "--scripted")
    assert proc.returncode == 0, proc.stderr
    for text in expected:
        assert text in proc.stdout


def test_example_without_a_server_says_how_to_start_one():
    proc = run_example("calculator.py")
    assert proc.returncode == 2 and "textagent serve" in proc.stderr
