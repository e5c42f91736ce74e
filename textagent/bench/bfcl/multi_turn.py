"""BFCL's multi-turn categories: the items, BFCL's own API simulators and executor, BFCL's checker.

An item is a conversation of 1-8 user turns over stateful simulated APIs (a file system, a
trading bot, travel booking, vehicle control, messaging, posting, tickets, math). BFCL's own
code does the work, imported from the pinned ``bfcl-eval`` wheel as it lies in the cache (a zip
on ``sys.path``; no network, nothing installed): the simulators
(``func_source_code``), the executor (``multi_turn_utils.execute_multi_turn_func_call``) and the
checker (``multi_turn_checker.multi_turn_checker``). ``bfcl_eval.constants.eval_config`` is
never imported (it creates folders next to the package).

    items = load_multi_turn("multi_turn_base")
    sim = Simulator(items[0])               # a fresh state of the item's classes
    sim.execute("cd", {"folder": "document"})
    score = score_item(items[0], turns)     # BFCL's verdict, and how many turns from the start are right
    sim.close()

The executor caches each instance in its module's globals under a name made of a model name,
the item's id and the class: every Simulator and every scoring uses a name of its own and
deletes its entries afterwards, so no episode sees another's state.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...tools.execution import remaining_time
from .bounds import bound_math_api
from .data import BfclDataError, _read_lines, fetch_wheel, split_of
from .schema import language_hint

__all__ = [
    "MAX_CALL_STEPS",
    "MULTI_TURN_CATEGORIES",
    "ItemScore",
    "MultiTurnItem",
    "Simulator",
    "SimulatorTimeout",
    "call_string",
    "load_multi_turn",
    "runtime",
    "score_item",
]

MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: BFCL's MAXIMUM_STEP_LIMIT: a user turn whose model has made this many steps with calls and
#: calls again is force-quit, and with it the whole item.
MAX_CALL_STEPS = 20

_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
_UTILS = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
_CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
_MATH_API = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api"


@dataclass(frozen=True)
class MultiTurnItem:
    """One multi-turn item: its user turns (a held-out turn is empty and gets ``held_out[turn]``
    instead), the simulators' classes and their initial state, the functions offered from the
    start (BFCL's documents with its Python note) and BFCL's ground truth, a list of call
    strings per turn."""

    id: str
    category: str
    index: int
    turns: tuple[tuple[dict[str, Any], ...], ...]
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    functions: tuple[dict[str, Any], ...]
    held_out: Mapping[int, tuple[dict[str, Any], ...]]
    ground_truth: tuple[tuple[str, ...], ...]

    @property
    def split(self) -> str:
        return split_of(self.index)

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def turn_text(self, turn: int) -> str:
        return "\n\n".join(str(m.get("content", "")) for m in self.turns[turn] if m.get("role") == "user")

    def tool_set_key(self) -> tuple[str, ...]:
        """Items with the same key get the same system prompt (for ordering runs so it stays cached)."""
        return (*sorted(self.involved_classes), *(f["name"] for f in self.functions))

    def entry(self) -> dict[str, Any]:
        """The test entry as BFCL's checker reads it."""
        return {
            "id": self.id,
            "initial_config": copy.deepcopy(dict(self.initial_config)),
            "involved_classes": list(self.involved_classes),
        }


def _hinted_docs(zf: zipfile.ZipFile, classes: Sequence[str]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in classes:
        if name not in _DOC_FILES:
            raise BfclDataError(f"unknown BFCL class {name!r}")
        docs += _read_lines(zf, f"bfcl_eval/data/multi_turn_func_doc/{_DOC_FILES[name]}")
    return docs


@lru_cache(maxsize=8)
def _load(wheel: str, category: str) -> tuple[MultiTurnItem, ...]:
    with zipfile.ZipFile(wheel) as zf:
        rows = _read_lines(zf, f"bfcl_eval/data/BFCL_v4_{category}.json")
        truth = {
            r["id"]: r["ground_truth"]
            for r in _read_lines(zf, f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")
        }
        items = []
        for index, row in enumerate(rows):
            classes = list(row.get("involved_classes") or [])
            docs = [d for d in _hinted_docs(zf, classes) if d["name"] not in (row.get("excluded_function") or [])]
            held: dict[int, tuple[dict[str, Any], ...]] = {}
            for turn, names in (row.get("missed_function") or {}).items():
                taken = [d for d in docs if d["name"] in names]
                docs = [d for d in docs if d["name"] not in names]
                held[int(turn)] = tuple(taken)
            answer = truth.get(row["id"])
            if answer is None:
                raise BfclDataError(f"{row['id']}: no possible answer in the wheel")
            turns = tuple(tuple(t) for t in row["question"])
            if len(turns) != len(answer):
                raise BfclDataError(f"{row['id']}: {len(turns)} turns but {len(answer)} ground-truth turns")
            items.append(
                MultiTurnItem(
                    row["id"],
                    category,
                    index,
                    turns,
                    row.get("initial_config") or {},
                    tuple(classes),
                    # BFCL adds its language note to the functions offered, not to the held-out ones
                    tuple(language_hint(docs, "python")),
                    held,
                    tuple(tuple(t) for t in answer),
                )
            )
    return tuple(items)


def load_multi_turn(
    category: str, *, wheel: Path | None = None, progress: Callable[[str], None] = lambda _: None
) -> list[MultiTurnItem]:
    """Every item of one multi-turn category, in BFCL's order."""
    if category not in MULTI_TURN_CATEGORIES:
        raise BfclDataError(f"unknown multi-turn category {category!r}; choose from {', '.join(MULTI_TURN_CATEGORIES)}")
    return list(_load(str(wheel or fetch_wheel(progress=progress)), category))


# -- BFCL's own code, from the wheel -----------------------------------------------------------

_lock = threading.RLock()
_names = itertools.count()


def runtime(wheel: Path | None = None) -> tuple[Any, Any]:
    """(BFCL's multi_turn_utils module, its multi_turn_checker module), imported from the wheel.
    Raises BfclDataError, naming the extra to install, when ``mpmath`` (the math API's) is missing."""
    try:
        import mpmath  # noqa: F401 - BFCL's MathAPI imports it
    except ImportError:
        raise BfclDataError("BFCL's multi-turn simulators need mpmath: pip install 'textagent[bench]'") from None
    path = str(wheel or fetch_wheel())
    with _lock:
        if path not in sys.path:
            sys.path.append(path)  # zipimport: the package is read from the wheel as it lies
        try:
            modules = importlib.import_module(_UTILS), importlib.import_module(_CHECKER)
            bound_math_api(importlib.import_module(_MATH_API).MathAPI)
        except ImportError as exc:
            raise BfclDataError(f"BFCL's multi-turn code could not be imported from {path}: {exc}") from exc
        return modules


def call_string(name: str, args: Mapping[str, Any]) -> str:
    """A call as BFCL's executor takes it, built from parsed arguments (``repr`` of each value):
    never text the model wrote."""
    return f"{name}(" + ",".join(f"{k}={v!r}" for k, v in args.items()) + ")"


def _forget(module: Any, model_name: str) -> None:
    """Delete the executor's cached instances made under ``model_name``."""
    with _lock:
        for key in [k for k in vars(module) if k.startswith(model_name)]:
            del vars(module)[key]


class SimulatorTimeout(TimeoutError):
    """A call of a simulator did not run, or did not end, within the tool call's time."""


class Simulator:
    """A fresh state of one item's classes, run by BFCL's executor; ``execute`` returns the
    result text the model reads (exactly what BFCL's checker gets when it replays the call).

    BFCL's code runs under one lock (mpmath's precision is global to the process). Inside a tool
    call with a timeout (``tools.execution.remaining_time``) the lock is waited for and held only
    until the call's deadline: a call still running then is left to end on its own thread, the
    lock is let go and SimulatorTimeout raised, so no other episode waits on it; this
    simulator's next call waits (within its own time) until it has ended, so no two calls ever
    change one state at once."""

    def __init__(self, item: MultiTurnItem, *, wheel: Path | None = None):
        self.item = item
        self.utils, _ = runtime(wheel)
        self.model_name = f"textagent_sim_{next(_names)}"
        self.names = {d["name"] for d in item.functions}
        self._idle = threading.Event()  # no call of this simulator is running
        self._idle.set()
        self.execute_strings([])  # instantiate the classes now

    def add_functions(self, docs: Sequence[Mapping[str, Any]]) -> None:
        self.names |= {str(d["name"]) for d in docs}

    def _run(self, calls: Sequence[str]) -> list[str]:
        results, _ = self.utils.execute_multi_turn_func_call(
            list(calls),
            self.item.initial_config,
            list(self.item.involved_classes),
            self.model_name,
            self.item.id,
            long_context=self.item.long_context,
            is_evaL_run=False,
        )
        return [str(r) for r in results]

    def execute_strings(self, calls: Sequence[str]) -> list[str]:
        """The results of ``calls``; raises SimulatorTimeout when the tool call running this has a
        deadline and they did not end by it."""
        left = remaining_time()
        deadline = None if left is None else time.monotonic() + left
        if not self._idle.wait(0.0 if left is None else left):  # without a deadline: not at all
            raise SimulatorTimeout("the simulator's previous call, which timed out, has not ended")
        if deadline is None:  # no deadline (making the simulator, a caller without a timeout)
            with _lock:
                return self._run(calls)
        if not _lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise SimulatorTimeout("BFCL's simulators stayed busy for the whole call")
        box: list[Any] = []
        worker = threading.Thread(target=self._work, args=(calls, box), name="textagent-bfcl-sim", daemon=True)
        try:
            self._idle.clear()
            try:
                worker.start()
            except BaseException:
                self._idle.set()
                raise
            worker.join(max(0.0, deadline - time.monotonic()))
        finally:
            _lock.release()  # never held past the deadline, whether or not the call has ended
        if not box:
            raise SimulatorTimeout("the call did not end within its time")
        if isinstance(box[0], BaseException):
            raise box[0]
        return list(box[0])

    def _work(self, calls: Sequence[str], box: list[Any]) -> None:
        try:
            box.append(self._run(calls))
        except BaseException as exc:  # handed to the caller, if it still waits
            box.append(exc)
        finally:
            self._idle.set()

    def execute(self, name: str, args: Mapping[str, Any]) -> str:
        """Run one call of a listed function; the result as BFCL gives it (errors included)."""
        if name not in self.names:
            raise KeyError(name)
        return self.execute_strings([call_string(name, args)])[0]

    def close(self) -> None:
        _forget(self.utils, self.model_name)

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class ItemScore:
    """BFCL's verdict on an item (``valid``, its ``error_type``), and ``turns_right``: how many
    turns from the first are right (BFCL's checker on the first k turns)."""

    valid: bool
    error_type: str | None
    error: str | None
    turns_right: int
    turns: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "error_type": self.error_type,
            "error": self.error,
            "turns_right": self.turns_right,
            "turns": self.turns,
        }


def _check(
    checker: Any, item: MultiTurnItem, calls: Sequence[Sequence[Sequence[str]]], truth: Sequence[Sequence[str]]
) -> dict[str, Any]:
    model_name = f"textagent_check_{next(_names)}"
    utils = sys.modules[_UTILS]
    try:
        with _lock:
            # decoded as BFCL's eval runner does: a step without calls is dropped
            decoded = [[list(step) for step in turn if step] for turn in calls]
            return dict(
                checker.multi_turn_checker(decoded, [list(t) for t in truth], item.entry(), item.category, model_name)
            )
    except Exception as exc:  # BFCL's checker asserts; an exception scores the item wrong
        return {
            "valid": False,
            "error_type": "multi_turn:checker_error",
            "error_message": f"{type(exc).__name__}: {exc}",
        }
    finally:
        _forget(utils, model_name)


def score_item(
    item: MultiTurnItem, calls: Sequence[Sequence[Sequence[str]]], *, wheel: Path | None = None
) -> ItemScore:
    """Score an episode as BFCL does: ``calls`` is, per user turn reached, per step, the call
    strings executed. Fewer turns than the item has (a force-quit before the last turn) fail
    the item, as BFCL's eval runner fails it; the turns before still count in ``turns_right``.
    BFCL's checker stops at the first turn that is wrong, so the check of the first k turns is
    its verdict on the whole when turn k is the first wrong one."""
    _, checker = runtime(wheel)
    n = len(item.ground_truth)
    right, verdict = 0, {"valid": True}
    for k in range(1, min(len(calls), n) + 1):
        verdict = _check(checker, item, calls[:k], item.ground_truth[:k])
        if not verdict.get("valid"):
            break
        right = k
    if len(calls) != n:
        return ItemScore(
            False, "multi_turn:force_terminated", f"the episode ended after {len(calls)} of {n} turns", right, n
        )
    if verdict.get("valid"):
        return ItemScore(True, None, None, n, n)
    return ItemScore(False, str(verdict.get("error_type")), str(verdict.get("error_message")), right, n)
