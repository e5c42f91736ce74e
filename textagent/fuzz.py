"""A fuzz campaign against the parser and the argument layer: ``textagent fuzz``.

Four sources of input, each checked against the same invariants:

* the public hypothesis strategies of :mod:`textagent.testing` (noisy valid replies must give
  their calls back; near misses and garbage may only raise ``ParseError``); hypothesis shrinks a
  failure to a minimal reproducer;
* mutations of a corpus of real model replies (``textagent/fuzz_corpus/``, shipped with the
  package): characters and protocol fragments inserted, spans deleted, duplicated or blown up,
  lines swapped, replies spliced;
* the argument layer: random JSON values and strings bound to the demo tools' schemas may only
  raise ``ToolArgumentError``;
* the GBNF generator of constrained mode: random JSON schemas must give a sound grammar (a root,
  every rule it uses defined once); the real-server test sends such grammars to llama-server;
* adversarial inputs (:func:`adversarial`: 10^5 open braces, 10 MB strings, ...; the parser
  benchmark, ``benchmarks/parse_speed.py``, times them too), each of which must parse or fail in
  under 2 s.

Invariants: no exception but ``ParseError``; its line and column point inside the text; time
grows no worse than linearly (the slowest input's time per KB is reported).

``--seconds N`` is a deadline: every phase gets a share of it and checks it between inputs, so a
campaign ends within N seconds plus the last input's time. The hypothesis phases need the
``fuzz`` extra (``pip install 'textagent[fuzz]'``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._mutations import DEFAULT_CORPUS, load_corpus, minimize, mutate
from .errors import ToolArgumentError
from .protocol import ParseError, parse_reply

__all__ = [
    "DEFAULT_CORPUS",
    "Campaign",
    "Failure",
    "adversarial",
    "gbnf_problems",
    "load_corpus",
    "minimize",
    "mutate",
    "run_campaign",
]

#: What the hypothesis phases may generate when only a deadline bounds them.
_UNBOUNDED = 10**7
MISSING_HYPOTHESIS = "textagent fuzz needs hypothesis: pip install 'textagent[fuzz]'"

_SLOW_SECONDS = 2.0  # CPU seconds for one adversarial input


class _OutOfTime(BaseException):
    """Raised inside a hypothesis test once its phase's deadline has passed. Not an Exception,
    so hypothesis does not take it for a failure (and shrink it): it ends the run at once."""


def _falsified(target: Callable[..., None], count: int, seed: int) -> bool:
    """Run a hypothesis test (``@given`` applied) for up to ``count`` examples from ``seed``,
    shrinking a failure; True when it failed. The deadline ending it (_OutOfTime) is not a failure."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as hseed

    test = settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )(target)
    try:
        hseed(seed)(test)()
    except _OutOfTime:
        pass
    except AssertionError:
        return True
    return False


@dataclass
class Failure:
    source: str
    message: str
    reproducer: str

    def __str__(self) -> str:
        shown = (
            self.reproducer
            if len(self.reproducer) <= 400
            else self.reproducer[:400] + f"... ({len(self.reproducer)} chars)"
        )
        return f"[{self.source}] {self.message}\n    reproducer: {shown!r}"


@dataclass
class Campaign:
    examples: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    slowest_us_per_kb: float = 0.0
    slowest_size: int = 0
    adversarial_max_seconds: float = 0.0
    slow_seconds: float = _SLOW_SECONDS  # an adversarial input taking longer is a failure

    @property
    def total(self) -> int:
        return sum(self.examples.values())

    @property
    def ok(self) -> bool:
        return not self.failures

    def report(self) -> str:
        lines = [f"examples: {self.total:,} in {self.seconds:.1f} s ({self.total / max(self.seconds, 1e-9):,.0f}/s)"]
        lines += [f"  {name:<12} {count:>9,}" for name, count in self.examples.items()]
        lines.append(
            f"slowest input per KB (inputs >= 1 KB): {self.slowest_us_per_kb:,.0f} µs/KB ({self.slowest_size:,} chars)"
        )
        lines.append(
            f"adversarial inputs: slowest {self.adversarial_max_seconds:.2f} s (limit {self.slow_seconds:g} s)"
        )
        lines.append(f"failures: {len(self.failures)}")
        lines += [str(f) for f in self.failures[:20]]
        return "\n".join(lines)


# -- the invariant --------------------------------------------------------------------------------


def check(text: str, tools: Any = None) -> str | None:
    """None if ``parse_reply`` behaves on ``text``; else what went wrong."""
    try:
        parse_reply(text, tools)
    except ParseError as err:
        lines = text.splitlines() or [""]
        if not (1 <= err.line <= max(len(lines), 1) + 1 and err.column >= 1):
            return f"ParseError position {err.line}:{err.column} outside the text ({len(lines)} lines)"
        return None
    except Exception as exc:  # finding these is the point
        return f"{type(exc).__name__}: {exc}"
    return None


def _mutation_phase(
    campaign: Campaign, corpus: list[str], count: int, deadline: float, rng: random.Random, tools: Any
) -> None:
    done = 0
    while done < count and time.monotonic() < deadline:
        text = mutate(rng.choice(corpus), rng, corpus)
        started = _cpu()
        problem = check(text, tools if done % 2 else None)
        _timed(campaign, text, _cpu() - started, deadline)
        if problem:
            small = minimize(text, lambda t: check(t) is not None, budget=_left(deadline, 10.0))
            campaign.failures.append(Failure("mutation", check(small) or problem, small))
        done += 1
    campaign.examples["mutation"] = campaign.examples.get("mutation", 0) + done


def _left(deadline: float, most: float) -> float:
    """Seconds to spend on one more thing: at most ``most``, at least a little, else up to the deadline."""
    return max(0.5, min(most, deadline - time.monotonic()))


def _timed(campaign: Campaign, text: str, seconds: float, deadline: float = float("inf")) -> None:
    if len(text) >= 1024:
        per_kb = seconds * 1e6 / (len(text) / 1024)
        if per_kb > campaign.slowest_us_per_kb and time.monotonic() + 2 * seconds < deadline:
            # One timing on a shared machine can be a GC pause or a preemption: keep the best of three.
            best = min([seconds] + [_time_once(text) for _ in range(2)])
            per_kb = best * 1e6 / (len(text) / 1024)
            if per_kb > campaign.slowest_us_per_kb:
                campaign.slowest_us_per_kb, campaign.slowest_size = per_kb, len(text)


def _time_once(text: str) -> float:
    started = _cpu()
    check(text)
    return _cpu() - started


# CPU time of this thread: what the parser costs, whatever else the (shared) machine is doing.
_cpu = time.thread_time


# -- hypothesis phases ----------------------------------------------------------------------------


def _hypothesis_phase(campaign: Campaign, count: int, deadline: float, seed: int, tools: Any, pool: list[str]) -> None:
    """Each strategy in turn; every generated reply also joins ``pool``, the mutation corpus."""
    from hypothesis import given
    from hypothesis import strategies as st

    from . import testing

    def valid(case: tuple[list[Any], str]) -> str | None:
        calls, text = case
        try:
            got = parse_reply(text).calls
        except Exception as exc:
            return f"a valid noisy reply did not parse: {type(exc).__name__}: {exc}"
        return None if got == list(calls) else f"calls changed: {got!r} != {list(calls)!r}"

    def any_text(text: str) -> str | None:
        return check(text, tools)

    noisy = st.lists(testing.tool_calls(), min_size=1, max_size=3).flatmap(
        lambda calls: testing.noisy_replies(calls).map(lambda text: (calls, text))
    )
    sources: list[tuple[str, st.SearchStrategy[Any], Callable[[Any], str | None]]] = [
        ("noisy", noisy, valid),
        ("near-miss", testing.near_miss_replies(), any_text),
        ("garbage", testing.garbage_replies(), any_text),
        ("text", st.text(max_size=400), any_text),
        ("bytes", st.binary(max_size=400).map(lambda b: b.decode("utf-8", errors="replace")), any_text),
    ]
    per_source = max(1, count // len(sources))
    begin = time.monotonic()
    for k, (name, strategy, prop) in enumerate(sources):
        if time.monotonic() >= deadline:
            break
        # each strategy gets its share of the phase's time (the rest, if an earlier one ended early)
        ends = deadline if deadline == float("inf") else begin + (deadline - begin) * (k + 1) / len(sources)
        seen: list[int] = [0]
        failing: list[tuple[Any, str]] = []
        target = _target(prop, seen, failing, ends, pool)
        if _falsified(given(strategy)(target), per_source, seed):
            value, problem = failing[-1]
            text = value[1] if isinstance(value, tuple) else value
            campaign.failures.append(Failure(f"hypothesis:{name}", problem, text))
        campaign.examples[name] = seen[0]


def _target(
    prop: Callable[[Any], str | None], seen: list[int], failing: list[tuple[Any, str]], deadline: float, pool: list[str]
) -> Callable[[Any], None]:
    def target(value: Any) -> None:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        seen[0] += 1
        text = value[1] if isinstance(value, tuple) else value
        if len(pool) < 5000 and isinstance(text, str):
            pool.append(text)
        problem = prop(value)
        if problem:
            failing.append((value, problem))  # hypothesis shrinks: the last one is the smallest
            raise AssertionError(problem)

    return target


def _args_phase(campaign: Campaign, count: int, deadline: float, seed: int) -> None:
    """Random JSON and strings bound to the demo tools: only ToolArgumentError may come out."""
    from hypothesis import given
    from hypothesis import strategies as st

    from . import testing
    from .toolkits.demo import demo_tools

    tools = list(demo_tools().values())
    seen = [0]
    failing: list[tuple[Any, str]] = []
    values = st.one_of(
        testing.json_args(),
        st.dictionaries(st.text(max_size=8), testing.json_values()),
        st.text(max_size=200),
        testing.json_values(),
    )

    @given(st.sampled_from(tools), values)
    def target(tool: Any, args: Any) -> None:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        seen[0] += 1
        try:
            tool.bind(args)
        except ToolArgumentError:
            pass
        except Exception as exc:
            failing.append(((tool.name, args), f"{type(exc).__name__}: {exc}"))
            raise AssertionError(failing[-1][1]) from exc

    if _falsified(target, count, seed):
        (name, args), problem = failing[-1]
        campaign.failures.append(Failure("args", problem, f"{name}.bind({args!r})"))
    campaign.examples["args"] = seen[0]


def gbnf_problems(grammar: str) -> list[str]:
    """Structural checks of a GBNF text: a root rule, every referenced rule defined, once."""
    import re

    defined: dict[str, int] = {}
    referenced: set[str] = set()
    # Drop comments, string literals and character classes: what is left are rule names and operators.
    body = re.sub(r'#[^\n]*|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]', " ", grammar)
    for line in body.splitlines():
        head, sep, rest = line.partition("::=")
        if sep:
            name = head.strip()
            if not re.fullmatch(r"[a-zA-Z0-9-]+", name):
                return [f"bad rule name {name!r}"]
            defined[name] = defined.get(name, 0) + 1
            line = rest
        referenced.update(re.findall(r"[a-zA-Z][a-zA-Z0-9-]*", re.sub(r"\{[0-9, ]*\}", " ", line)))
    problems = [f"rule {n} defined {c} times" for n, c in defined.items() if c > 1]
    problems += [f"rule {n} used but not defined" for n in sorted(referenced - set(defined))]
    if "root" not in defined:
        problems.append("no root rule")
    return problems


def _gbnf_phase(campaign: Campaign, count: int, deadline: float, seed: int) -> None:
    """Random JSON schemas -> constrained mode's grammar: no crash, structurally sound GBNF."""
    from hypothesis import given
    from hypothesis import strategies as st

    from .gbnf import reply_grammar
    from .testing import json_schemas
    from .tools import Tool

    seen = [0]
    failing: list[tuple[Any, str]] = []

    @given(st.lists(json_schemas(), min_size=1, max_size=3))
    def target(schemas: list[dict[str, Any]]) -> None:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        seen[0] += 1
        try:
            tools = [Tool(f"tool_{i}", "fuzzed", schema) for i, schema in enumerate(schemas)]
        except (ValueError, TypeError):
            return  # a schema Tool itself refuses never reaches the generator
        try:
            problems = gbnf_problems(reply_grammar(tools))
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        if problems:
            failing.append((schemas, "; ".join(problems[:3])))
            raise AssertionError(failing[-1][1])

    if _falsified(target, count, seed):
        schemas, problem = failing[-1]
        campaign.failures.append(Failure("gbnf", problem, repr(schemas)))
    campaign.examples["gbnf"] = seen[0]


def adversarial(quick: bool) -> list[tuple[str, str, bool]]:
    """(name, text, is_target): the inputs the parser must read or refuse in under 2 s each are
    targets (10^5 open braces, a 10 MB string, very long lines in every argument form); the rest
    are stress cases, timed by the benchmark and not held to that."""
    big = 1_000_000 if quick else 10_000_000
    mb = 1_000_000
    return [
        ("10^5 open braces in args", "TOOL: f ARGS: " + "{" * 100_000, True),
        ("10^5 open brackets, one per line", "TOOL: f ARGS: {\n" + '"a": [\n' * 100_000, True),
        ("10^5 open braces in prose", "{" * 100_000, True),
        ("10^5 nested closed brackets", 'TOOL: f ARGS: {"a": ' + "[" * 50_000 + "]" * 50_000 + "}", True),
        (f"{big // mb} MB string in JSON args", 'TOOL: f ARGS: {"s": "' + "x" * big + '"}', True),
        (f"{big // mb} MB string in relaxed args (grammar)", "TOOL: f ARGS: {s: '" + "x" * big + "'}", True),
        (f"{big // mb} MB unterminated string", 'TOOL: f ARGS: {"s": "' + "x" * big + "}", True),
        (f"{big // mb} MB string, key=value", 'TOOL: f ARGS: s="' + "x" * big + '"', True),
        ("1 MB prose line", "word " * (mb // 5), True),
        ("1 MB bare argument", "TOOL: f ARGS: " + "1 + " * (mb // 4) + "1", True),
        ("1 MB key=value value", "TOOL: f ARGS: q=" + "a b " * (mb // 4), True),
        ("1 MB key=value value continued over 333k commas", "TOOL: f ARGS: a=x" + ", y" * (mb // 3), True),
        ("1 MB shorthand value continued over 333k commas", "TOOL: f(a=x" + ", y" * (mb // 3) + ")", True),
        ("1 MB shorthand positional", "TOOL: f(" + "a ) " * (mb // 4) + ")", True),
        ("1 MB shorthand with spaces", "TOOL: f(x=a" + " " * mb + "b)", True),
        ("1 MB of ')' and spaces", "TOOL: f(" + ") " * (mb // 2), True),
        ("1 MB tool name", "TOOL: " + "a" * mb, True),
        ("1 MB identifier before ARGS", "TOOL: f ARGS: " + "a" * mb + " x", True),
        ("10^5 blank lines after TOOL", "TOOL: f" + "\n" * 100_000 + "x", True),
        ("10^5 fence lines", "```\n" * 100_000, True),
        ("10^5 call lines (2.5 MB)", "\n".join(f'TOOL: f ARGS: {{"i": {i}}}' for i in range(100_000)), True),
        (
            "stress: 1 MB of key=value pairs (500k tokens)",
            "TOOL: f ARGS: " + ", ".join(f"k{i}=v" for i in range(mb // 8)),
            False,
        ),
        ("stress: 1 MB relaxed list (330k tokens)", "TOOL: f ARGS: {a: [" + "1, " * (mb // 3) + "]}", False),
        ("stress: 1 MB JSON list (json.loads)", 'TOOL: f ARGS: {"a": [' + "1, " * (mb // 3) + "1]}", False),
    ]


def _adversarial_phase(campaign: Campaign, deadline: float = float("inf"), *, quick: bool = False) -> None:
    """The adversarial inputs (1 MB instead of 10 MB ones when ``quick``), one by one until
    ``deadline``, the first whatever the time."""
    count = 0
    for name, text, is_target in adversarial(quick=quick):
        if not is_target:
            continue
        if count and time.monotonic() >= deadline:  # at least one, however loaded the machine
            break
        started = _cpu()
        problem = check(text)
        elapsed = _cpu() - started
        count += 1
        campaign.adversarial_max_seconds = max(campaign.adversarial_max_seconds, elapsed)
        _timed(campaign, text, elapsed, deadline)
        if problem:
            campaign.failures.append(Failure("adversarial", f"{name}: {problem}", text[:200]))
        elif elapsed > campaign.slow_seconds:
            campaign.failures.append(Failure("adversarial", f"{name}: took {elapsed:.2f} s", text[:200]))
    campaign.examples["adversarial"] = count


def run_campaign(
    *,
    examples: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    corpus_dirs: Iterable[Path | str] = (DEFAULT_CORPUS,),
    adversarial: bool = True,
    slow_seconds: float = _SLOW_SECONDS,
    progress: Callable[[str], None] = lambda _: None,
) -> Campaign:
    """Run the campaign for ``examples`` inputs or ``seconds`` of wall time (default 100,000 inputs).

    With ``seconds`` each phase ends at its share of the time (adversarial inputs 20 %, then the
    strategies up to 40 %, the argument layer up to 50 %, the grammar generator up to 60 %,
    mutations to the end); a phase that ends early leaves its time to the next ones. An adversarial
    input that takes more than ``slow_seconds`` of CPU time is a failure.
    Raises ImportError when hypothesis is not installed (the ``fuzz`` extra).
    """
    import hypothesis  # noqa: F401 - fail before anything runs

    if examples is None and seconds is None:
        examples = 100_000
    started = time.monotonic()
    deadline = started + seconds if seconds is not None else float("inf")

    def share(fraction: float) -> float:
        return started + seconds * fraction if seconds is not None else float("inf")

    def count(fraction: float, least: int) -> int:
        return max(least, int(examples * fraction)) if examples is not None else _UNBOUNDED

    from .toolkits.demo import demo_tools

    tools = demo_tools()
    campaign = Campaign(slow_seconds=slow_seconds)
    rng = random.Random(seed)
    corpus = load_corpus(corpus_dirs)
    if adversarial:
        progress("adversarial inputs ...")
        # a short campaign gets the 1 MB versions of the 10 MB inputs (the same shapes)
        _adversarial_phase(campaign, share(0.2), quick=seconds is not None and seconds < 60)
    # Hypothesis explores structure but is slow per example (~10 ms); mutation is ~1 ms. So a
    # small share goes to the strategies and what they generate seeds the mutations.
    progress("hypothesis strategies ...")
    _hypothesis_phase(campaign, count(0.03, 50), share(0.4), seed, tools, corpus)
    progress("argument layer ...")
    _args_phase(campaign, count(0.01, 20), share(0.5), seed)
    progress("grammar generator ...")
    _gbnf_phase(campaign, count(0.005, 10), share(0.6), seed)
    progress(f"mutating {len(corpus)} replies (corpus + generated) ...")
    remaining = examples - campaign.total if examples is not None else 10**12
    _mutation_phase(campaign, corpus, max(0, remaining), deadline, rng, tools)
    campaign.seconds = time.monotonic() - started
    return campaign


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from ._argtypes import positive

    parser = argparse.ArgumentParser(
        prog="textagent fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--examples", type=positive(int), help="how many inputs (default 100,000)")
    group.add_argument("--seconds", type=positive(float), help="run for this long instead")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--corpus",
        action="append",
        help="folder of reply .txt files (default: the corpus shipped in textagent/fuzz_corpus)",
    )
    parser.add_argument("--no-adversarial", action="store_true", help="skip the 1-10 MB adversarial inputs")
    args = parser.parse_args(argv)
    try:
        import hypothesis  # noqa: F401 - only whether it is installed
    except ImportError:
        print(MISSING_HYPOTHESIS, file=sys.stderr)
        return 1
    campaign = run_campaign(
        examples=args.examples,
        seconds=args.seconds,
        seed=args.seed,
        corpus_dirs=args.corpus or (DEFAULT_CORPUS,),
        adversarial=not args.no_adversarial,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
    )
    print(campaign.report())
    return 0 if campaign.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
