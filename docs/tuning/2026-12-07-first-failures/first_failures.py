"""Each failed item's first wrong turn in a multi-turn run, against BFCL's ground truth: what its
calls were (no call; some of the turn's calls left out; other tools than the truth's; the truth's
tools with other values or more calls) and whether a call result of that turn reported an error.

    python docs/tuning/2026-12-07-first-failures/first_failures.py RUN_FOLDER [--each]
"""

from __future__ import annotations

import collections
import gzip
import json
import sys
from pathlib import Path

from textagent.bench.bfcl.multi_turn import load_multi_turn


def _kind(truth: list[str], executed: list[str]) -> str:
    want = [c.split("(")[0] for c in truth]
    got = [c.split("(")[0] for c in executed]
    if not got:
        return "no call"
    if set(want) <= set(got) and len(got) >= len(want):
        return "the truth's tools, other values or more calls"
    if set(got) & set(want) and (set(got) < set(want) or len(got) < len(want)):
        return "some of the turn's calls left out"
    return "other tools than the truth's"


def _errors(episode: dict, turn: int) -> bool:
    starts = [i for i, t in enumerate(episode["trace"]) if t["type"] == "start"]
    end = starts[turn + 1] if turn + 1 < len(starts) else None
    steps = [t for t in episode["trace"][starts[turn] : end] if t["type"] == "step"]
    return any(o.get("error") or '"error"' in str(o.get("output", ""))[:30] for s in steps for o in s["outcomes"])


def main(folder: str, each: bool) -> None:
    items = {i.id: i for i in load_multi_turn("multi_turn_base")}
    kinds: collections.Counter[tuple[str, bool]] = collections.Counter()
    with gzip.open(Path(folder) / "episodes.jsonl.gz", "rt") as f:
        episodes = [json.loads(line) for line in f]
    for e in episodes:
        mt = e["multi_turn"]
        turn = mt["turns_right"]
        if turn >= mt["turns"]:
            continue
        truth = list(items[e["task"]].ground_truth[turn])
        executed = [c for step in mt["executed"][turn] for c in step if isinstance(c, str)]
        kind = _kind(truth, executed)
        kinds[(kind, _errors(e, turn))] += 1
        if each:
            print(e["task"], turn, "truth:", truth, "ran:", executed)
    for (kind, errors), n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"{n:3d}  {kind}; {'a result reported an error' if errors else 'no result reported an error'}")


if __name__ == "__main__":
    main(sys.argv[1], "--each" in sys.argv[2:])
