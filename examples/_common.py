"""Shared plumbing of the seed examples: pick a backend from the command line and run a task."""

from __future__ import annotations

import argparse
import sys

from textagent import Agent, ScriptedBackend
from textagent.backends import connect
from textagent.local import running_server
from textagent.templates import format_from_renderer
from textagent.toolkits.demo import demo_tools


def main(task: str, scripted_replies: list[str], argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Run the seed scenario: {task!r}")
    parser.add_argument("--endpoint", help="a llama.cpp server URL (default: the one `textagent serve` runs)")
    parser.add_argument("--scripted", action="store_true", help="replay canned model replies (no server needed)")
    args = parser.parse_args(argv)
    if args.scripted:
        backend, chat_format = ScriptedBackend(scripted_replies), "chatml"
    else:
        url = args.endpoint or (running_server() or {}).get("url")
        if not url:
            print(
                "No server to talk to. Start one with `textagent serve` (in another terminal), "
                "pass --endpoint http://host:port of a llama.cpp server, or use --scripted.",
                file=sys.stderr,
            )
            return 2
        backend = connect("llamacpp", url)
        chat_format = format_from_renderer(backend.apply_template)

    def show(step):
        for o in step.outcomes:
            print(f"  step {step.index}: calling {o.name}({o.args}) -> {o.output}")
        if step.parse_error is not None:
            print(f"  step {step.index}: format error: {step.parse_error.message}")

    result = Agent(backend, demo_tools(), chat_format=chat_format, on_step=show, temperature=0.0, seed=0).run(task)
    print(f"Agent ({result.stop_reason}): {result.answer}")
    return 0 if result.ok else 1
