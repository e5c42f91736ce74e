"""What the loop does after a reply that failed, beyond sending its feedback (opt-in).

At temperature 0 the same feedback after the same reply brings the same reply again: a model
stuck on one mistake writes it until a limit ends the question. :class:`Retry` changes what the
loop *does* when a reply fails, each part on its own:

- ``vary``: a reply that repeats one that already failed in this question (the same calls, or
  the same text that did not parse) is told so, with more to act on than the first time: for an
  unknown tool the listed tools closest to its name and to the question; for bad arguments the
  tool's parameters with the wrong one marked; for a format error the corrected line, when the
  reader can build one. Calls that ran and return what the same calls returned before are a
  repeat too (the model learns nothing new from them). And a final answer that quotes the loop's
  feedback is sent back (the feedback is for the model, never the user's answer).
- ``grammar``: after a reply the grammar would have ruled out (a format error, an unknown tool,
  arguments the tool's schema refuses) in the text protocol, the next reply is asked under the
  tool set's GBNF grammar (the one constrained mode uses), so it can only name listed tools with
  arguments of their schemas; free text again after it. Needs a backend that takes a grammar
  (llama.cpp); elsewhere it does nothing. (A tool's own error or time-out is no such reply.)
- ``temperature``: a reply that repeats a failed one word for word is followed by one request
  sampled at this temperature, seeded (``seed`` plus the step's number), so runs repeat.
- ``rewind``: a reply that repeats a failed one (the same calls, or the same text that did not
  parse), or whose calls return what the same calls returned before, is not written into the
  conversation: the model is asked again from where it was, sampled (``rewind_temperature``;
  seeded), so the same text never piles up in its context (the more often a reply
  stands there, the surer the model is of it: sampling after it alone rarely changes it). The
  reply is still a step of the question, counted by its limits and kept in the trace.
- ``gate``: an answer given before any call in the question, while a listed tool is close to the
  question (``GATE_RELEVANCE``), is asked once more: the closest tools are named, and the reply
  after it is held to the grammar and sampled when those parts are on. Answering from memory is
  then a choice made twice, not a slip; the second answer is taken.
- ``odds`` (a threshold): before the question's first reply, the model's own odds of beginning
  it with a call are asked of the server (the first token's likeliest alternatives: a backend
  with ``token_probs``, in the text protocol without a grammar or a client's prefill: text mode,
  the proxy). When the likeliest token does not begin a call but the tokens that do hold at
  least ``odds`` of the probability, the reply is begun with the call keyword for the model,
  which writes the tool and its arguments. The model's own weighing tells the answer it nearly
  did not give from the one it meant; the odds are recorded (``call_odds``) whether or not they
  reach the threshold.
- ``verify`` (a threshold; with ``odds``): before a reply is begun for the model, the call the
  lead would bring is asked (not written, not streamed) and the model, in a question of its own
  outside the conversation, is asked whether that call does what the question asks
  (prompts' ``retry_verify``); the reply is begun only when its first token puts at least
  ``verify`` of the yes-or-no probability on yes (``verify_odds`` is recorded). The odds tell a
  reply the model nearly wrote; the model's own check tells whether it stands by it.
- ``abstain`` (the gate, its re-ask held to a grammar): the reply after the gate's question either
  calls listed tools or, before its answer, writes a line that names the closest listed tool and
  why it does not fit (prompts' ``retry_abstain_line``): an abstention has to be meant, in a form
  the model cannot skip. Needs a backend that takes a grammar; elsewhere it is the gate alone.
- ``errors``: an answer that comes right after calls whose results report an error (a JSON
  object with an ``"error"``, as BFCL's simulators and many web APIs answer a call they could not
  do: the call ran, so it is no failed call of the loop's) is sent back once a question, the
  errors named: the model gave up on what it was asked, or reports the error as its answer,
  where fixing the call (or first calling the tool that gets what it needs) would do it. The
  re-ask gets what a retry gets (held to the grammar, sampled, when those parts are on); the
  second answer is taken.
- ``claims``: an answer that says a listed tool ran ("f ran with x 1 and reported ...", the worked
  examples' status form) when it ran nowhere in the conversation is the model answering as if
  it had called f. Once a question, such an answer is kept out of the conversation (rewound)
  and the next reply is begun with f's call for the model (``TOOL: f ARGS:``), which writes its
  arguments: the claim says which call the model meant. With ``verify`` the call the lead would
  bring is checked first; where the model does not stand by it, the reply is asked again
  sampled instead (``rewind_temperature``, seeded). Where the begun reply cannot be used (it
  does not parse, or none of its calls passes its tool's schema), it is kept out too and the
  answer is taken after all. Not where no reply may follow (the question's last step), nor in
  a mode that cannot begin a reply or has shown the answer already (a proxy client's stream).

The :class:`Retrying` object keeps one question's memory of failed replies; the Agent makes
one per question and asks it after each reply.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import cache
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from . import prompts
from ._schema import type_label
from .examples import relevance
from .protocol import ParseError, claimed_tools, parse_reply
from .protocol.fixes import corrected_line
from .protocol.words import CALL_KEYWORD, begins_call
from .steps import Note, RetryFacts, Step
from .tools import ToolSet

__all__ = ["RETRY_PARTS", "Retry", "Retrying"]

#: The parts of a Retry by name (the bench's ``--retry``): vary, grammar, sample (the temperature), gate,
#: rewind, abstain (the gate with its re-ask held to the abstention grammar), odds (the threshold),
#: errors, verify (with odds; its threshold), claims.
RETRY_PARTS = ("vary", "grammar", "sample", "gate", "rewind", "abstain", "odds", "errors", "verify", "claims")
REWIND_TEMPERATURE = 0.7  # a rewound reply's, when the Retry sets no temperature
ODDS = 0.1  # ``--retry odds``'s threshold when none is given (``--retry-odds``)
ODDS_TOKENS = 10  # the first token's alternatives asked for the odds
VERIFY = 0.8  # ``--retry verify``'s threshold when none is given (``--retry-verify``)
VERIFY_TOKENS = 20  # the alternatives of the check's first token, where "yes" and "no" are looked for
_DESCRIPTION_CHARS = 300  # of the tool's description, in the check

_QUOTE_WORDS = 6  # words in a row of the feedback's own text that make an answer a quote of it
_CLOSEST = 3  # listed tools shown for an unknown one
_ERROR_CHARS = 300  # of one reported error, in the text that sends an answer back
RULED_OUT = ("unknown_tool", "bad_arguments")  # a call's errors the grammar rules out: it did not run
GATE_RELEVANCE = 0.3  # the share of the question's (rarity-weighted) words a tool's name and description hold


@dataclass(frozen=True)
class Retry:
    """What the loop does after a failed reply (see the module's docstring). None of it is on
    by default: each is measured before it becomes one."""

    vary: bool = False
    grammar: bool = False
    temperature: float | None = None
    seed: int = 0
    gate: bool = False
    rewind: bool = False
    rewind_temperature: float = REWIND_TEMPERATURE
    abstain: bool = False
    odds: float | None = None
    errors: bool = False
    verify: float | None = None
    claims: bool = False

    def __post_init__(self) -> None:
        for name, share in (("odds", self.odds), ("verify", self.verify)):
            if share is not None and not (
                isinstance(share, (int, float)) and not isinstance(share, bool) and 0 < share <= 1
            ):
                raise ValueError(f"Retry({name}=...) must be above 0 and at most 1; got {share!r}")
        if self.verify is not None and self.odds is None:
            raise ValueError("Retry(verify=...) checks the replies the odds would begin: it needs odds=...")
        for name, t in (("temperature", self.temperature), ("rewind_temperature", self.rewind_temperature)):
            if (t is not None or name != "temperature") and not _sampling_temperature(t):
                raise ValueError(f"Retry({name}=...) must be above 0 and at most 2; got {t!r}")
        if self.abstain and not self.gate:
            raise ValueError("Retry(abstain=True) holds the gate's re-ask to a grammar: it needs gate=True")

    @property
    def active(self) -> bool:
        return (
            self.vary
            or self.grammar
            or self.temperature is not None
            or self.gate
            or self.rewind
            or self.odds is not None
            or self.errors
            or self.claims
        )

    @classmethod
    def from_parts(
        cls, parts: str, *, temperature: float = 0.7, seed: int = 0, odds: float = ODDS, verify: float = VERIFY
    ) -> Retry:
        """A Retry from a comma-separated list of RETRY_PARTS ("none" or "": none of them);
        ``odds`` and ``verify`` are the thresholds of those parts."""
        names = [p.strip() for p in parts.split(",") if p.strip() and p.strip() != "none"]
        unknown = [n for n in names if n not in RETRY_PARTS]
        if unknown:
            raise ValueError(f"unknown retry part {unknown[0]!r}; choose from {', '.join(RETRY_PARTS)} (or none)")
        sampled = temperature if "sample" in names else None
        gate, abstain = "gate" in names or "abstain" in names, "abstain" in names  # abstain is the gate's
        threshold = odds if "odds" in names else None
        return cls(
            vary="vary" in names,
            grammar="grammar" in names,
            temperature=sampled,
            seed=seed,
            gate=gate,
            rewind="rewind" in names,
            rewind_temperature=temperature,
            abstain=abstain,
            odds=threshold,
            errors="errors" in names,
            verify=verify if "verify" in names else None,
            claims="claims" in names,
        )


def facts(step: Step) -> RetryFacts:
    """The step's retry facts, made on first use."""
    if step.retry is None:
        step.retry = RetryFacts()
    return step.retry


def _sampling_temperature(t: Any) -> bool:
    return isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and 0 < t <= 2


def _calls_key(step: Step) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, json.dumps(c.args, sort_keys=True, default=str)) for c in step.calls)


def _text_key(raw: str) -> str:
    return " ".join(raw.split())


@dataclass
class Retrying:
    """One question's memory of the replies that failed, and what the next request gets.

    ``grammars(abstain)``: the tool set's GBNF grammar when the mode speaks the text protocol and
    the backend takes a grammar (else None: no grammar retry); with ``abstain=True`` the same with
    an answer only after the abstention line, for the gate's re-ask. It is asked only when a retry
    needs a grammar (a large tool set's grammar is not free; most questions need none); the
    Agent's (``Agent.retry_grammar``) makes each once for a tool set."""

    retry: Retry
    tools: ToolSet
    task: str
    prompts: prompts.Prompts = field(default_factory=lambda: prompts.for_family("text"))
    grammars: Callable[[bool], str | None] = lambda abstain: None
    first_tokens: Callable[[int], tuple[tuple[str, float], ...]] = lambda k: ()
    sketch: Callable[[str], str] = lambda lead: ""  # the next reply begun with lead, asked, not written
    judge: Callable[[str, str], tuple[tuple[str, float], ...]] = lambda system, user: ()
    failed_texts: set[str] = field(default_factory=set)
    failed_calls: set[tuple[tuple[str, str], ...]] = field(default_factory=set)
    same_results: set[tuple[Any, ...]] = field(default_factory=set)  # (calls, their outputs) seen
    call_texts: set[str] = field(default_factory=set)  # the replies whose calls all ran
    called: bool = False  # a call was made in this question
    gated: bool = False  # the gate asked once already
    reported: tuple[tuple[str, str], ...] = ()  # (tool, error) the last calls' results reported
    errors_asked: bool = False  # an answer after reported errors was sent back once already
    ran: set[str] = field(default_factory=set)  # the tools that ran in the conversation (claims)
    claim_taken: bool = False  # an answer claiming a call was kept out once already
    claim_begun: tuple[Step, str] | None = None  # (its step, the answer) when the next reply is begun as its call
    next_options: dict[str, Any] = field(default_factory=dict)

    # -- what the next request gets ---------------------------------------------------------------
    def opening(self, step: Step) -> dict[str, str]:
        """``odds``: before the question's first reply, the model's odds of a call (recorded),
        and the request option that begins the reply with the call keyword when the likeliest
        first token does not begin a call but those that do hold ``odds`` of the probability."""
        if self.retry.odds is None or step.index != 1 or not self.tools:
            return {}
        top = self.first_tokens(ODDS_TOKENS)
        if not top:  # a backend or mode that cannot say
            return {}
        odds = sum(p for token, p in top if begins_call(token))
        facts(step).call_odds = round(odds, 4)
        if begins_call(top[0][0]) or odds < self.retry.odds:
            return {}
        if self.retry.verify is not None and not self._stands_by(step, CALL_KEYWORD):
            return {}
        facts(step).lead = CALL_KEYWORD
        return {"lead": CALL_KEYWORD}

    def _stands_by(self, step: Step, lead: str) -> bool:
        """``verify``: does the model, asked outside the conversation, say that the first call
        ``lead`` would bring does what the question asks, with at least ``verify`` of its
        yes-or-no probability? (A reply that brings no readable call, or a check with neither
        word among its likeliest first tokens: no.)"""
        try:
            calls = parse_reply(lead + self.sketch(lead), self.tools).calls
        except ParseError:
            return False
        if not calls:
            return False
        call, tool = calls[0], self.tools.get(calls[0].name)
        description = (tool.description if tool else "").strip().split("\n", 1)[0]
        check = self.prompts.template("retry_verify").substitute(
            question=self.task,
            call=f"{call.name}({json.dumps(call.args)})",
            tool=call.name,
            description=description[:_DESCRIPTION_CHARS],
        )
        said: dict[str, float] = {}
        for token, p in self.judge(self.prompts.template("retry_verify_system").substitute(), check):
            word = token.strip().lower()
            said[word] = said.get(word, 0.0) + p
        yes, no = said.get("yes", 0.0), said.get("no", 0.0)
        if yes + no <= 0:
            return False
        share = yes / (yes + no)
        facts(step).verify_odds = round(share, 4)
        return share >= (self.retry.verify or 0)

    def options_for_next(self) -> dict[str, Any]:
        """The request options of the next reply only (a grammar, a sampled temperature), then none."""
        options, self.next_options = self.next_options, {}
        return options

    def _after_failure(self, step: Step, *, word_for_word: bool, held: bool, repeat: bool = False) -> None:
        grammar = self.grammars(False) if self.retry.grammar and held else None
        if grammar is not None:
            self.next_options["grammar"] = grammar
            facts(step).grammar_next = True
        if self.retry.rewind and repeat:
            temperature = self.retry.rewind_temperature
            self.next_options.update(temperature=temperature, seed=self.retry.seed + step.index)
            facts(step).rewound, facts(step).sampled_next = True, temperature
        elif self.retry.temperature is not None and word_for_word:
            self.next_options.update(temperature=self.retry.temperature, seed=self.retry.seed + step.index)
            facts(step).sampled_next = self.retry.temperature

    # -- after a reply ----------------------------------------------------------------------------
    def format_error(self, step: Step, observation: str) -> str:
        """The observation for a reply that could not be used: ``observation``, and when the reply
        repeats a failed one (``vary``), that it does and the corrected line if one can be built."""
        key = _text_key(step.raw)
        repeated = key in self.failed_texts
        self.failed_texts.add(key)
        if repeated:
            facts(step).repeats_failed = True
        if repeated and self.retry.vary and not self.retry.rewind:
            observation += "\n" + self._repeated_format(step.raw)
            facts(step).varied = True
        self._after_failure(step, word_for_word=repeated, held=True, repeat=repeated)
        return observation

    def results_came(self, results: Iterable[tuple[str, str]]) -> None:
        """The results (tool name, output) of the calls the next reply answers: the errors they
        report are what ``errors`` names."""
        self.reported = tuple(
            (name, error) for name, output in results if (error := reported_error(output)) is not None
        )

    def calls_failed(self, step: Step) -> list[Note]:
        """After a step's results: notes for a reply repeating failed calls (``vary``), and the
        retries the next request gets. Nothing when every call worked."""
        self.called = self.called or bool(step.calls)
        self.ran.update(o.name for o in step.outcomes if o.ok)
        self.results_came((o.name, o.output) for o in step.outcomes if o.ok)
        failed = [(i, o) for i, o in enumerate(step.outcomes) if not o.ok]
        if not failed:
            return self._same_results(step)
        key, text = _calls_key(step), _text_key(step.raw)
        repeated, word_for_word = key in self.failed_calls, text in self.failed_texts
        self.failed_calls.add(key)
        self.failed_texts.add(text)
        if repeated:
            facts(step).repeats_failed = True
        ruled_out = any(o.error in RULED_OUT for _, o in failed)
        self._after_failure(step, word_for_word=word_for_word, held=ruled_out, repeat=repeated)
        if not (repeated and self.retry.vary) or step.rewound:
            return []
        facts(step).varied = True
        notes = [Note("retry", text, i) for i, o in failed if (text := self._repeated_call(step, i, o.error))]
        return notes

    def _same_results(self, step: Step) -> list[Note]:
        """Calls that ran and returned what the same calls returned before in the question: the
        model learns nothing new from them (a simulator's ``{"error": ...}`` comes back as a
        result), so a repeat is treated as a failed reply's: told so (``vary``), the next reply
        sampled after a word-for-word repeat, or the repeat kept out of the conversation (``rewind``)."""
        key, text = (_calls_key(step), tuple(o.output for o in step.outcomes)), _text_key(step.raw)
        seen, word_for_word = key in self.same_results, text in self.call_texts
        self.same_results.add(key)
        self.call_texts.add(text)
        if not step.calls or not seen:
            return []
        facts(step).repeats_results = True
        self._after_failure(step, word_for_word=word_for_word, held=False, repeat=True)
        if not self.retry.vary or step.rewound:
            return []
        facts(step).varied = True
        return [Note("retry", self.prompts.template("retry_same_results").substitute())]

    def claimed(self, step: Step, answer: str) -> bool:
        """``claims``: whether ``answer`` is kept out of the conversation, once a question, because
        it says a listed tool ran that ran nowhere in the conversation; the next reply is then
        begun with that tool's call (or, with ``verify`` where the model does not stand by that
        call, asked again sampled). The caller asks only where a reply may follow and be begun."""
        if not self.retry.claims or self.claim_taken:
            return False
        tool = next((name for name in claimed_tools(answer) if name in self.tools and name not in self.ran), None)
        if tool is None:
            return False
        self.claim_taken = True
        facts(step).claimed, facts(step).rewound = tool, True
        lead = f"{CALL_KEYWORD} {tool} ARGS:"
        if self.retry.verify is None or self._stands_by(step, lead):
            self.next_options["lead"] = lead
            self.claim_begun = (step, answer)
        else:
            temperature = self.retry.rewind_temperature
            self.next_options.update(temperature=temperature, seed=self.retry.seed + step.index)
            facts(step).sampled_next = temperature
        return True

    def claim_for(self, step: Step) -> tuple[Step, str] | None:
        """When ``step`` is the reply begun as the call an answer claimed: that answer's step and
        text (taken after all where the begun reply cannot be used: nothing is lost), else None."""
        begun = self.claim_begun
        return begun if begun is not None and step.index == begun[0].index + 1 else None

    def send_back(self, step: Step, answer: str) -> str | None:
        """The text to send back instead of taking a final answer (it quotes the feedback, or the
        gate asks once more), else None."""
        return self.quotes_feedback(step, answer) or self.gate_answer(step) or self.error_answer(step)

    def error_answer(self, step: Step) -> str | None:
        """``errors``: the text asking once more when an answer comes right after calls whose
        results report an error (once a question); else None."""
        if not self.retry.errors or not self.reported or self.errors_asked:
            return None
        self.errors_asked = True
        facts(step).after_error = True
        self._after_failure(step, word_for_word=True, held=True)
        errors = "\n".join(f"- {name}: {error}" for name, error in self.reported)
        return self.prompts.template("retry_error_result").substitute(errors=errors)

    def gate_answer(self, step: Step) -> str | None:
        """``gate``: the text asking once more when the question's first answer came before any
        call while a listed tool is close to the question; else None."""
        if not self.retry.gate or self.called or self.gated or not self.tools:
            return None
        tools = list(self.tools.values())
        close = relevance([f"{t.name.replace('_', ' ')} {t.description}" for t in tools], self.task)
        ranked = [i for i in sorted(range(len(tools)), key=lambda i: (-close[i], i)) if close[i] >= GATE_RELEVANCE]
        if not ranked:
            return None
        self.gated = True
        facts(step).gated = True
        abstention = self.grammars(True) if self.retry.abstain else None
        # the re-ask gets what a retry gets, the abstention grammar in place of the plain one
        self._after_failure(step, word_for_word=True, held=abstention is None)
        if abstention is not None:
            self.next_options["grammar"] = abstention
            facts(step).grammar_next = True
        listed = "\n".join(_usage_line(tools[i]) for i in ranked[:_CLOSEST])
        return self.prompts.template("retry_gate").substitute(tools=listed)

    def quotes_feedback(self, step: Step, answer: str) -> str | None:
        """The text to send back when a final answer quotes the loop's feedback (``vary``; once
        for each answer: the same answer again is taken), else None."""
        if not self.retry.vary:
            return None
        quoted = _quoted(answer, self.prompts)
        if quoted is None or _text_key(step.raw) in self.failed_texts:
            return None
        self.failed_texts.add(_text_key(step.raw))
        facts(step).quoted_feedback = quoted
        return self.prompts.template("retry_quoted").substitute(quoted=quoted)

    # -- the words ------------------------------------------------------------------------------
    def _repeated_format(self, raw: str) -> str:
        line = corrected_line(raw, self.tools) if self.prompts.family != "native" else None
        if line is not None:
            return self.prompts.template("retry_format_fixed").substitute(line=line)
        return self.prompts.template("retry_format").substitute()

    def _repeated_call(self, step: Step, index: int, error: str | None) -> str:
        call = step.calls[index]
        if error == "unknown_tool":
            return self.prompts.template("retry_unknown").substitute(name=call.name, tools=self._closest(call.name))
        if error == "bad_arguments" and call.name in self.tools:
            return self.prompts.template("retry_arguments").substitute(
                name=call.name, parameters=_marked(self.tools[call.name], call.args)
            )
        return self.prompts.template("retry_same_call").substitute(name=call.name)

    def _closest(self, name: str) -> str:
        """The listed tools closest to ``name`` and to the question, one a line with its usage:
        how much of the name and the question each tool's name and description speak of, and
        how alike the names are written."""
        tools = list(self.tools.values())
        spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).replace("_", " ").replace(".", " ")
        said = relevance([f"{t.name.replace('_', ' ')} {t.description}" for t in tools], f"{spaced} {self.task}")
        score = [s + 0.5 * SequenceMatcher(None, name.lower(), t.name.lower()).ratio() for s, t in zip(said, tools)]
        ranked = sorted(range(len(tools)), key=lambda i: (-score[i], i))[:_CLOSEST]
        return "\n".join(_usage_line(tools[i]) for i in ranked)


def reported_error(output: str) -> str | None:
    """The error a call's result reports: the ``"error"`` of a result that is a JSON object with
    one that is not empty (a string, else its JSON), at most ``_ERROR_CHARS``; else None."""
    text = output.strip()
    if not text.startswith("{") or '"error"' not in text:
        return None
    try:
        value = json.loads(text)
    except ValueError:  # cut to the observation limit, or not JSON at all
        return None
    error = value.get("error") if isinstance(value, dict) else None
    if error in (None, False, "", {}, []):
        return None
    said = error if isinstance(error, str) else json.dumps(error, default=str)
    return " ".join(said.split())[:_ERROR_CHARS]


def _usage_line(tool: Any) -> str:
    first = (tool.description or "").strip().split("\n", 1)[0][:160]
    return f"- {tool.signature()}" + (f": {first}" if first else "")


def _marked(tool: Any, args: Any) -> str:
    """The tool's parameters, one a line, the ones the call got wrong marked: missing, not a
    parameter, or a value its schema refuses."""
    given = args if isinstance(args, dict) else {}
    props, required = tool.properties, set(tool.required)
    lines = []
    for key, schema in props.items():
        mark = ""
        if key in given and _refuses(schema, given[key]):
            mark = prompts.template("retry_mark_value.txt").substitute(value=json.dumps(given[key], default=str)[:80])
        elif key not in given and key in required:
            mark = prompts.template("retry_mark_missing.txt").substitute()
        lines.append(f"- {key}{'' if key in required else '?'}: {_type_of(schema)}{mark}")
    for key in tool.unexpected(given):
        lines.append(f"- {key}" + prompts.template("retry_mark_unexpected.txt").substitute())
    return "\n".join(lines)


def _type_of(schema: Any) -> str:
    return type_label(schema if isinstance(schema, dict) else {})


def _refuses(schema: Any, value: Any) -> bool:
    """Does the parameter's own schema refuse ``value``? (A schema that cannot be checked: no.)"""
    if not isinstance(schema, dict):
        return False
    try:
        return not Draft202012Validator(schema).is_valid(value)
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError, RecursionError):
        return False


# the templates whose fixed words are feedback: an answer holding a run of them quotes the loop
_FEEDBACK_TEMPLATES = (
    "observation_error",
    "format_error",
    "empty_reply",
    "retry_format",
    "retry_format_fixed",
    "retry_unknown",
    "retry_arguments",
    "retry_same_call",
    "retry_error_result",
)


def _words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + _QUOTE_WORDS]) for i in range(len(words) - _QUOTE_WORDS + 1)}


@cache
def _fixed_runs(family_name: str) -> frozenset[tuple[str, ...]]:
    """Runs of ``_QUOTE_WORDS`` words of the feedback templates' fixed text (not their fields)."""
    family = prompts.for_family(family_name)
    runs: set[tuple[str, ...]] = set()
    for name in _FEEDBACK_TEMPLATES:
        for piece in re.split(r"\$\w+|\$\{\w+\}", family.template(name).template):
            runs |= _runs(_words_of(piece))
    return frozenset(runs)


def _quoted(answer: str, family: prompts.Prompts) -> str | None:
    """The words of the loop's feedback that ``answer`` holds (a run of ``_QUOTE_WORDS``), if any."""
    words = _words_of(answer)
    fixed = _fixed_runs(family.family)
    for i in range(len(words) - _QUOTE_WORDS + 1):
        if tuple(words[i : i + _QUOTE_WORDS]) in fixed:
            return " ".join(words[i : i + _QUOTE_WORDS])
    return None
