"""A run with the claims check, and the same run without it: each episode cut at its first
answer the check sent back, that answer taken as final (the loop without the check takes it;
the replies before it are the same replies). Prints both side by side and the paired test.

    python docs/tuning/2026-12-05-claims/without.py RUN_DIR [--answers]
"""

from __future__ import annotations

import gzip
import json
import sys
from math import comb
from pathlib import Path
from types import SimpleNamespace

from textagent.bench.bfcl.data import load_category
from textagent.bench.bfcl.score import score_steps
from textagent.bench.metrics import copied_example, skipped_call


def _step(record):
    reply = None
    if not record.get("format_error"):
        calls = [SimpleNamespace(name=c["name"], args=c.get("args", {})) for c in record.get("calls") or []]
        reply = SimpleNamespace(calls=calls)
    outcomes = [
        SimpleNamespace(name=o["name"], args=o.get("args"), error=o.get("error")) for o in record.get("outcomes") or []
    ]
    return SimpleNamespace(reply=reply, outcomes=outcomes, details=record.get("details") or {})


def _mcnemar(won, lost):
    n = won + lost
    if n == 0:
        return 1.0
    k = min(won, lost)
    return min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n)


def main(run_dir, show_answers=False):
    gz = Path(run_dir) / "episodes.jsonl.gz"  # committed runs are gzipped; a fresh run may not be
    with gzip.open(gz, "rt") if gz.exists() else open(Path(run_dir) / "episodes.jsonl") as f:
        records = [json.loads(line) for line in f]
    items = {}
    for category in {r["kind"] for r in records}:
        items.update({i.id: i for i in load_category(category)})
    rows = []
    for r in records:
        steps = [t for t in r["trace"] if t["type"] == "step"]
        item = items[r["task"]]
        cut = next((i for i, s in enumerate(steps) if (s.get("details") or {}).get("sent_back")), None)
        with_scores = score_steps(item, [_step(s) for s in steps])
        assert with_scores["agent"]["valid"] == r["bfcl"]["agent"]["valid"], r["task"]  # the rescoring is the bench's
        kept = steps if cut is None else steps[: cut + 1]
        without_scores = score_steps(item, [_step(s) for s in kept])
        ran = lambda ss: {o["name"] for s in ss for o in s.get("outcomes") or []}  # noqa: E731
        answer_without = r["answer"] if cut is None else steps[cut].get("answer")
        rows.append(
            dict(
                task=r["task"],
                kind=r["kind"],
                fired=cut is not None,
                sent=(steps[cut]["details"]["sent_back"] if cut is not None else None),
                answer_with=r["answer"],
                answer_without=answer_without,
                copy_with=copied_example(r["answer"], ran(steps)),
                copy_without=copied_example(answer_without, ran(kept)),
                agent_with=with_scores["agent"]["valid"],
                agent_without=without_scores["agent"]["valid"],
                first=r["bfcl"]["first"]["valid"],
                skipped=skipped_call(r) and r["kind"] in ("simple_python", "multiple"),
                lost=cut is not None and r["answer"] is None,
            )
        )
    n = len(rows)
    print(f"{run_dir}: {n} episodes; the check fired in {sum(x['fired'] for x in rows)}")
    firsts = {}
    for x in rows:
        firsts[x["kind"]] = firsts.get(x["kind"], 0) + x["first"]
    print(
        f"first reply right: {sum(x['first'] for x in rows)}/{n} "
        f"({' / '.join(f'{k} {firsts[k]}' for k in sorted(firsts))}; the same with and without); "
        f"calls skipped where a tool fits (simple + multiple): {sum(x['skipped'] for x in rows)}"
    )
    print(f"answers lost to the step limit after a send-back: {sum(x['lost'] for x in rows)}")
    for label, key in (("without", "without"), ("with", "with")):
        by = {}
        for x in rows:
            by.setdefault(x["kind"], 0)
            by[x["kind"]] += x[f"agent_{key}"]
        kinds = " / ".join(f"{k} {by[k]}" for k in sorted(by))
        print(
            f"{label:8} agent view {sum(x[f'agent_{key}'] for x in rows)}/{n} ({kinds}); "
            f"final answers copying an example {sum(x[f'copy_{key}'] for x in rows)}"
        )
    won = sum(x["agent_with"] and not x["agent_without"] for x in rows)
    lost = sum(x["agent_without"] and not x["agent_with"] for x in rows)
    print(f"agent view, with - without: {won} won / {lost} lost, exact McNemar p = {_mcnemar(won, lost):.2f}")
    print("  won:", [x["task"] for x in rows if x["agent_with"] and not x["agent_without"]])
    print("  lost:", [x["task"] for x in rows if x["agent_without"] and not x["agent_with"]])
    if show_answers:
        for x in rows:
            if x["fired"]:
                print(f"\n{x['task']} [{x['sent']['found']}] agent {x['agent_without']} -> {x['agent_with']}")
                print(f"  without: {x['answer_without']!r}")
                print(f"  with:    {x['answer_with']!r}")


if __name__ == "__main__":
    main(sys.argv[1], "--answers" in sys.argv)
