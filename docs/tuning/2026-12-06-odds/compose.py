"""The rule's composition: for each threshold, every item takes the odds run's first reply where
its recorded odds reach the threshold (its likeliest first token not a call), the paired run's
otherwise; summed over the pairs given, per kind (never-tuned, BFCL dev), with the rule's counts.

    python docs/tuning/2026-12-06-odds/compose.py O15u:U0b O15:D0b O05u:U0 O05:D0

Each argument is ODDS_RUN:PAIRED_RUN, folders holding episodes.jsonl.gz (a bare name is looked
up beside this file, then in docs/tuning/2026-12-06-example-defaults/).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from textagent.bench.answers import called_tools, claimed_call, skipped_call
from textagent.bench.paired import mcnemar_exact
from textagent.bench.records import Episode
from textagent.bench.runner import load_episodes

LEVELS = (0.05, 0.1, 0.2, 0.3)
TUNED = {"simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"}
HERE = Path(__file__).resolve().parent
BESIDE = (HERE, HERE.parent / "2026-12-06-example-defaults")


@dataclass
class Tally:
    right: int = 0
    skipped: int = 0
    irrelevance: int = 0
    claims: int = 0
    begun: int = 0
    won: int = 0
    lost: int = 0

    def add(self, e: Episode, base: Episode, begun: bool) -> None:
        ok, base_ok = _right(e), _right(base)
        self.right += ok
        self.skipped += skipped_call(e)
        self.irrelevance += ok and "irrelevance" in str(e.kind)
        self.claims += claimed_call(e.answer, called_tools(e))
        self.begun += begun
        self.won += ok and not base_ok
        self.lost += base_ok and not ok


def _right(e: Episode) -> bool:
    return e.bfcl is not None and e.bfcl.first.valid


def _folder(name: str) -> Path:
    path = Path(name)
    if path.is_dir():
        return path
    for where in BESIDE:
        if (where / name).is_dir():
            return where / name
    raise SystemExit(f"no run folder {name}")


def _by_task(name: str) -> dict[str, Episode]:
    return {e.task: e for e in load_episodes(_folder(name) / "episodes.jsonl.gz") if e.mode == "text"}


def _odds(e: Episode) -> float | None:
    steps = e.result.steps
    facts = steps[0].retry if steps else None
    return facts.call_odds if facts is not None else None


def _would_begin(e: Episode, level: float) -> bool:
    """Would a run at ``level`` have begun this item's first reply? The odds run (at the lowest
    level) began it where its likeliest first token was not a call; a higher level, where the
    recorded odds reach it too."""
    odds, steps = _odds(e), e.result.steps
    return odds is not None and odds >= level and steps[0].retry is not None and bool(steps[0].retry.lead)


def main(pairs: list[str]) -> None:
    kinds: dict[str, dict[float | None, Tally]] = {"never-tuned": {}, "BFCL dev": {}}
    noise = [0, 0]  # items not begun, of them first replies that differ in validity from the paired run's
    for pair in pairs:
        odds_run, paired = (_by_task(n) for n in pair.split(":"))
        for task, e in odds_run.items():
            base = paired.get(task)
            if base is None:
                continue
            kind = "BFCL dev" if str(e.kind) in TUNED else "never-tuned"
            if not _would_begin(e, min(LEVELS)):
                noise[0] += 1
                noise[1] += _right(e) != _right(base)
            for level in (None, *LEVELS):
                begun = level is not None and _would_begin(e, level)
                kinds[kind].setdefault(level, Tally()).add(e if begun else base, base, begun)
    print(f"composition noise: {noise[1]} of {noise[0]} items not begun differ from the paired run\n")
    for kind, rows in kinds.items():
        print(f"## {kind}\n")
        print("| threshold | begun | first right | won / lost (p) | skipped | irrelevance right | claims |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for level, t in rows.items():
            name = "without" if level is None else f"{level:g}"
            p = mcnemar_exact(t.won, t.lost)
            print(
                f"| {name} | {t.begun} | {t.right} | {t.won} / {t.lost} (p = {p:.3g}) | {t.skipped} | "
                f"{t.irrelevance} | {t.claims} |"
            )
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
