"""Per-episode facts, the failure taxonomy, and the per-mode summary of a bench run.

Everything here is a pure function of episode records (the JSON lines the runner writes), so
a run can be re-summarised, or two runs compared, long after the model is gone. The counts of
an episode are those of its run (textagent.steps.Result), read back from the record's trace.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..backends.base import Usage
from ..steps import Result, Step

__all__ = [
    "FAILURES",
    "FAILURE_TITLES",
    "ModeSummary",
    "classify",
    "episode_tokens",
    "latest_records",
    "looped",
    "native_tools",
    "result_of",
    "step_facts",
    "summarize",
    "wilson",
]


def native_tools(mode: str) -> bool:
    """Whether textagent read the server's function calls in episodes of ``mode`` (a record's mode
    name), as the mode table says (a mode it no longer holds: no)."""
    from .mode_table import BENCH_MODES

    bench = BENCH_MODES.get(mode)
    return bench is not None and bench.reads_native_calls


# Failure classes, in the order they are tried (the first that applies labels the episode).
FAILURES = (
    "backend_error",
    "call_not_needed",
    "hallucinated_observation",
    "loop",
    "unparseable",
    "budget",
    "no_call",
    "wrong_tool",
    "invalid_args",
    "wrong_answer",
)
FAILURE_TITLES = {
    "backend_error": "backend error (server failed)",
    "call_not_needed": "call where none was needed",
    "hallucinated_observation": "hallucinated observation",
    "loop": "loop (same call repeated)",
    "unparseable": "unparseable reply",
    "budget": "budget hit (steps/tokens/time)",
    "no_call": "no call where one was needed",
    "wrong_tool": "wrong tool",
    "invalid_args": "invalid args",
    "wrong_answer": "wrong final answer",
}

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95 % by default); (0, 1) when n == 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n ({n}), got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


# --------------------------------------------------------------------------------------------
# Facts of one episode, from its trace
# --------------------------------------------------------------------------------------------


def _canon(args: Any) -> str:
    try:
        return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(args)


def result_of(record: Mapping[str, Any]) -> Result:
    """The run of an episode record, its steps read back from its trace (Step.from_record): the
    counts of a record are the counts of that Result, defined once in textagent.steps."""
    steps = [Step.from_record(r) for r in record.get("trace", []) if r.get("type") == "step"]
    return Result(
        record.get("answer"),
        record.get("stop_reason", "error"),
        steps,
        Usage(),
        float(record.get("seconds") or 0.0),
        mode=record.get("mode", "text"),
    )


def looped(steps: Sequence[Step]) -> bool:
    """The same call made again after it succeeded, or three times whatever its results."""
    seen_ok: set[tuple[str, str]] = set()
    counts: dict[tuple[str, str], int] = {}
    for step in steps:
        keys = [(str(o.name), _canon(o.args)) for o in step.outcomes]
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
            if key in seen_ok or counts[key] >= 3:
                return True
        seen_ok.update(key for key, o in zip(keys, step.outcomes) if o.ok)
    return False


def step_facts(record: Mapping[str, Any]) -> dict[str, Any]:
    """The counts of an episode (see ``record["trace"]``), read from its Result (:func:`result_of`)."""
    result = result_of(record)
    first_usage = result.steps[0].usage if result.steps else Usage()
    return {
        "steps": len(result.steps),
        # step 1's prompt: what was sent and what the server had to evaluate (the rest was cached)
        "first_prompt": first_usage.prompt_tokens,
        "first_evaluated": first_usage.prompt_evaluated,
        "format_errors": result.format_errors,
        "first_step_format_error": result.first_step_format_error,
        "recovered": result.recovered,
        "native_decode_failures": result.decode_failures,
        "unrescued_decode_failures": result.unrescued_decode_failures,
        "tool_errors": result.tool_errors,
        # answers a check sent back, and notes checks added (textagent.checks)
        "sent_back": result.sent_back(),
        "check_notes": result.check_notes,
        "loop": looped(result.steps),
        "hallucinated": result.hallucinated,
    }


def classify(record: Mapping[str, Any]) -> str | None:
    """The failure class of an episode (one of FAILURES), or None when it succeeded."""
    if record.get("success"):
        return None
    facts = step_facts(record)
    stop = record.get("stop_reason")
    attempted = record.get("attempted") or []
    checks = {c["type"]: c for c in record.get("checks", []) if not c.get("ok")}
    if stop in ("backend_error", "error"):
        return "backend_error"
    if record.get("needs_no_tool") and attempted:
        return "call_not_needed"
    if facts["hallucinated"]:
        return "hallucinated_observation"
    if facts["loop"] or stop == "repeated":  # "repeated": ended by --max-repeats
        return "loop"
    if (
        stop == "format_errors"
        or facts["unrescued_decode_failures"]
        or (facts["steps"] and facts["format_errors"] == facts["steps"])
    ):
        return "unparseable"
    if stop in ("max_steps", "token_budget", "time_limit"):
        return "budget"
    if record.get("needs_tools") and not attempted:
        return "no_call"
    if "not_called" in checks:
        return "wrong_tool"
    if "calls" in checks:
        from .checking import diagnose_calls

        return diagnose_calls(record.get("call_specs") or [], record.get("calls") or []) or "invalid_args"
    return "wrong_answer"


# --------------------------------------------------------------------------------------------
# Summary per mode
# --------------------------------------------------------------------------------------------


def episode_tokens(usage: Mapping[str, Any] | None) -> int:
    """Tokens an episode cost: prompt tokens the server computed (all sent tokens when it does
    not say) plus generated tokens."""
    usage = usage or {}
    prompt = usage.get("prompt_evaluated")
    if prompt is None:
        prompt = usage.get("prompt_tokens") or 0
    return int(prompt) + int(usage.get("completion_tokens") or 0)


@dataclass
class ModeSummary:
    mode: str
    episodes: int = 0
    successes: int = 0
    ci_low: float = 0.0
    ci_high: float = 1.0
    mean_steps: float = 0.0
    tokens_per_solved: float | None = None
    prompt_tokens_per_episode: float = 0.0
    kv_reuse: float | None = None  # share of prompt tokens reused from the KV cache
    first_prompt: float | None = None  # mean prompt tokens of step 1
    first_evaluated: float | None = None  # ... of them evaluated (not found in the cache)
    format_error_rate: float = 0.0  # format-error steps / steps
    first_step_errors: int = 0
    recovered: int = 0
    recovery_rate: float | None = None  # recovered / episodes with a first-step format error
    decode_failure_rate: float | None = None  # native modes: decode-failure steps / steps
    seconds_per_task: float = 0.0
    tool_errors: int = 0
    copied_answers: int = 0  # final answers holding a placeholder example's phrase
    feedback_answers: int = 0  # final answers repeating a sentence of textagent's feedback to the model
    answered_without_call: int = 0  # episodes that needed a call and answered without one
    failures: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [successes, episodes]

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["success_rate"] = self.success_rate
        return out


def latest_records(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per (task, mode, repeat): the last written wins (a resumed run re-ran it)."""
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        by_key[(r.get("task"), r.get("mode"), r.get("repeat", 0))] = dict(r)
    return list(by_key.values())


def summarize(records: Iterable[Mapping[str, Any]], modes: Sequence[str] | None = None) -> dict[str, ModeSummary]:
    """Per-mode metrics, in the order of ``modes`` (default: as first seen)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in latest_records(records):
        grouped.setdefault(r.get("mode", "?"), []).append(r)
    order = list(modes) if modes else list(grouped)
    order += [m for m in grouped if m not in order]
    out: dict[str, ModeSummary] = {}
    for mode in order:
        rs = grouped.get(mode, [])
        s = ModeSummary(mode)
        out[mode] = s
        if not rs:
            continue
        s.episodes = len(rs)
        s.successes = sum(1 for r in rs if r.get("success"))
        s.ci_low, s.ci_high = wilson(s.successes, s.episodes)
        facts = [step_facts(r) for r in rs]
        steps = sum(f["steps"] for f in facts)
        s.mean_steps = steps / len(rs)
        tokens = sum(episode_tokens(r.get("usage")) for r in rs)
        s.tokens_per_solved = tokens / s.successes if s.successes else None
        sent = sum((r.get("usage") or {}).get("prompt_tokens") or 0 for r in rs)
        s.prompt_tokens_per_episode = sent / len(rs)
        cached_known = [(r.get("usage") or {}) for r in rs if (r.get("usage") or {}).get("prompt_cached") is not None]
        cached_total = sum(u.get("prompt_tokens") or 0 for u in cached_known)
        if cached_total:
            s.kv_reuse = sum(u.get("prompt_cached") or 0 for u in cached_known) / cached_total
        firsts = [
            (f["first_prompt"], f["first_evaluated"])
            for f in facts
            if f["first_prompt"] is not None and f["first_evaluated"] is not None
        ]
        if firsts:
            s.first_prompt = sum(p for p, _ in firsts) / len(firsts)
            s.first_evaluated = sum(e for _, e in firsts) / len(firsts)
        s.format_error_rate = sum(f["format_errors"] for f in facts) / steps if steps else 0.0
        s.first_step_errors = sum(1 for f in facts if f["first_step_format_error"])
        s.recovered = sum(1 for f in facts if f["recovered"])
        s.recovery_rate = s.recovered / s.first_step_errors if s.first_step_errors else None
        if native_tools(mode):
            s.decode_failure_rate = sum(f["native_decode_failures"] for f in facts) / steps if steps else 0.0
        s.seconds_per_task = sum(float(r.get("seconds") or 0) for r in rs) / len(rs)
        s.tool_errors = sum(f["tool_errors"] for f in facts)
        s.copied_answers = sum(copied_example(r.get("answer"), called_tools(r)) for r in rs)
        s.feedback_answers = sum(repeated_feedback(r.get("answer")) for r in rs)
        s.answered_without_call = sum(skipped_call(r) for r in rs)
        for r in rs:
            # recomputed: records stay comparable as the taxonomy evolves; a BFCL item keeps
            # the checker's label (BFCL's terms)
            label = r.get("failure") if isinstance(r.get("bfcl"), Mapping) else classify(r)
            if label:
                s.failures[label] = s.failures.get(label, 0) + 1
            kind = s.by_kind.setdefault(r.get("kind", "other"), [0, 0])
            kind[0] += 1 if r.get("success") else 0
            kind[1] += 1
    return out


# The phrases of the placeholder worked examples (prompts/common/example_*.txt) that a model copies
# into its answers: "math_factorial returned: 120", "(what f returned)" or "(f returned)", "returned a
# result each"; their bracketed form made the model's own where a value belongs ("are: (list of movie
# titles)", "is (name of the python file)": described, never stated; no digit, at most 12 words);
# and the concrete style's made-up results, 42 and 17 ("The result is 42.", and "The result is 17."
# after a call whose result the model had not seen).
_COPIED = re.compile(
    r"\b[\w.]+ returned: |\((?:what )?[\w.]+ returned\)|returned a result (?:for )?each\b"
    r"|(?:\b(?:is|are|was|were)\b:?|:)\s*"
    r"\((?:what|the|name of|list of|number of|result|details|value|information|calculate)\b(?:[^()\d\s]*\s?){1,12}\)"
    r"|\b42 and 17\b|^\s*the result is (?:42|17)\.?\s*$"
    # the value style's made-up values, stated as reported ("f reported success with the value 42.")
    r"|\breported (?:success with the value )?(?:42|17)\b(?![.,]\d)"
    # the direct example's tail ("...; no tool is needed for that.") given as the whole answer
    r"|^\s*no tool is needed(?: for (?:that|this))?\.?\s*$",
    re.I,
)


# The status style's answer ("f ran with x 1 and reported success.") says what ran: true when the
# episode ran f, a copied claim when it did not, in whatever words it says what f reported
# ("f ran with league "NBA"; it reported the record ...", BFCL dev, the 1.5B), or with no word of
# a report when f looks like a function name ("maps.route_times ran with route ...; it returned
# the estimated time", "get_snow_report ran with location "Boston"", BFCL test, the 1.5B): a name
# with a dot or an underscore, so that "The job ran for 2 hours." is no claim.
_STATUS = re.compile(r"\b([\w.-]+) ran (?:with|for)\b.*\breported\b", re.I | re.S)
_NAMED_RUN = re.compile(r"\b([\w.-]*[_.][\w.-]*) ran (?:with|for)\b", re.I)


def copied_example(answer: Any, called: Collection[str] | None = None) -> bool:
    """Whether a final answer holds a phrase of the worked examples, or their bracketed placeholder
    where a value belongs. ``called``: the names of the tools the episode (or turn) ran; a status
    answer counts unless the tool it names is among them (all of them count when None)."""
    if not isinstance(answer, str):
        return False
    if _COPIED.search(answer):
        return True
    claimed = {m.group(1) for m in _NAMED_RUN.finditer(answer)}
    status = _STATUS.search(answer)
    if status is not None:
        claimed.add(status.group(1))
    return bool(claimed) and (called is None or not claimed <= set(called))


# Feedback the model is sent when a reply or a call goes wrong (prompts/<family>/<name>.txt).
_FEEDBACK_TEMPLATES = (
    ("text", "observation_error"),
    ("text", "format_error"),
    ("text", "empty_reply"),
    ("text", "reply_cut"),
    ("native", "tool_error"),
    ("native", "bad_arguments"),
    ("native", "empty_reply"),
)


@functools.cache
def feedback_sentences() -> tuple[str, ...]:
    """The sentences of textagent's feedback to the model that stand whole in their templates
    (no placeholder in them, at least five words), lower-cased: what an answer repeats when the
    model parrots the feedback ("The call failed. Call the tool again ...") instead of answering."""
    from .. import prompts

    found: list[str] = []
    for family, name in _FEEDBACK_TEMPLATES:
        text = prompts.for_family(family).template(name).template
        for piece in re.split(r"\$\{?\w+\}?", text):
            for sentence in re.split(r"(?<=[.;:])\s+|\n", piece):
                sentence = " ".join(sentence.split()).strip(" ,.;:")
                if len(sentence.split()) >= 5 and sentence.lower() not in found:
                    found.append(sentence.lower())
    return tuple(found)


def repeated_feedback(answer: Any) -> bool:
    """Whether a final answer holds a whole sentence of textagent's feedback to the model."""
    if not isinstance(answer, str):
        return False
    text = " ".join(answer.split()).lower()
    return any(sentence in text for sentence in feedback_sentences())


def called_tools(record: Mapping[str, Any]) -> set[str]:
    """The names of the tools an episode ran (its record's ``calls``), or a trace step called
    (the step's ``calls``)."""
    return {str(c.get("name")) for c in record.get("calls") or () if isinstance(c, Mapping)}


def skipped_call(record: Mapping[str, Any]) -> bool:
    """An episode that needed a call and made none, answering instead (BFCL items: a category with
    calls to make whose first reply had none; the suite: a task that needs tools, no call attempted)."""
    if record.get("stop_reason") in ("backend_error", "error"):
        return False
    bfcl = record.get("bfcl")
    if isinstance(bfcl, Mapping):
        first = bfcl.get("first") or {}
        return "irrelevance" not in str(record.get("kind")) and first.get("error_type") == "no_call"
    return bool(record.get("needs_tools")) and not record.get("attempted")


def task_scores(records: Iterable[Mapping[str, Any]], mode: str) -> list[dict[str, Any]]:
    """Per task of a mode: successes, episodes, mean steps, mean seconds, failure labels;
    worst first (lowest success rate, then most steps, then slowest)."""
    tasks: dict[str, dict[str, Any]] = {}
    for r in latest_records(records):
        if r.get("mode") != mode:
            continue
        t = tasks.setdefault(
            r["task"],
            {
                "task": r["task"],
                "kind": r.get("kind", "other"),
                "successes": 0,
                "episodes": 0,
                "steps": 0,
                "seconds": 0.0,
                "failures": [],
            },
        )
        t["episodes"] += 1
        t["successes"] += 1 if r.get("success") else 0
        t["steps"] += int(r.get("steps") or 0)
        t["seconds"] += float(r.get("seconds") or 0)
        if r.get("failure"):
            t["failures"].append(r["failure"])
    rows = list(tasks.values())
    for t in rows:
        t["rate"] = t["successes"] / t["episodes"]
        t["mean_steps"] = t["steps"] / t["episodes"]
        t["mean_seconds"] = t["seconds"] / t["episodes"]
    rows.sort(key=lambda t: (t["rate"], -t["mean_steps"], -t["mean_seconds"], t["task"]))
    return rows


def throughput(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per endpoint: episodes, wall time (first start to last end), episodes per minute, and
    prompt tokens evaluated and tokens generated per second of wall time."""
    by_endpoint: dict[str, list[Mapping[str, Any]]] = {}
    for r in latest_records(records):
        if r.get("time") is not None:
            by_endpoint.setdefault(str(r.get("endpoint") or "?"), []).append(r)
    out: dict[str, dict[str, float]] = {}
    for endpoint, rs in by_endpoint.items():
        start = min(float(r["time"]) - float(r.get("seconds") or 0) for r in rs)
        wall = max(float(r["time"]) for r in rs) - start
        usage: list[Mapping[str, Any]] = [r.get("usage") or {} for r in rs]
        evaluated = sum(
            (n if (n := u.get("prompt_evaluated")) is not None else u.get("prompt_tokens") or 0) for u in usage
        )
        generated = sum(u.get("completion_tokens") or 0 for u in usage)
        out[endpoint] = {
            "episodes": len(rs),
            "wall_seconds": wall,
            "episodes_per_minute": 60 * len(rs) / wall if wall > 0 else 0.0,
            "prompt_tokens_per_second": evaluated / wall if wall > 0 else 0.0,
            "generated_tokens_per_second": generated / wall if wall > 0 else 0.0,
        }
    return out
