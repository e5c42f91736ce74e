"""What a run records: one Step per model reply, one Result per run.

Kept apart from the loop (agent.py) so that modes and checks can read steps without importing
the Agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from .backends.base import Completion, Usage
from .protocol import Dropped, ParseError, Reply, ToolCall
from .tools import ToolOutcome

__all__ = [
    "STOP_REASONS",
    "EarlyStopFacts",
    "NativeFacts",
    "Note",
    "Result",
    "RetryFacts",
    "SentBack",
    "Step",
    "TextFacts",
    "tokens_spent",
]

# "submitted": a mode that runs no tools handed a usable reply on (the proxy's, to its client)
STOP_REASONS = (
    "answer",
    "max_steps",
    "token_budget",
    "time_limit",
    "format_errors",
    "repeated",
    "call_errors",
    "backend_error",
    "submitted",
)


@dataclass(frozen=True)
class Note:
    """Text added after a step's results: by a check (``source`` is its name) or by the loop
    (``"refused_calls"``). ``outcome`` is the index of the result it belongs to; None: the step."""

    source: str
    text: str
    outcome: int | None = None


@dataclass(frozen=True)
class SentBack:
    """A final answer a check did not accept: the check's name, the text sent back, and what the
    check found (e.g. the numbers no result holds), for traces and reports."""

    check: str
    text: str
    found: tuple[Any, ...] = ()


@dataclass(frozen=True)
class EarlyStopFacts:
    """A streamed reply closed after its complete calls: how much was kept and what was dropped."""

    kept_chars: int
    dropped_chars: int
    dropped: str


@dataclass
class TextFacts:
    """What the text modes note about a reply."""

    early_stop: EarlyStopFacts | None = None


@dataclass
class NativeFacts:
    """What native modes note about a reply: ``native`` is where the server put it
    ("tool_calls" or "content"); ``decode_failure`` the kind of call found in the content
    (``content_calls``: what it held); ``fallback`` that native+fallback ran those calls;
    ``invalid_arguments`` call index -> why its arguments could not be read."""

    native: str = "content"
    tool_calls: list[Any] = field(default_factory=list)
    invalid_arguments: dict[int, str] = field(default_factory=dict)
    decode_failure: str | None = None
    content_calls: list[dict[str, Any]] = field(default_factory=list)
    fallback: bool = False
    fallback_error: str | None = None


@dataclass
class RetryFacts:
    """What the loop's retries (textagent.retry) did about one reply. Of the request: ``grammar``
    (it was held to the tool set's grammar), ``temperature`` and ``seed`` (it was sampled). Of the
    reply: ``repeats_failed`` (it repeats a failed reply of the question), ``repeats_results`` (its
    calls returned what they returned before), ``varied`` (it was told so in more words),
    ``rewound`` (kept out of the conversation), ``gated`` (an answer asked once more),
    ``quoted_feedback`` (the words of the feedback an answer held), ``after_error`` (an answer
    sent back: it came right after calls whose results reported an error). Of the next request:
    ``grammar_next``, ``sampled_next`` (its temperature). Before the reply (``odds``):
    ``call_odds`` (the probability the model put on beginning it with a call), ``lead`` (the
    text it was begun with for the model: the call keyword; in text mode the step's ``raw``
    begins with it, in the proxy's ``raw`` is what followed it, as after a client's prefill),
    ``verify_odds`` (the share of yes in the model's yes-or-no on the call the lead would bring).
    Of an answer (``claims``): ``claimed`` (the listed tool it said ran, which had not: it was
    kept out, and the next reply begun with that tool's call, its ``lead``)."""

    grammar: bool = False
    temperature: float | None = None
    seed: int | None = None
    repeats_failed: bool = False
    repeats_results: bool = False
    varied: bool = False
    rewound: bool = False
    gated: bool = False
    quoted_feedback: str | None = None
    after_error: bool = False
    grammar_next: bool = False
    sampled_next: float | None = None
    call_odds: float | None = None
    lead: str | None = None
    verify_odds: float | None = None
    claimed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The facts that are set (a trace's ``details["retry"]``): a number is kept when it is 0."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None and v is not False}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetryFacts:
        """The facts of a trace's ``details["retry"]`` (keys it does not know are left out)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Step:
    """One model reply and everything done about it.

    ``facts`` is what the mode noted about the reply (TextFacts in the text modes, NativeFacts
    in the native ones); ``retry`` what the loop's retries did
    (RetryFacts, None when nothing). ``extra`` is free for what else annotates a step: a mode
    without facts of its own (bfcl-prompt's decoding), the proxy's repairs."""

    index: int
    raw: str
    reply: Reply | None = None
    parse_error: ParseError | None = None
    outcomes: list[ToolOutcome] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    finish_reason: str | None = None
    retries: int = 0
    facts: TextFacts | NativeFacts | None = None
    notes: list[Note] = field(default_factory=list)
    sent_back: SentBack | None = None
    refused_calls: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    stop_word: str | None = None
    retry: RetryFacts | None = None

    @property
    def calls(self) -> list[ToolCall]:
        return list(self.reply.calls) if self.reply else []

    # What the counts of a run (Result) and of a bench episode (bench.metrics) are made of: each
    # defined once, here, and read the same from a live step and from one read back from a trace.
    @property
    def format_error(self) -> bool:
        """The reply could not be used: it did not parse, or it was empty."""
        return self.reply is None

    @property
    def call_failed(self) -> bool:
        """A call of the reply failed: an unknown tool, bad arguments, a refusal, a tool that
        raised or timed out."""
        return any(not o.ok for o in self.outcomes)

    @property
    def decode_failure(self) -> str | None:
        """Native modes: the kind of call the reply's content held that the server did not return
        as ``tool_calls`` (NativeFacts); None for every other step."""
        kind = self._noted("decode_failure")
        return str(kind) if kind else None

    @property
    def rescued(self) -> bool:
        """native+fallback ran the calls it read from such content."""
        return bool(self._noted("fallback"))

    @property
    def rewound(self) -> bool:
        """A repeat the loop kept out of the conversation (textagent.retry's ``rewind``): the
        model was asked again from before it."""
        return self.retry is not None and self.retry.rewound

    def _noted(self, name: str) -> Any:
        """One entry of :attr:`details` without making all of it: ``extra`` first (a step read
        back from a trace holds the mode's facts there), then the mode's facts."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self.facts, name, None) if is_dataclass(self.facts) else None

    @property
    def hallucinated(self) -> bool:
        """The model wrote a result of its own: an ``OBSERVATION`` line the parser dropped, or a
        reply with no call cut at the ``OBSERVATION`` stop word."""
        if self.reply is not None and any(d.kind == "observation" for d in self.reply.dropped):
            return True
        cut_at_observation = (self.stop_word or "").strip().upper().startswith("OBSERVATION")
        return cut_at_observation and not self.calls and not self.outcomes

    @property
    def details(self) -> dict[str, Any]:
        """Everything noted about the step as one JSON-able dict (what traces record): the mode's
        facts that are set, notes, the answer sent back, refused calls, and ``extra``."""
        out: dict[str, Any] = {}
        if is_dataclass(self.facts):
            out.update(
                {
                    f.name: v
                    for f in fields(self.facts)
                    if (v := getattr(self.facts, f.name)) not in (None, False, (), [], {})
                }
            )
            out = {k: (asdict(v) if is_dataclass(v) and not isinstance(v, type) else v) for k, v in out.items()}
        if self.notes:
            out["notes"] = [asdict(n) for n in self.notes]
        if self.sent_back is not None:
            out["sent_back"] = {
                "check": self.sent_back.check,
                "text": self.sent_back.text,
                "found": list(self.sent_back.found),
            }
        if self.refused_calls:
            out["refused_calls"] = self.refused_calls
        if self.retry is not None:
            out["retry"] = self.retry.to_dict()
        out.update(self.extra)
        return out

    def to_record(self) -> dict[str, Any]:
        """The step as one JSON-able record, the form every trace line of a step has (written by
        trace.TraceWriter; the bench's come from trace.run_records): what the model said, how it
        was read, what ran, what it was told, what it cost, and :attr:`details`.
        :meth:`from_record` reads it back."""
        err = self.parse_error
        return {
            "type": "step",
            "step": self.index,
            "raw": self.raw,
            "calls": [c.to_dict() for c in self.calls],
            "answer": self.reply.answer if self.reply else None,
            "parse_error": None
            if err is None
            else {"message": err.message, "line": err.line, "column": err.column, "label": getattr(err, "label", None)},
            "format_error": self.reply is None,
            "dropped": [d.to_dict() for d in (self.reply.dropped if self.reply else [])],
            "outcomes": [
                {"name": o.name, "args": o.args, "ok": o.ok, "error": o.error, "seconds": round(o.seconds, 6)}
                for o in self.outcomes
            ],
            "observations": self.observations,
            "usage": self.usage.to_dict(),
            "timings": self.timings,
            "finish_reason": self.finish_reason,
            "retries": self.retries,
            "stop_word": self.stop_word,
            "details": self.details,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Step:
        """A step from its record (:meth:`to_record`, a trace line). What a record does not hold
        stays empty: the reply's thought, the tools' outputs (the observations have them), the
        mode's facts (their values are in ``extra``, so ``details`` reads the same)."""
        calls = [ToolCall(c["name"], c.get("args", {}), c.get("id")) for c in record.get("calls") or []]
        extra = dict(record.get("details") or {})
        # what details was made of goes back to its fields, so that details reads the same
        notes = [Note(n["source"], n["text"], n.get("outcome")) for n in extra.pop("notes", None) or []]
        retry = extra.pop("retry", None)
        sent = extra.pop("sent_back", None)
        sent_back = None if not sent else SentBack(sent["check"], sent["text"], tuple(sent.get("found") or ()))
        dropped = [Dropped(d["kind"], d["line"], d["text"]) for d in record.get("dropped") or []]
        err = record.get("parse_error")
        return cls(
            index=int(record.get("step") or 0),
            raw=record.get("raw", ""),
            reply=None if record.get("format_error") else Reply(calls, record.get("answer"), "", dropped),
            parse_error=None
            if not err
            else ParseError(
                err["message"],
                line=err.get("line", 1),
                column=err.get("column", 1),
                label=err.get("label") or "bad_call",
            ),
            outcomes=[
                ToolOutcome(o["name"], o.get("args", {}), bool(o.get("ok")), "", o.get("error"), o.get("seconds", 0.0))
                for o in record.get("outcomes") or []
            ],
            observations=list(record.get("observations") or []),
            usage=Usage.from_dict(record.get("usage")),
            timings=dict(record.get("timings") or {}),
            finish_reason=record.get("finish_reason"),
            retries=record.get("retries", 0),
            notes=notes,
            sent_back=sent_back,
            refused_calls=int(extra.pop("refused_calls", 0)),
            extra=extra,
            stop_word=record.get("stop_word"),
            retry=RetryFacts.from_dict(retry) if isinstance(retry, dict) else None,
        )


@dataclass
class Result:
    answer: str | None
    stop_reason: str
    steps: list[Step]
    usage: Usage
    seconds: float
    error: BaseException | None = None
    transcript: str = ""
    mode: str = "text"

    @property
    def ok(self) -> bool:
        return self.stop_reason == "answer"

    @property
    def format_errors(self) -> int:
        """Replies that could not be used (they did not parse, or were empty)."""
        return sum(s.format_error for s in self.steps)

    @property
    def first_step_format_error(self) -> bool:
        return bool(self.steps) and self.steps[0].format_error

    @property
    def recovered(self) -> bool:
        """The first reply could not be used and a later one could: the feedback worked."""
        return self.first_step_format_error and any(not s.format_error for s in self.steps[1:])

    @property
    def tool_errors(self) -> int:
        return sum(not o.ok for s in self.steps for o in s.outcomes)

    def time_spent(self) -> dict[str, float]:
        """Where the run's seconds went: ``prefix`` (the fixed prompt prefix restored or saved:
        backends/prefix_cache.py), ``prompt`` (prompt tokens evaluated), ``generation`` (tokens
        generated), ``tools``, and ``other`` (HTTP, parsing, the loop: the rest of ``seconds``).
        The model's parts are the server's own timings, where it reports them (llama.cpp)."""
        ms = [s.timings for s in self.steps]
        spent = {
            "prefix": sum(t.get("prefix_ms", 0.0) for t in ms) / 1000,
            "prompt": sum(t.get("prompt_ms", 0.0) for t in ms) / 1000,
            "generation": sum(t.get("predicted_ms", 0.0) for t in ms) / 1000,
            "tools": sum(o.seconds for s in self.steps for o in s.outcomes),
        }
        spent["other"] = max(0.0, self.seconds - sum(spent.values()))
        return {k: round(v, 3) for k, v in spent.items()}

    @property
    def decode_failures(self) -> int:
        """Native modes: replies whose content held a call the server did not decode."""
        return sum(s.decode_failure is not None for s in self.steps)

    @property
    def unrescued_decode_failures(self) -> int:
        """Decode failures native+fallback did not run the calls of (all of them in native)."""
        return sum(s.decode_failure is not None and not s.rescued for s in self.steps)

    @property
    def hallucinated(self) -> bool:
        return any(s.hallucinated for s in self.steps)

    @property
    def check_notes(self) -> int:
        """Notes checks added after results (the loop's own refusals are not counted)."""
        return sum(n.source != "refused_calls" for s in self.steps for n in s.notes)

    @property
    def early_stops(self) -> int:
        """Text modes with streaming: replies whose stream was closed after a complete call."""
        return sum(getattr(s.facts, "early_stop", None) is not None for s in self.steps)

    def sent_back(self, check: str | None = None) -> int:
        """Answers sent back (by the check named ``check``; None: by any)."""
        return sum(s.sent_back is not None and check in (None, s.sent_back.check) for s in self.steps)


def tokens_spent(completion: Completion, prompt: Callable[[], str]) -> int:
    """What a reply cost the run's token budget: the prompt tokens the server evaluated (all of
    them when it does not say which were cached) plus the completion's. A backend that reports
    nothing is counted at ~4 characters a token, of ``prompt()`` and of the reply."""
    u = completion.usage
    prompt_cost = u.prompt_evaluated if u.prompt_evaluated is not None else u.prompt_tokens
    if prompt_cost is None:
        prompt_cost = len(prompt()) // 4
    completion_cost = u.completion_tokens if u.completion_tokens is not None else len(completion.text) // 4 + 1
    return prompt_cost + completion_cost
