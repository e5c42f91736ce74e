"""Where `--retry claims` acted: per item of run B with an answer kept out for a claim, the agent
view of B and of A (the same command without the part), A's and B's first replies, and what came
after the claim in B. Usage: python acted.py A_DIR B_DIR (each a bench run's folder)."""

from __future__ import annotations

import gzip
import json
import sys

from textagent.bench.records import Episode


def load(folder: str) -> dict[tuple[str, str, int], Episode]:
    with gzip.open(f"{folder}/episodes.jsonl.gz", "rt") as lines:
        episodes = [Episode.from_record(json.loads(line)) for line in lines]
    return {(e.task, e.mode, e.repeat): e for e in episodes}


def short(text: str | None, n: int = 110) -> str:
    return "-" if text is None else text[:n].replace("\n", " | ")


def main(a_dir: str, b_dir: str) -> None:
    a, b = load(a_dir), load(b_dir)
    won = lost = 0
    for key, episode in sorted(b.items()):
        steps = episode.result.steps
        at = next((i for i, s in enumerate(steps) if s.retry is not None and s.retry.claimed), None)
        if at is None or episode.bfcl is None:
            continue
        before = a.get(key)
        right_a = before is not None and before.bfcl is not None and before.bfcl.agent.valid
        right_b = episode.bfcl.agent.valid
        won, lost = won + (right_b and not right_a), lost + (right_a and not right_b)
        claimed = steps[at].retry.claimed if steps[at].retry else None
        print(f"{key[0]} ({key[1]}): agent view A {right_a}, B {right_b}; claimed {claimed} at reply {at + 1}")
        print(
            f"   A's reply {at + 1}: {short(before.result.steps[at].raw if before and len(before.result.steps) > at else None)}"
        )
        print(f"   B's reply {at + 1}: {short(steps[at].raw)}")
        print(f"   B's next:    {short(steps[at + 1].raw if at + 1 < len(steps) else None)}")
    print(f"B right where A was not: {won}; A right where B was not: {lost}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
