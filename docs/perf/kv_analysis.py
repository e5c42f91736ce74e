#!/usr/bin/env python3
"""Where a textagent bench run spends prompt tokens and loses KV-cache reuse (stdlib only).

    python docs/perf/kv_analysis.py RUN_DIR [--modes text,constrained,baseline] [--prompts TOK.json]
    python docs/perf/kv_analysis.py --make-prompts SRC OUT --tokenizer PATH/llama-tokenize --model M.gguf
                                    [--examples per-task|fixed|stable]

RUN_DIR holds episodes.jsonl.gz (textagent bench; episodes.jsonl in older runs). Everything in the first form comes from the
recorded per-step usage (prompt_tokens = sent, prompt_evaluated = computed by the server,
prompt_cached = reused, completion_tokens), the trace start times and the worker's slot:

* step 1 vs later steps, per mode;
* step 1 split by who sent that exact prompt first: text, constrained and baseline send the
  same step-1 prompt for a task, so the mode that runs first for a task pays for it and the
  others get it from the cache ("first" / "concurrent": an identical prompt was sent but not
  finished yet / "repeat": an identical prompt finished earlier). Identity = (task, step-1
  prompt_tokens);
* later steps: tokens evaluated beyond the new text = (prompt_k + completion_k - 1) - cached_k+1
  (the last sampled token is never in the cache, hence the -1); > 0 is cache loss
  (eviction, early stop, re-tokenization), < 0 a prefix restored from elsewhere;
* answers sent back (check_numbers / check_items) and the steps and tokens after them;
  repeated-call observations (details.repeated_calls) and the tokens the next step evaluated;
* counterfactuals: every mode charged the first sender's step-1 cost ("fair"), and every
  step 1 pre-warmed (1 token);
* which fields a finer analysis needs and the run did not record.

``--prompts`` (made by ``--make-prompts`` from the source tree of the run's commit, e.g.
``git archive <commit> textagent grammars | tar -x -C SRC``, and the served model's tokenizer)
adds the step-1 prompt composition (system / examples / task tokens), the common prefix with
the previous prompt on the same slot and with any earlier prompt, and a simulation of
llama-server ``--cache-reuse N``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

TEXT_LIKE = ("text", "constrained", "baseline")  # same step-1 prompt for a task
SENDBACKS = ("unsupported_numbers", "unlooked_items")


def load(run_dir: str) -> list[dict]:
    path = Path(run_dir)
    if path.is_dir():
        path = next((path / n for n in ("episodes.jsonl.gz", "episodes.jsonl") if (path / n).is_file()), path)
    if not path.is_file():
        sys.exit(f"{path}: no episodes file (a bench run directory holds episodes.jsonl.gz)")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":  # gzip, one member per episode: a finished run's members are all whole
        data = gzip.decompress(data)
    by_key = {}
    for line in data.decode("utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and "task" in r:
            by_key[(r["task"], r.get("mode"), r.get("repeat", 0))] = r  # the last record wins
    recs = list(by_key.values())
    for r in recs:
        trace = r.get("trace") or []
        r["_steps"] = [t for t in trace if t.get("type") == "step"]
        start = next((t.get("time") for t in trace if t.get("type") == "start"), None)
        r["_start"] = start if start is not None else (r.get("time") or 0) - (r.get("seconds") or 0)
        r["_end"] = r.get("time") or r["_start"]
    recs.sort(key=lambda r: r["_start"])
    return recs


def u(step: dict, key: str) -> int:
    return int((step.get("usage") or {}).get(key) or 0)


def table(head: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(f"{c:,}" if isinstance(c, int) else str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def pct(a: float, b: float) -> str:
    return f"{100 * a / b:.1f} %" if b else "-"


def analyse(recs: list[dict], modes: list[str]) -> None:  # noqa: C901
    # ---- step 1 vs later, per mode --------------------------------------------------------
    agg: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        a = agg[r["mode"]]
        a["episodes"] += 1
        a["solved"] += bool(r.get("success"))
        for s in r["_steps"]:
            k = "s1" if s.get("step") == 1 else "later"
            a[k + "_n"] += 1
            for f in ("prompt_tokens", "prompt_evaluated", "prompt_cached", "completion_tokens"):
                a[k + "_" + f] += u(s, f)
            a["early_stops"] += "early_stop" in (s.get("details") or {})
            a["finish_" + str(s.get("finish_reason"))] += 1
    rows = []
    for m in modes:
        a = agg[m]
        sent = a["s1_prompt_tokens"] + a["later_prompt_tokens"]
        ev = a["s1_prompt_evaluated"] + a["later_prompt_evaluated"]
        comp = a["s1_completion_tokens"] + a["later_completion_tokens"]
        rows.append(
            [
                m,
                a["episodes"],
                a["solved"],
                f"{(a['s1_n'] + a['later_n']) / max(a['episodes'], 1):.2f}",
                a["s1_prompt_tokens"],
                a["s1_prompt_evaluated"],
                pct(a["s1_prompt_cached"], a["s1_prompt_tokens"]),
                a["later_n"],
                a["later_prompt_tokens"],
                a["later_prompt_evaluated"],
                pct(a["later_prompt_cached"], a["later_prompt_tokens"]),
                comp,
                pct(sent - ev, sent),
                f"{(ev + comp) / a['solved']:.0f}" if a["solved"] else "-",
                a["early_stops"],
            ]
        )
    print("## Step 1 vs later steps (recorded usage)\n")
    print(
        table(
            [
                "mode",
                "episodes",
                "solved",
                "steps/ep",
                "step-1 sent",
                "step-1 evaluated",
                "step-1 reuse",
                "later steps",
                "later sent",
                "later evaluated",
                "later reuse",
                "generated",
                "KV reuse",
                "tokens/solved",
                "early stops",
            ],
            rows,
        )
    )

    # ---- step 1 by who sent the prompt first ------------------------------------------------
    seen: dict[tuple, list[dict]] = defaultdict(list)
    first_eval: dict[tuple, int] = {}
    cat: dict[str, Counter] = defaultdict(Counter)
    for r in recs:
        if not r["_steps"]:
            continue
        s1 = r["_steps"][0]
        key = (
            (r["task"], u(s1, "prompt_tokens"))
            if r["mode"] in TEXT_LIKE
            else (r["task"], r["mode"], u(s1, "prompt_tokens"))
        )
        prior = seen[key]
        c = "first" if not prior else ("repeat" if any(p["_end"] <= r["_start"] for p in prior) else "concurrent")
        if c == "first":
            first_eval[key] = u(s1, "prompt_evaluated")
        r["_key"], r["_cat"] = key, c
        for f in ("n", "prompt_tokens", "prompt_evaluated"):
            cat[r["mode"]][(c, f)] += 1 if f == "n" else u(s1, f)
        prior.append(r)
    rows = []
    for m in modes:
        for c in ("first", "concurrent", "repeat"):
            n = cat[m][(c, "n")]
            if n:
                sent, ev = cat[m][(c, "prompt_tokens")], cat[m][(c, "prompt_evaluated")]
                rows.append([m, c, n, sent, ev, pct(sent - ev, sent)])
    print("\n## Step 1: who sent the identical prompt first\n")
    print(
        "first: no earlier episode sent this step-1 prompt; concurrent: one did but had not finished; "
        "repeat: one had finished (its prompt is in a slot or the server's prompt cache).\n"
    )
    print(table(["mode", "step-1 prompt was", "episodes", "sent", "evaluated", "reuse"], rows))

    # ---- previous episode on the same slot --------------------------------------------------
    prev: dict = {}
    slot_rows: dict = defaultdict(lambda: [0, 0, 0])
    for r in recs:
        p = prev.get((r.get("endpoint"), r.get("slot")))
        prev[(r.get("endpoint"), r.get("slot"))] = r
        r["_prev"] = p
        if not r["_steps"]:
            continue
        what = (
            "none"
            if p is None
            else (
                "same task"
                if p["task"] == r["task"]
                else "other task, " + ("text-like" if p["mode"] in TEXT_LIKE else p["mode"])
            )
        )
        row = slot_rows[(r["mode"], what)]
        row[0] += 1
        row[1] += u(r["_steps"][0], "prompt_tokens")
        row[2] += u(r["_steps"][0], "prompt_cached")
    print("\n## Step 1 by the previous episode on the same pinned slot\n")
    print(
        table(
            ["mode", "previous episode on the slot", "episodes", "mean step-1 cached", "reuse"],
            [
                [m, w, v[0], f"{v[2] / v[0]:.0f}", pct(v[2], v[1])]
                for (m, w), v in sorted(slot_rows.items())
                if m in modes
            ],
        )
    )

    # ---- later steps: re-evaluation beyond the new text -----------------------------------
    rows, losses = [], []
    for m in modes:
        c = Counter()
        for r in recs:
            if r["mode"] != m:
                continue
            for a, b in zip(r["_steps"], r["_steps"][1:]):
                keep = u(a, "prompt_tokens") + u(a, "completion_tokens") - 1
                loss = keep - u(b, "prompt_cached")
                new = u(b, "prompt_tokens") - keep
                c["steps"] += 1
                c["new"] += new
                c["evaluated"] += u(b, "prompt_evaluated")
                if loss > 3:
                    c["lost_steps"] += 1
                    c["lost"] += loss
                    losses.append([m, r["task"], b.get("step"), r.get("slot"), loss])
                elif loss < 0:
                    c["restored_steps"] += 1
                    c["restored"] += -loss
                else:
                    c["boundary"] += loss  # re-tokenization at the reply's end (0-3 tokens)
        rows.append(
            [
                m,
                c["steps"],
                c["new"],
                c["evaluated"],
                c["boundary"],
                c["lost_steps"],
                c["lost"],
                c["restored_steps"],
                c["restored"],
            ]
        )
    print("\n## Later steps: evaluated beyond the new text\n")
    print(
        table(
            [
                "mode",
                "later steps",
                "new text tokens (+1/step)",
                "evaluated",
                "boundary re-tokenization",
                "steps with cache loss",
                "tokens re-evaluated",
                "steps with extra reuse",
                "tokens restored",
            ],
            rows,
        )
    )
    if losses:
        print("\nCache-loss steps (loss > 3 tokens):\n")
        print(table(["mode", "task", "step", "slot", "re-evaluated tokens"], losses[:30]))

    # ---- send-backs and repeated calls -------------------------------------------------------
    rows = []
    for m in modes:
        c = Counter()
        for r in recs:
            if r["mode"] != m:
                continue
            at = next(
                (s.get("step") for s in r["_steps"] if any((s.get("details") or {}).get(k) for k in SENDBACKS)), None
            )
            for s in r["_steps"]:
                d = s.get("details") or {}
                c["sendbacks"] += any(d.get(k) for k in SENDBACKS)
            if at is not None:
                after = [s for s in r["_steps"] if s.get("step", 0) > at]
                c["episodes"] += 1
                c["solved"] += bool(r.get("success"))
                c["steps_after"] += len(after)
                c["tokens_after"] += sum(u(s, "prompt_evaluated") + u(s, "completion_tokens") for s in after)
            for a, b in zip(r["_steps"], r["_steps"][1:]):
                if (a.get("details") or {}).get("repeated_calls"):
                    c["repeat_obs"] += 1
                    c["repeat_tokens"] += u(b, "prompt_evaluated")
        rows.append(
            [
                m,
                c["sendbacks"],
                c["episodes"],
                c["solved"],
                c["steps_after"],
                c["tokens_after"],
                c["repeat_obs"],
                c["repeat_tokens"],
            ]
        )
    print("\n## Send-backs (check_numbers / check_items) and repeated-call observations\n")
    print(
        table(
            [
                "mode",
                "send-backs",
                "episodes with one",
                "of them solved",
                "steps after",
                "tokens after (eval+gen)",
                "repeated-call observations",
                "tokens evaluated for them",
            ],
            rows,
        )
    )

    # ---- counterfactuals -----------------------------------------------------------------------
    rows = []
    for m in modes:
        rs = [r for r in recs if r["mode"] == m and r["_steps"]]
        solved = sum(bool(r.get("success")) for r in rs)
        sent = sum(u(s, "prompt_tokens") for r in rs for s in r["_steps"])
        gen = sum(u(s, "completion_tokens") for r in rs for s in r["_steps"])
        later = sum(u(s, "prompt_evaluated") for r in rs for s in r["_steps"][1:])
        s1 = sum(u(r["_steps"][0], "prompt_evaluated") for r in rs)
        fair = sum(first_eval.get(r["_key"], u(r["_steps"][0], "prompt_evaluated")) for r in rs)
        warm = len(rs)
        line = [m]
        for ev in (s1 + later, fair + later, warm + later):
            line += [f"{(ev + gen) / solved:.0f}" if solved else "-", pct(sent - ev, sent)]
        rows.append(line)
    print("\n## Counterfactual step-1 accounting\n")
    print(
        "recorded; fair = each episode charged the step-1 cost of the first sender of its prompt; "
        "pre-warmed = every step 1 costs 1 token (the prompt prefix already in the slot).\n"
    )
    print(
        table(
            [
                "mode",
                "tokens/solved",
                "KV reuse",
                "fair: tokens/solved",
                "fair: KV reuse",
                "pre-warmed: tokens/solved",
                "pre-warmed: KV reuse",
            ],
            rows,
        )
    )

    # ---- what is missing -----------------------------------------------------------------------
    steps = [s for r in recs for s in r["_steps"]]
    missing = []
    if not any("id_slot" in (s.get("usage") or {}) or "id_slot" in s for s in steps):
        missing.append(
            "the slot the server used per step (llama.cpp returns `id_slot`; only the worker's pinned slot is recorded)"
        )
    if not any("t_start" in s or "started" in s for s in steps):
        missing.append("a wall-clock start time per step (only durations; episode start times order the slots)")
    if not any("prompt" in s or "prompt_sha" in s or "prompt_chars" in s for s in steps):
        missing.append("the prompt (or its length in characters / a hash of its prefix) per step")
    if not any("tokens_cached" in (s.get("usage") or {}) for s in steps):
        missing.append("`tokens_cached` (slot content after the request) per step")
    if missing:
        print("\n## Not recorded in this run\n")
        print("\n".join("- " + m for m in missing))


# ---- with token ids of the step-1 prompts -------------------------------------------------------


def lcp(a: list[int], b: list[int]) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cache_reuse(cache: list[int], prompt: list[int], n_reuse: int) -> int:
    """Tokens llama-server keeps with ``--cache-reuse n_reuse``: the common prefix, then chunks
    of at least n_reuse tokens found further on in the cache in the same order (KV shifting)."""
    got = hc = hp = lcp(cache, prompt)
    while n_reuse > 0 and hc < len(cache) and hp < len(prompt):
        m = 0
        while hc + m < len(cache) and hp + m < len(prompt) and cache[hc + m] == prompt[hp + m]:
            m += 1
        if m >= n_reuse:
            got, hc, hp = got + m, hc + m, hp + m
        else:
            hc += 1
    return got


def with_prompts(recs: list[dict], prompts: dict, modes: list[str]) -> None:
    end_id = prompts.get("_end_id")
    rows = []
    for m in modes:
        c = Counter()
        for r in recs:
            if r["mode"] != m or r["task"] not in prompts or not r["_steps"]:
                continue
            ids = prompts[r["task"]]["ids"]
            c["n"] += 1
            c["len"] += len(ids)
            c["match"] += len(ids) == u(r["_steps"][0], "prompt_tokens")
            ends = [i for i, t in enumerate(ids) if t == end_id]
            if len(ends) >= 2:
                c["system"] += ends[0] + 1
                c["task"] += len(ids) - ends[-2] - 1
        if c["n"]:
            rows.append(
                [
                    m,
                    c["n"],
                    c["match"],
                    f"{c['len'] / c['n']:.0f}",
                    f"{c['system'] / c['n']:.0f}",
                    f"{(c['len'] - c['system'] - c['task']) / c['n']:.0f}",
                    f"{c['task'] / c['n']:.0f}",
                ]
            )
    print("\n## Step-1 prompt composition (token ids of the reconstructed prompts)\n")
    print(table(["mode", "episodes", "length = recorded", "tokens", "system turn", "examples", "task turn"], rows))
    rows = []
    for m in modes:
        c = Counter()
        earlier: list[str] = []
        for r in recs:
            if r["mode"] in TEXT_LIKE and r["mode"] != m and r["task"] in prompts:
                earlier.append(r["task"])
            if r["mode"] != m or r["task"] not in prompts or not r["_steps"]:
                continue
            ids = prompts[r["task"]]["ids"]
            p = r["_prev"]
            best = max((lcp(prompts[t]["ids"], ids) for t in earlier), default=0)
            c["n"] += 1
            c["observed"] += u(r["_steps"][0], "prompt_evaluated")
            c["any"] += len(ids) - min(best, len(ids) - 1)
            if p is not None and p["mode"] in TEXT_LIKE and p["task"] in prompts:
                cache = prompts[p["task"]]["ids"]
                c["known"] += 1
                c["known_observed"] += u(r["_steps"][0], "prompt_evaluated")
                for n in (0, 16, 64, 256):
                    c[f"cr{n}"] += len(ids) - min(cache_reuse(cache, ids, n), len(ids) - 1)
            earlier.append(r["task"])
        if c["n"]:
            rows.append(
                [
                    m,
                    c["n"],
                    c["observed"],
                    c["any"],
                    c["known"],
                    c["known_observed"],
                    c["cr0"],
                    c["cr16"],
                    c["cr64"],
                    c["cr256"],
                ]
            )
    print("\n## Step-1 evaluated tokens: recorded vs prefix models\n")
    print(
        "any earlier: the best common prefix with any earlier text-like step-1 prompt (a perfect prompt cache); "
        "slot: with the previous prompt on the same slot (when it was a text-like mode), plain and with "
        "llama-server --cache-reuse N.\n"
    )
    print(
        table(
            [
                "mode",
                "episodes",
                "recorded",
                "model: any earlier",
                "slot known",
                "recorded (slot known)",
                "model: slot",
                "--cache-reuse 16",
                "--cache-reuse 64",
                "--cache-reuse 256",
            ],
            rows,
        )
    )


# ---- making the token ids ------------------------------------------------------------------------

_DUMP = r"""
import json, sys
from textagent import prompts
from textagent.templates import get_format
from textagent.bench.tasks import load_tasks
from textagent.bench.tools import Env, make_toolset
variant = sys.argv[1]
fmt = get_format("chatml")   # what llama-server's /apply-template gives for Qwen2.5 (checked: lengths match)
out = {}
for t in load_tasks(sys.argv[2] if len(sys.argv) > 2 else None):
    tools = make_toolset(t.tools, Env(lights=dict(t.setup.get("lights", {}))))
    if not hasattr(tools, "examples_for"):
        shown = tools.examples
    else:
        shown = tools.examples_for("" if variant == "fixed" else t.question)
        if variant == "stable" and shown:
            pool = list(tools.examples)
            shown = tuple(sorted(shown, key=pool.index))
    messages = [{"role": "system", "content": prompts.system_prompt(tools)}, *prompts.example_turns(tools, shown or None),
                {"role": "user", "content": prompts.task(t.question)}]
    out[t.id] = {"prompt": fmt.render(messages), "tools": list(t.tools)}
json.dump(out, sys.stdout)
"""


def make_prompts(src: str, out: str, tokenizer: str, model: str, variant: str, tasks: str | None) -> None:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    # cwd=src: `python -c` puts the working directory first on sys.path, before PYTHONPATH
    proc = subprocess.run(
        [sys.executable, "-c", _DUMP, variant, *([os.path.abspath(tasks)] if tasks else [])],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(f"rebuilding the prompts with the textagent in {src} failed:\n{proc.stderr[-2000:]}")
    dumped = proc.stdout
    data = json.loads(dumped)

    def tokenize(text: str) -> list[int]:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write(text)
        try:
            res = subprocess.run(
                [tokenizer, "-m", model, "-f", f.name, "--ids", "--log-disable", "--no-bos"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        finally:
            os.unlink(f.name)
        return json.loads(res.strip().splitlines()[-1])

    for v in data.values():
        v["ids"] = tokenize(v["prompt"])
    data["_end_id"] = tokenize("<|im_end|>")[0]
    Path(out).write_text(json.dumps(data), encoding="utf-8")
    print(f"{len(data) - 1} prompts, {sum(len(v['ids']) for k, v in data.items() if k != '_end_id'):,} tokens -> {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", nargs="?")
    ap.add_argument("--modes", default="text,constrained,baseline")
    ap.add_argument("--prompts", help="JSON from --make-prompts for the run's commit")
    ap.add_argument("--make-prompts", nargs=2, metavar=("SRC", "OUT"))
    ap.add_argument("--tokenizer", help="llama-tokenize binary")
    ap.add_argument("--model", help="the served GGUF")
    ap.add_argument("--examples", default="per-task", choices=("per-task", "fixed", "stable"))
    ap.add_argument("--tasks", help="task file (default: the suite shipped with SRC)")
    args = ap.parse_args()
    if args.make_prompts:
        make_prompts(*args.make_prompts, args.tokenizer or "llama-tokenize", args.model, args.examples, args.tasks)
        return
    if not args.run_dir:
        ap.error("give a run directory (or --make-prompts)")
    recs = load(args.run_dir)
    modes = [m for m in args.modes.split(",") if any(r["mode"] == m for r in recs)]
    print(f"# KV / token accounting of {args.run_dir} ({len(recs)} episodes)\n")
    analyse(recs, modes)
    if args.prompts:
        prompts = json.loads(Path(args.prompts).read_text(encoding="utf-8"))
        with_prompts(recs, prompts, modes)


if __name__ == "__main__":
    main()
