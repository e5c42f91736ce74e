#!/usr/bin/env python3
"""Cold and warm `textagent run` of the seed scenarios against the machine's limit, in one run.

    python docs/perf/seed_timing.py [--out docs/perf/seed-timing.md] [--gguf qwen2.5-coder-1.5b]

For each seed question, as whole processes (what a user waits for):

* **cold, no prefix cache**: no server running, `--no-prefix-cache`: the server starts, loads the
  model and evaluates the whole prompt;
* **cold**: no server running, the fixed prefix restored from the prefix cache (its file made by
  a first run that is not timed);
* **warm**: a `textagent serve` already up (the model loaded), the prefix restored.

The **limit** is what the run's own tokens must take on this machine: its prompt tokens
evaluated at the server's prompt rate plus its tokens generated at the server's generation
rate, both measured on the same server in the same run (a 1,024-token prompt evaluated, 128
tokens generated). Each figure is the median of ``--repeat`` runs. Needs an idle machine: every
number here is CPU time on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

QUESTIONS = {
    "calculator": "What's 17 times 24, then add 100?",
    "weather_coat": "What's the weather in Paris, and should I take a coat?",
    "tokyo_light": "Get the weather in Tokyo, multiply the temperature by 10, and then turn off the kitchen light.",
}
_TIME = re.compile(
    r"^time: (?P<total>[\d.]+) s: (?P<parts>.*) \((?P<evaluated>\d+) prompt tokens evaluated, "
    r"(?P<cached>\d+) cached, (?P<generated>\d+) generated\)$",
    re.M,
)


def run(question: str, *extra: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(
        ["textagent", "run", "-v", *extra, question], capture_output=True, text=True, timeout=600, check=False
    )
    wall = time.perf_counter() - started
    found = _TIME.search(proc.stderr)
    if proc.returncode != 0 or not found:
        sys.exit(f"textagent run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    parts = dict(
        (name.strip(), float(sec)) for name, sec in re.findall(r"([a-z -]+?) ([\d.]+) s(?:, |$)", found["parts"])
    )
    return {
        "wall": wall,
        "parts": parts,
        "evaluated": int(found["evaluated"]),
        "generated": int(found["generated"]),
        "answer": proc.stdout.strip(),
    }


def rates(url: str) -> tuple[float, float]:
    """Prompt and generation tokens per second of the server at ``url``, measured now."""

    def post(body: dict) -> dict:
        req = urllib.request.Request(
            url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=600) as resp:
            return json.load(resp)

    words = " ".join(f"w{i}" for i in range(700))  # ~1,000 tokens, never seen before (no cache)
    t = post({"prompt": f"{time.time()} {words}", "n_predict": 0, "cache_prompt": False})["timings"]
    pp = t["prompt_n"] / (t["prompt_ms"] / 1000)
    t = post({"prompt": "Count from 1 to 200:", "n_predict": 128, "temperature": 0, "ignore_eos": True})["timings"]
    return pp, t["predicted_n"] / (t["predicted_ms"] / 1000)


def median(rows: list[dict], key) -> float:
    return statistics.median(key(r) for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/perf/seed-timing.md")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env_clean = subprocess.run(["textagent", "cache", "clear"], capture_output=True, text=True, check=True).stdout
    print(env_clean.strip(), file=sys.stderr)
    results: dict[str, dict[str, list[dict]]] = {}
    for name, q in QUESTIONS.items():
        rows = results.setdefault(name, {})
        rows["cold, no prefix cache"] = [run(q, "--no-prefix-cache") for _ in range(args.repeat)]
        run(q)  # makes the prefix file (not timed)
        rows["cold"] = [run(q) for _ in range(args.repeat)]
    serve = subprocess.Popen(["textagent", "serve"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = serve.stdout.readline().strip()
        pp, tg = rates(url)
        for name, q in QUESTIONS.items():
            results[name]["warm"] = [run(q) for _ in range(args.repeat)]
    finally:
        serve.terminate()
        serve.wait(30)
    lines = [
        "# Seed scenarios: cold and warm runs against the machine's limit",
        "",
        f"Made by `python docs/perf/seed_timing.py` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"the default model; medians of {args.repeat} runs. The server's own rates, measured in the same run: "
        f"prompt {pp:.0f} tokens/s, generation {tg:.1f} tokens/s. **limit** = the run's prompt tokens "
        "evaluated / prompt rate + its tokens generated / generation rate.",
        "",
        "| scenario | run | wall s | limit s | wall / limit | prompt tokens evaluated | generated | where the time went (s) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, rows in results.items():
        for kind, runs in rows.items():
            wall = median(runs, lambda r: r["wall"])
            limit = median(runs, lambda r: r["evaluated"] / pp + r["generated"] / tg)
            parts = runs[len(runs) // 2]["parts"]
            said = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
            lines.append(
                f"| {name} | {kind} | {wall:.1f} | {limit:.1f} | {wall / limit:.2f} | "
                f"{median(runs, lambda r: r['evaluated']):.0f} | {median(runs, lambda r: r['generated']):.0f} | {said} |"
            )
    text = "\n".join(lines) + "\n"
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
