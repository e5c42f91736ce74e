"""Per-episode facts, the failure taxonomy, and the per-mode summary of a bench run.

Everything here is a pure function of Episodes (bench.records: made by a run, or read from the
JSON lines the runner writes), so a run can be re-summarised, or two runs compared, long after
the model is gone. The counts of an episode are those of its run (textagent.steps.Result): the
live one, or the one read back from the record's trace.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..backends.base import Usage
from ..steps import Result, Step

if TYPE_CHECKING:
    from .records import Episode

__all__ = [
    "FAILURES",
    "FAILURE_TITLES",
    "EpisodeFacts",
    "ModeSummary",
    "claimed_call",
    "classify",
    "episode_tokens",
    "facts_of",
    "latest",
    "looped",
    "native_tools",
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


@dataclass(frozen=True)
class EpisodeFacts:
    """The counts of an episode, read from its run (a Result): each defined once, on Step and
    Result (textagent.steps). ``first_prompt``/``first_evaluated``: step 1's prompt tokens sent
    and evaluated (the rest was cached); ``sent_back``/``check_notes``: answers checks sent back
    and notes they added (textagent.checks)."""

    steps: int = 0
    first_prompt: int | None = None
    first_evaluated: int | None = None
    format_errors: int = 0
    first_step_format_error: bool = False
    recovered: bool = False
    native_decode_failures: int = 0
    unrescued_decode_failures: int = 0
    tool_errors: int = 0
    sent_back: int = 0
    check_notes: int = 0
    loop: bool = False
    hallucinated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def facts_of(result: Result) -> EpisodeFacts:
    """The counts of a run (see :class:`EpisodeFacts`)."""
    first_usage = result.steps[0].usage if result.steps else Usage()
    return EpisodeFacts(
        steps=len(result.steps),
        first_prompt=first_usage.prompt_tokens,
        first_evaluated=first_usage.prompt_evaluated,
        format_errors=result.format_errors,
        first_step_format_error=result.first_step_format_error,
        recovered=result.recovered,
        native_decode_failures=result.decode_failures,
        unrescued_decode_failures=result.unrescued_decode_failures,
        tool_errors=result.tool_errors,
        sent_back=result.sent_back(),
        check_notes=result.check_notes,
        loop=looped(result.steps),
        hallucinated=result.hallucinated,
    )


def classify(episode: Episode) -> str | None:
    """The failure class of an episode (one of FAILURES), or None when it succeeded."""
    if episode.success:
        return None
    facts = episode.facts
    stop = episode.stop_reason
    attempted = episode.attempted or []
    checks = {c["type"]: c for c in episode.checks if not c.get("ok")}
    if stop in ("backend_error", "error"):
        return "backend_error"
    if episode.needs_no_tool and attempted:
        return "call_not_needed"
    if facts.hallucinated:
        return "hallucinated_observation"
    if facts.loop or stop == "repeated":  # "repeated": ended by --max-repeats
        return "loop"
    if (
        stop == "format_errors"
        or facts.unrescued_decode_failures
        or (facts.steps and facts.format_errors == facts.steps)
    ):
        return "unparseable"
    if stop in ("max_steps", "token_budget", "time_limit"):
        return "budget"
    if episode.needs_tools and not attempted:
        return "no_call"
    if "not_called" in checks:
        return "wrong_tool"
    if "calls" in checks:
        from .checking import diagnose_calls

        return diagnose_calls(episode.call_specs or [], episode.calls or []) or "invalid_args"
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


def latest(episodes: Iterable[Episode]) -> list[Episode]:
    """One episode per (task, mode, repeat): the last written wins (a resumed run re-ran it)."""
    by_key: dict[tuple[Any, ...], Episode] = {}
    for e in episodes:
        by_key[(e.task, e.mode, e.repeat)] = e
    return list(by_key.values())


def summarize(episodes: Iterable[Episode], modes: Sequence[str] | None = None) -> dict[str, ModeSummary]:
    """Per-mode metrics, in the order of ``modes`` (default: as first seen)."""
    grouped: dict[str, list[Episode]] = {}
    for e in latest(episodes):
        grouped.setdefault(e.mode, []).append(e)
    order = list(modes) if modes else list(grouped)
    order += [m for m in grouped if m not in order]
    out: dict[str, ModeSummary] = {}
    for mode in order:
        es = grouped.get(mode, [])
        s = ModeSummary(mode)
        out[mode] = s
        if not es:
            continue
        s.episodes = len(es)
        s.successes = sum(1 for e in es if e.success)
        s.ci_low, s.ci_high = wilson(s.successes, s.episodes)
        facts = [e.facts for e in es]
        steps = sum(f.steps for f in facts)
        s.mean_steps = steps / len(es)
        tokens = sum(episode_tokens(e.usage) for e in es)
        s.tokens_per_solved = tokens / s.successes if s.successes else None
        sent = sum((e.usage or {}).get("prompt_tokens") or 0 for e in es)
        s.prompt_tokens_per_episode = sent / len(es)
        cached_known = [(e.usage or {}) for e in es if (e.usage or {}).get("prompt_cached") is not None]
        cached_total = sum(u.get("prompt_tokens") or 0 for u in cached_known)
        if cached_total:
            s.kv_reuse = sum(u.get("prompt_cached") or 0 for u in cached_known) / cached_total
        firsts = [
            (f.first_prompt, f.first_evaluated)
            for f in facts
            if f.first_prompt is not None and f.first_evaluated is not None
        ]
        if firsts:
            s.first_prompt = sum(p for p, _ in firsts) / len(firsts)
            s.first_evaluated = sum(e for _, e in firsts) / len(firsts)
        s.format_error_rate = sum(f.format_errors for f in facts) / steps if steps else 0.0
        s.first_step_errors = sum(1 for f in facts if f.first_step_format_error)
        s.recovered = sum(1 for f in facts if f.recovered)
        s.recovery_rate = s.recovered / s.first_step_errors if s.first_step_errors else None
        if native_tools(mode):
            s.decode_failure_rate = sum(f.native_decode_failures for f in facts) / steps if steps else 0.0
        s.seconds_per_task = sum(float(e.seconds or 0) for e in es) / len(es)
        s.tool_errors = sum(f.tool_errors for f in facts)
        s.copied_answers = sum(copied_example(e.answer, called_tools(e)) for e in es)
        s.feedback_answers = sum(repeated_feedback(e.answer) for e in es)
        s.answered_without_call = sum(skipped_call(e) for e in es)
        for e in es:
            # recomputed: episodes stay comparable as the taxonomy evolves; a BFCL item keeps
            # the checker's label (BFCL's terms)
            label = e.failure if isinstance(e.bfcl, Mapping) else classify(e)
            if label:
                s.failures[label] = s.failures.get(label, 0) + 1
            kind = s.by_kind.setdefault(e.kind, [0, 0])
            kind[0] += 1 if e.success else 0
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
    claimed = _claimed(answer)
    return bool(claimed) and (called is None or not claimed <= set(called))


def _claimed(answer: str) -> set[str]:
    """The tools an answer says ran, in the status style's form."""
    claimed = {m.group(1) for m in _NAMED_RUN.finditer(answer)}
    status = _STATUS.search(answer)
    if status is not None:
        claimed.add(status.group(1))
    return claimed


def claimed_call(answer: Any, called: Collection[str]) -> bool:
    """Whether a final answer says a tool ran ("f ran with x 1 and reported ...") that the episode
    (or turn) did not run: ``called``, the names of the tools it ran."""
    return isinstance(answer, str) and not _claimed(answer) <= set(called)


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


def called_tools(episode: Episode) -> set[str]:
    """The names of the tools an episode ran (its ``calls``)."""
    return {str(c.get("name")) for c in episode.calls or () if isinstance(c, Mapping)}


def skipped_call(episode: Episode) -> bool:
    """An episode that needed a call and made none, answering instead (BFCL items: a category with
    calls to make whose first reply had none; the suite: a task that needs tools, no call attempted)."""
    if episode.stop_reason in ("backend_error", "error"):
        return False
    if isinstance(episode.bfcl, Mapping):
        first = episode.bfcl.get("first") or {}
        return "irrelevance" not in str(episode.kind) and first.get("error_type") == "no_call"
    return bool(episode.needs_tools) and not episode.attempted


def task_scores(episodes: Iterable[Episode], mode: str) -> list[dict[str, Any]]:
    """Per task of a mode: successes, episodes, mean steps, mean seconds, failure labels;
    worst first (lowest success rate, then most steps, then slowest)."""
    tasks: dict[str, dict[str, Any]] = {}
    for e in latest(episodes):
        if e.mode != mode:
            continue
        t = tasks.setdefault(
            e.task,
            {"task": e.task, "kind": e.kind, "successes": 0, "episodes": 0, "steps": 0, "seconds": 0.0, "failures": []},
        )
        t["episodes"] += 1
        t["successes"] += 1 if e.success else 0
        t["steps"] += int(e.steps or 0)
        t["seconds"] += float(e.seconds or 0)
        if e.failure:
            t["failures"].append(e.failure)
    rows = list(tasks.values())
    for t in rows:
        t["rate"] = t["successes"] / t["episodes"]
        t["mean_steps"] = t["steps"] / t["episodes"]
        t["mean_seconds"] = t["seconds"] / t["episodes"]
    rows.sort(key=lambda t: (t["rate"], -t["mean_steps"], -t["mean_seconds"], t["task"]))
    return rows


def throughput(episodes: Iterable[Episode]) -> dict[str, dict[str, float]]:
    """Per endpoint: episodes, wall time (first start to last end), episodes per minute, and
    prompt tokens evaluated and tokens generated per second of wall time."""
    by_endpoint: dict[str, list[Episode]] = {}
    for e in latest(episodes):
        if e.time is not None:
            by_endpoint.setdefault(str(e.endpoint or "?"), []).append(e)
    out: dict[str, dict[str, float]] = {}
    for endpoint, es in by_endpoint.items():
        start = min(float(e.time) - float(e.seconds or 0) for e in es)
        wall = max(float(e.time) for e in es) - start
        usage: list[Mapping[str, Any]] = [e.usage or {} for e in es]
        evaluated = sum(
            (n if (n := u.get("prompt_evaluated")) is not None else u.get("prompt_tokens") or 0) for u in usage
        )
        generated = sum(u.get("completion_tokens") or 0 for u in usage)
        out[endpoint] = {
            "episodes": len(es),
            "wall_seconds": wall,
            "episodes_per_minute": 60 * len(es) / wall if wall > 0 else 0.0,
            "prompt_tokens_per_second": evaluated / wall if wall > 0 else 0.0,
            "generated_tokens_per_second": generated / wall if wall > 0 else 0.0,
        }
    return out
