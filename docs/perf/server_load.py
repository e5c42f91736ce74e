#!/usr/bin/env python3
"""How long the embedded llama-server takes to load the model, and its token rates, with and
without weight repacking (docs/perf.md, "Why a cold run cannot come within 1.5× of its limit").

    python docs/perf/server_load.py [--gguf qwen2.5-coder-1.5b] [--repeat 3]

Each configuration is started ``--repeat`` times after one start that is not counted (it may
find the file outside the page cache); "ready" is the time from the process start to `/health`
answering. The rates come from one 500-token prompt and 64 generated tokens on each counted
start. Needs an idle machine: every number here is CPU time on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
import urllib.request

from textagent.local import find_server_binary, resolve_model

CONFIGS = {
    "default (weights repacked)": [],
    "--no-warmup": ["--no-warmup"],
    "--no-repack": ["--no-repack"],
    "--no-repack --no-warmup": ["--no-repack", "--no-warmup"],
}
PROMPT = "def fib(n):\n" + "    # a comment line to make the prompt longer\n" * 60


def _get(url: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)


def start(model: str, flags: list[str], port: int) -> tuple[float, float, float]:
    """Seconds to ready, prompt tokens/s, generated tokens/s of one server start."""
    cmd = [str(find_server_binary()), "-m", model, "--host", "127.0.0.1", "--port", str(port)]
    began = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, "-c", "8192", "-np", "1", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"llama-server exited ({proc.returncode}) with {flags}")
            try:
                if _get(f"http://127.0.0.1:{port}/health").get("status") == "ok":
                    break
            except OSError:
                time.sleep(0.01)
        ready = time.perf_counter() - began
        body = {"prompt": PROMPT, "n_predict": 64, "temperature": 0, "ignore_eos": True, "cache_prompt": False}
        t = _get(f"http://127.0.0.1:{port}/completion", body)["timings"]
        return ready, t["prompt_n"] / t["prompt_ms"] * 1000, t["predicted_n"] / t["predicted_ms"] * 1000
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", default="qwen2.5-coder-1.5b")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    model = str(resolve_model(args.gguf)[0])
    print("| server | ready (median, min–max) | prompt tokens / s | generated tokens / s |")
    print("|---|---:|---:|---:|")
    for n, (name, flags) in enumerate(CONFIGS.items()):
        port = 18760 + 10 * n
        start(model, flags, port)  # not counted
        runs = [start(model, flags, port + 1 + i) for i in range(args.repeat)]
        ready, prompt, gen = ([r[k] for r in runs] for k in range(3))
        print(
            f"| {name} | {statistics.median(ready):.2f} s ({min(ready):.2f}–{max(ready):.2f}) "
            f"| {statistics.median(prompt):.0f} | {statistics.median(gen):.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
