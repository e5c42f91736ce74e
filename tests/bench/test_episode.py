"""One episode: its slot and seed, its trace when it raises, the mode reaching the Agent, the
settings (streaming, examples, their style and tool, the native ablation, max_repeats) reaching
the prompt and the loop."""

from __future__ import annotations

import json
import re

from textagent.backends.base import Capabilities, Completion
from textagent.backends.scripted import ScriptedBackend
from textagent.bench import episode as E
from textagent.bench.tasks import load_tasks

SUITE = load_tasks()
BY_ID = {t.id: t for t in SUITE}


class RecordingChat:
    """A chat backend that records the messages of each request and answers "done"."""

    capabilities = Capabilities(chat=True)

    def __init__(self):
        self.requests = []

    def chat(self, messages, *, tools=None, tool_choice="auto", max_tokens, **options):
        self.requests.append(messages)
        return Completion("done", "stop", message={"role": "assistant", "content": "done"})


def test_episodes_are_pinned_to_their_slot():
    backend = ScriptedBackend(['TOOL: calculate ARGS: {"expression": "17*24"}', "ANSWER: 408"])
    record = E.run_episode(
        BY_ID["single-calc-mul"], "text", backend, chat_format="chatml", slot=3, settings=E.Settings(seed=7), repeat=2
    ).to_record()
    assert record["success"]
    assert all(c["id_slot"] == 3 and c["seed"] == 9 and c["temperature"] == 0.0 for c in backend.calls)
    unpinned = ScriptedBackend(["ANSWER: Paris"])
    E.run_episode(BY_ID["notool-capital-france"], "text", unpinned, slot=1, settings=E.Settings(pin_slots=False))
    assert "id_slot" not in unpinned.calls[0]


def test_a_run_that_raises_keeps_its_steps_so_far_in_the_trace():
    class Breaks(ScriptedBackend):
        def complete(self, prompt, **kwargs):
            if self.calls:
                raise RuntimeError("mode bug")
            return super().complete(prompt, **kwargs)

    task = BY_ID["single-calc-mul"]
    record = E.run_episode(task, "text", Breaks(['TOOL: calculate ARGS: {"expression": "17 * 24"}'])).to_record()
    assert record["stop_reason"] == "error" and "mode bug" in record["error"]
    assert [r["type"] for r in record["trace"]] == ["start", "step"]
    assert len({r["run"] for r in record["trace"]}) == 1
    assert record["trace"][1]["stop_word"] is None  # text mode: the stop word of each reply


def test_a_reply_cut_at_observation_is_a_hallucination_from_its_stop_word():
    task = BY_ID["single-weather-berlin"]
    record = E.run_episode(task, "text", ScriptedBackend(["Let me look it up.\nOBSERVATION: 20 °C"] * 3)).to_record()
    steps = [r for r in record["trace"] if r["type"] == "step"]
    assert steps and all(s["stop_word"].startswith("OBSERVATION") for s in steps)
    assert record["hallucinated"]
    grammar = E.run_episode(task, "constrained", ScriptedBackend(["ANSWER: 20"])).to_record()
    assert all(r["stop_word"] is None for r in grammar["trace"] if r["type"] == "step")  # grammar: none


def test_non_text_modes_reach_the_agent(monkeypatch):
    seen = {}

    class FakeAgent:
        steps = []

        def __init__(self, backend, tools, **kw):
            seen.update(kw)

        def start_record(self, task):
            return {"type": "start", "task": task}

        def run(self, task):
            raise RuntimeError("stop here")

    monkeypatch.setattr(E, "Agent", FakeAgent)
    record = E.run_episode(BY_ID["single-calc-mul"], "native", object()).to_record()
    assert seen["mode"] == "native" and record["stop_reason"] == "error" and "stop here" in record["error"]
    seen.clear()
    E.run_episode(BY_ID["single-calc-mul"], "text", object())
    assert seen["mode"] == "text"


def test_a_native_call_written_into_content_counts_as_a_call(monkeypatch):
    from textagent.agent import Result, Step
    from textagent.backends.base import Usage
    from textagent.modes.native import NativeFacts

    class NativeAgent:
        def __init__(self, *a, **kw):
            pass

        def start_record(self, task):
            return {"type": "start", "task": task}

        def run(self, task):
            step = Step(1, '{"name": "calculate", "arguments": {"expression": "hello"}}')
            step.facts = NativeFacts(
                "content",
                decode_failure="json",
                content_calls=[{"name": "calculate", "arguments": {"expression": "hello"}}],
            )
            return Result('{"name": "calculate", "arguments": {"expression": "hello"}}', "answer", [step], Usage(), 0.1)

    monkeypatch.setattr(E, "Agent", NativeAgent)
    record = E.run_episode(BY_ID["notool-greeting"], "native", object()).to_record()
    assert record["attempted"] == ["calculate"] and not record["success"]
    assert record["failure"] == "call_not_needed"


def test_all_examples_are_the_same_for_every_question_of_a_tool_set():
    from textagent.backends.scripted import ScriptedBackend

    def first_prompt(question_task, examples):
        backend = ScriptedBackend(["ANSWER: done"])
        E.run_episode(question_task, "text", backend, settings=E.Settings(examples=examples))
        prompt = backend.prompts[0]
        return prompt[: prompt.rindex(question_task.question)]

    by_tools: dict = {}
    for t in SUITE:
        by_tools.setdefault(tuple(t.tools), []).append(t)
    group = max(by_tools.values(), key=len)
    a = group[0]
    b = next(t for t in group if first_prompt(t, "per-task") != first_prompt(a, "per-task"))
    assert first_prompt(a, "all") == first_prompt(b, "all")


def test_stream_makes_the_text_modes_stream_and_stop_early():
    from textagent.backends.base import Capabilities, Completion, Usage

    class Streaming:
        capabilities = Capabilities(streaming=True)

        def __init__(self, replies):
            self.replies, self.options = list(replies), []

        def complete(self, prompt, *, stop, max_tokens, **options):
            self.options.append(options)
            text, on_text = "", options.get("on_text")
            for ch in self.replies.pop(0):
                text += ch
                if on_text is not None and on_text(text):
                    return Completion(text, "early_stop", usage=Usage(prompt_tokens=5, completion_tokens=len(text)))
            return Completion(text, "stop", usage=Usage(prompt_tokens=5, completion_tokens=len(text)))

    task = next(t for t in SUITE if t.id == "single-calc-mul")
    backend = Streaming(
        [
            'TOOL: calculate ARGS: {"expression": "17 * 24"}\nThe result will be 408, I think.',
            "ANSWER: 17 times 24 is 408.",
        ]
    )
    record = E.run_episode(task, "text", backend, settings=E.Settings(stream=True)).to_record()
    assert record["success"] and backend.options[0]["stream"] is True and "on_text" in backend.options[0]
    first = next(s for s in record["trace"] if s.get("type") == "step")
    assert first["finish_reason"] == "early_stop" and first["details"]["early_stop"]["dropped"].startswith("The")
    plain = Streaming(['TOOL: calculate ARGS: {"expression": "17 * 24"}', "ANSWER: 17 times 24 is 408."])
    E.run_episode(task, "text", plain)
    assert "stream" not in plain.options[0]


def test_native_modes_get_no_placeholder_examples_unless_the_ablation_asks(tmp_path):
    """Issue 38: native modes are asked as a function-calling client asks; the ablation is explicit."""
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks

    fetch_wheel()
    task = bfcl_tasks("bfcl:simple_python")[1]  # tools without examples of their own
    for ablation, roles in ((False, ["system", "user"]), (True, None)):
        chat = RecordingChat()
        E.run_episode(task, "native", chat, settings=E.Settings(native_examples=ablation))
        if roles is not None:
            assert [m["role"] for m in chat.requests[0]] == roles
        else:
            assert len(chat.requests[0]) > 2 and "assistant" in [m["role"] for m in chat.requests[0]]


def test_the_example_style_reaches_text_modes_and_native_modes_only_in_the_ablation(tmp_path):
    """Issue 41's examples are tried with --example-style; a native mode is shown them only as the
    ablation, in the same style."""
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks

    fetch_wheel()
    task = bfcl_tasks("bfcl:simple_python")[1]
    text = ScriptedBackend(["ANSWER: done"])
    E.run_episode(task, "text", text, settings=E.Settings(example_style="concrete"))
    assert "ANSWER: The result is 42." in text.prompts[0] and "returned)" not in text.prompts[0]

    for ablation in (False, True):
        chat = RecordingChat()
        E.run_episode(task, "native", chat, settings=E.Settings(example_style="concrete", native_examples=ablation))
        said = json.dumps(chat.requests[0])
        assert ("The result is 42." in said) is ablation


def test_the_example_tool_choice_reaches_the_text_modes():
    """``--example-tool closest``: the placeholder examples show the item's closest tool (on
    BFCL's `multiple_2`, "What is the capital of Brazil?", the capital lookup, not the first tool)."""
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks

    fetch_wheel()
    task = next(t for t in bfcl_tasks("bfcl:multiple") if t.id.endswith("multiple_2"))
    shown = {}
    for choice in ("first", "closest"):
        text = ScriptedBackend(["ANSWER: done"])
        E.run_episode(task, "text", text, settings=E.Settings(example_tool=choice))
        shown[choice] = re.search(r"TOOL: (\S+) ARGS", text.prompts[0]).group(1)
    assert shown == {"first": "country_info.largest_city", "closest": "country_info.capital"}


def test_the_examples_ablation_shows_native_modes_the_tools_the_text_modes_show():
    """``--native-examples`` builds its examples around the tools ``--example-tool`` picks, for each
    question, as the text modes do (multiple_2: the capital lookup under closest; native names
    have no dots)."""
    from textagent.bench.bfcl.data import fetch_wheel
    from textagent.bench.bfcl.tasks import bfcl_tasks

    fetch_wheel()
    task = next(t for t in bfcl_tasks("bfcl:multiple") if t.id.endswith("multiple_2"))
    for choice, name in (("first", "country_info_largest_city"), ("closest", "country_info_capital")):
        chat = RecordingChat()
        E.run_episode(task, "native", chat, settings=E.Settings(example_tool=choice, native_examples=True))
        shown = [call["function"]["name"] for message in chat.requests[0] for call in message.get("tool_calls") or ()]
        assert shown and shown[0] == name, choice


def test_max_repeats_ends_a_text_episode_as_a_loop_and_leaves_the_seed_baseline_alone():
    task = BY_ID["single-calc-mul"]
    call = 'TOOL: calculate ARGS: {"expression": "17 * 24"}'
    settings = E.Settings(max_repeats=2)
    record = E.run_episode(task, "text", ScriptedBackend([call] * 4 + ["ANSWER: 408"]), settings=settings).to_record()
    assert record["stop_reason"] == "repeated" and record["steps"] == 2 and record["failure"] == "loop"
    baseline = E.run_episode(
        task, "baseline", ScriptedBackend([call] * 2 + ["ANSWER: 408"]), settings=settings
    ).to_record()
    assert baseline["stop_reason"] == "answer"  # the seed's loop keeps its own limits


def test_max_call_errors_ends_a_text_episode_at_failed_calls_and_leaves_the_seed_baseline_alone():
    task = BY_ID["single-calc-mul"]
    unknown = 'TOOL: teleport ARGS: {"to": "Mars"}'
    settings = E.Settings(max_call_errors=2)
    record = E.run_episode(task, "text", ScriptedBackend([unknown] * 3 + ["ANSWER: 408"]), settings=settings)
    assert record.stop_reason == "call_errors" and record.steps == 2 and not record.success
    baseline = E.run_episode(task, "baseline", ScriptedBackend([unknown] * 3 + ["ANSWER: 408"]), settings=settings)
    assert baseline.stop_reason == "answer"
