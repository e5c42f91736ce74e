"""The composition at each verify threshold (dev): an item takes the odds run's first reply where the
odds began it (at 0.05) and the probe's share of yes reaches the threshold, the paired run's otherwise.

    python docs/tuning/2026-12-07-verify/compose.py probe-1.5b.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from textagent.bench.paired import mcnemar_exact

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("odds_compose", HERE.parent / "2026-12-06-odds" / "compose.py")
assert _spec is not None and _spec.loader is not None
odds = importlib.util.module_from_spec(_spec)
sys.modules["odds_compose"] = odds  # its dataclass looks its module up
_spec.loader.exec_module(odds)


def main(probe_file: str) -> None:
    with open(HERE / probe_file) as f:
        probe = {(r[0], r[1]): r[-1] for r in json.load(f)}
    for pair in ("O15u:U0b", "O15:D0b"):
        begun_run, paired_run = pair.split(":")
        begun, paired = odds._by_task(begun_run), odds._by_task(paired_run)
        print("##", pair)
        for level in (None, 0.0, 0.6, 0.7, 0.75, 0.8, 0.85):
            t = odds.Tally()
            for task, e in begun.items():
                base = paired.get(task)
                if base is None:
                    continue
                kept = level is not None and odds._would_begin(e, 0.05) and probe.get((begun_run, task), -1) >= level
                t.add(e if kept else base, base, kept)
            p = mcnemar_exact(t.won, t.lost)
            print(
                f"V={level}: begun {t.begun} right {t.right} won/lost {t.won}/{t.lost} p={p:.3g} "
                f"skipped {t.skipped} irr {t.irrelevance} claims {t.claims}"
            )


if __name__ == "__main__":
    main(sys.argv[1])
