"""Unknown-tool calls in multi-turn runs: how many name arguments that exactly one listed tool's
schema takes, and whether that tool is the closest name (what the error already said) or another.

    python docs/tuning/2026-12-07-args-hint/unknown_args.py RUN_FOLDER [RUN_FOLDER ...]
"""

from __future__ import annotations

import collections
import gzip
import json
import sys
from pathlib import Path

from textagent.bench.bfcl.multi_turn import load_multi_turn
from textagent.tools.execution import closest


def main(folders: list[str]) -> None:
    items = {i.id: i for i in load_multi_turn("multi_turn_base")}
    counts: collections.Counter[str] = collections.Counter()
    for folder in folders:
        with gzip.open(Path(folder) / "episodes.jsonl.gz", "rt") as f:
            episodes = [json.loads(line) for line in f]
        for e in episodes:
            if e["mode"] != "text":
                continue
            params = {
                fn["name"]: set((fn.get("parameters") or {}).get("properties") or {})
                for fn in items[e["task"]].functions
            }
            for step in (t for t in e["trace"] if t["type"] == "step"):
                for o in step.get("outcomes") or []:
                    if o.get("error") != "unknown_tool":
                        continue
                    counts["unknown-tool calls"] += 1
                    keys = set(o["args"]) if isinstance(o.get("args"), dict) else set()
                    fits = [name for name, p in params.items() if keys and keys <= p]
                    if len(fits) != 1:
                        continue
                    hint = closest(o["name"], params)
                    counts["one listed tool takes the arguments"] += 1
                    if fits[0] != hint:
                        counts["  and it is not the closest name"] += 1
                        counts["    no close name at all"] += hint is None
                        print(f"{folder}: {e['task']} `{o['name']}` closest {hint}, takes the arguments {fits[0]}")
    for key, n in counts.items():
        print(f"{n:4d}  {key}")


if __name__ == "__main__":
    main(sys.argv[1:])
