"""The probe (dev data only): does the model's own yes-or-no on "does this call do what the user asked
for?" separate the first calls the odds began that were right from those begun on irrelevance items?
For every first reply with a call in the committed odds runs (2026-12-06-odds), the check is asked of a
running llama-server, outside any conversation, and the share of yes among yes and no is kept.

    python docs/tuning/2026-12-07-verify/probe.py URL O15,O15u probe-1.5b.json   # the 1.5B served at URL
    python docs/tuning/2026-12-07-verify/probe.py URL O05u probe-0.5b.json       # the 0.5B

Each row: run, item, category, begun by the odds, an irrelevance item, the episode right, share of yes.
(The library's ``--retry verify`` asks the same words: prompts' retry_verify.)
"""

from __future__ import annotations

import gzip
import json
import math
import sys
import urllib.request
from pathlib import Path

from textagent.bench.bfcl.schema import make_tools
from textagent.bench.bfcl.tasks import bfcl_tasks, item_documents

HERE = Path(__file__).resolve().parent
NEVER_TUNED = "bfcl:simple_java,simple_javascript,live_simple,live_multiple,live_parallel,live_parallel_multiple,live_irrelevance,live_relevance"
RUNS = {
    "O15": "bfcl:simple_python,multiple,parallel,parallel_multiple,irrelevance",
    "O15u": NEVER_TUNED,
    "O05u": NEVER_TUNED,
}


def episodes(run: str) -> list[dict]:
    with gzip.open(HERE.parent / "2026-12-06-odds" / run / "episodes.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def share_of_yes(url: str, prompt: str) -> float:
    body = {"prompt": prompt, "n_predict": 1, "n_probs": 20, "temperature": 0, "cache_prompt": False}
    request = urllib.request.Request(
        url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        out = json.load(response)
    probs = out["completion_probabilities"][0]
    said: dict[str, float] = {}
    for t in probs.get("top_logprobs") or probs.get("top_probs"):
        word = t.get("token", "").strip().lower()
        said[word] = said.get(word, 0) + (math.exp(t["logprob"]) if "logprob" in t else t.get("prob", 0))
    yes, no = said.get("yes", 0), said.get("no", 0)
    return yes / (yes + no) if yes + no else float("nan")


def check(question: str, tool, call: str) -> str:
    description = (tool.description or "").strip().split("\n")[0][:300] if tool else ""
    user = (
        f"A user asked:\n{question}\n\nAn assistant answered by calling the tool `{call}`.\n"
        f"The tool {tool.name if tool else '?'}: {description}\n\n"
        "Does this tool call do what the user asked for? Answer yes or no."
    )
    return (
        "<|im_start|>system\nYou check an assistant's work.<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def main(url: str, runs: list[str], out: str) -> None:
    rows = []
    for run in runs:
        tasks = {t.id: t for t in bfcl_tasks(RUNS[run], progress=lambda _: None)}
        for d in episodes(run):
            steps = [t for t in d["trace"] if t["type"] == "step"]
            task = tasks.get(d["task"])
            if not steps or not steps[0].get("calls") or task is None:
                continue
            tools, _ = make_tools(item_documents(task.bfcl), native=False)
            first = steps[0]["calls"][0]
            begun = bool(((steps[0].get("details") or {}).get("retry") or {}).get("lead"))
            p = share_of_yes(
                url, check(task.question, tools.get(first["name"]), f"{first['name']}({json.dumps(first['args'])})")
            )
            rows.append((run, d["task"], d["kind"], begun, "irrelevance" in d["kind"], d["success"], round(p, 3)))
            print(rows[-1], flush=True)
    with open(HERE / out, "w") as f:
        json.dump(rows, f, indent=0)
    for label, keep in (
        ("begun, irrelevance", lambda r: r[3] and r[4]),
        ("begun, not irrelevance, right", lambda r: r[3] and not r[4] and r[5]),
        ("begun, not irrelevance, wrong", lambda r: r[3] and not r[4] and not r[5]),
        ("the model's own call, irrelevance", lambda r: not r[3] and r[4]),
        ("the model's own call, right", lambda r: not r[3] and not r[4] and r[5]),
        ("the model's own call, wrong", lambda r: not r[3] and not r[4] and not r[5]),
    ):
        shares = sorted(r[-1] for r in rows if keep(r))
        print(label, len(shares), "median", shares[len(shares) // 2] if shares else None, shares)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2].split(","), sys.argv[3])
