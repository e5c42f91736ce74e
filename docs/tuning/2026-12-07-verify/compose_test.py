"""A test run read composed: items the odds did not begin take the paired committed run's first reply,
so that only the begun items can differ (the committed runs loaded repacked weights; these did not).

    python docs/tuning/2026-12-07-verify/compose_test.py V15t ../../bench/2026-12-05-bfcl-1.5b-status-closest [MODE]

Prints, as run and as composed, against the paired run: first replies right (won / lost, exact
McNemar), on the calling categories and on irrelevance apart, calls skipped where a tool fits,
answers claiming a call that never ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

from textagent.bench.answers import called_tools, claimed_call, skipped_call
from textagent.bench.paired import mcnemar_exact
from textagent.bench.records import Episode
from textagent.bench.runner import load_episodes

HERE = Path(__file__).resolve().parent


def _by_task(folder: str, mode: str) -> dict[str, Episode]:
    return {e.task: e for e in load_episodes(HERE / folder / "episodes.jsonl.gz") if e.mode == mode}


def _right(e: Episode) -> bool:
    return e.bfcl is not None and e.bfcl.first.valid


def _begun(e: Episode) -> bool:
    steps = e.result.steps
    return bool(steps and steps[0].retry is not None and steps[0].retry.lead)


def _line(name: str, chosen: dict[str, Episode], paired: dict[str, Episode]) -> str:
    tasks = [t for t in chosen if t in paired]
    parts = []
    for label, keep in (
        ("all", lambda t: True),
        ("calling", lambda t: "irrelevance" not in str(paired[t].kind)),
        ("irrelevance", lambda t: "irrelevance" in str(paired[t].kind)),
    ):
        some = [t for t in tasks if keep(t)]
        won = sum(_right(chosen[t]) and not _right(paired[t]) for t in some)
        lost = sum(_right(paired[t]) and not _right(chosen[t]) for t in some)
        right = sum(_right(chosen[t]) for t in some)
        base = sum(_right(paired[t]) for t in some)
        parts.append(
            f"{label} {right} against {base} of {len(some)} ({won}/{lost}, p = {mcnemar_exact(won, lost):.3g})"
        )
    skipped = sum(skipped_call(chosen[t]) for t in tasks), sum(skipped_call(paired[t]) for t in tasks)
    claims = sum(claimed_call(chosen[t].answer, called_tools(chosen[t])) for t in tasks)
    return f"{name}: " + "; ".join(parts) + f"; skipped {skipped[0]} against {skipped[1]}; claims {claims}"


def main(run: str, paired_run: str, mode: str = "text", paired_mode: str = "text") -> None:
    ran, paired = _by_task(run, mode), _by_task(paired_run, paired_mode)
    composed = {t: (e if _begun(e) else paired.get(t, e)) for t, e in ran.items()}
    print(f"begun: {sum(map(_begun, ran.values()))} of {len(ran)}")
    print(_line("as run", ran, paired))
    print(_line("composed", composed, paired))


if __name__ == "__main__":
    main(*sys.argv[1:])
