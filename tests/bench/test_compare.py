"""The diff of two bench runs: metrics side by side, paired differences, same replies, flipped tasks."""

from __future__ import annotations

from benchruns import read_records, write_episodes

from textagent.bench.compare import compare_runs


def test_compare_two_runs(tmp_path, make_run):
    before = make_run(tmp_path / "a", broken=("bare-is-prime", "single-calc-mul", "typed-currency"))
    after = make_run(tmp_path / "b", broken=("typed-currency", "distract-divide"))
    text = compare_runs(before, after)
    assert "## text" in text and "## baseline" in text
    assert "| metric | A | B | B − A |" in text
    assert "+14.3 pp" in text  # 4/7 -> 5/7
    assert "Better in B: `bare-is-prime`" in text and "`single-calc-mul`" in text
    assert "Worse in B: `distract-divide` (→ no_call)" in text
    assert "| no call where one was needed | 3 | 2 | -1 |" in text


def test_compare_with_a_mode_only_in_one_run(tmp_path, make_run):
    a = make_run(tmp_path / "a", modes=("text",))
    b = make_run(tmp_path / "b", modes=("text", "baseline"))
    text = compare_runs(a, b)
    assert "## baseline\n\nOnly in B." in text


def test_compare_notes_different_task_sets(tmp_path, make_run):
    a = make_run(tmp_path / "a", modes=("text",))
    b = make_run(tmp_path / "b", modes=("text",))
    write_episodes(b, read_records(b)[:-2])
    text = compare_runs(a, b)
    assert "only in A: 2, only in B: 0" in text and "| mean steps |" in text
    assert "±0" in compare_runs(a, a)


def test_compare_pairs_the_episodes_both_runs_share(tmp_path, make_run):
    before = make_run(tmp_path / "a", broken=("bare-is-prime", "single-calc-mul", "typed-currency"))
    after = make_run(tmp_path / "b", broken=("typed-currency", "distract-divide"))
    text = compare_runs(before, after)
    section = text.split("## Paired differences", 1)[1].split("\n## ", 1)[0]
    # text: B solves bare-is-prime and single-calc-mul, loses distract-divide
    assert "| mode: B − A | items both ran | right B / A | B only | A only |" in section
    assert "| text: B − A | 7 | 5 / 4 | 2 | 1 | +14.3 (" in section and "| 1 | noise |" in section


def test_compare_counts_the_episodes_whose_replies_are_the_same_word_for_word(tmp_path, make_run):
    a = make_run(tmp_path / "a", modes=("text",))
    b = make_run(tmp_path / "b", modes=("text",))
    assert "Same replies, word for word: 7 of the 7 episodes both ran." in compare_runs(a, b)
    episodes = read_records(b)
    steps = [s for s in episodes[2]["trace"] if s["type"] == "step"]
    steps[-1]["raw"] += " (said otherwise)"
    write_episodes(b, episodes)
    text = compare_runs(a, b)
    assert "Same replies, word for word: 6 of the 7 episodes both ran." in text
    assert f"They part in 1, e.g. `{episodes[2]['task']}` (repeat 0) at reply {len(steps)}." in text


def test_compare_one_mode_of_a_run_against_another_mode_of_another(tmp_path, make_run):
    a = make_run(tmp_path / "a", broken=("bare-is-prime", "single-calc-mul"))
    b = make_run(tmp_path / "b", broken=("typed-currency",))
    text = compare_runs(f"{a}:text", f"{b}:baseline")
    assert "## text / baseline" in text and "## baseline\n" not in text and "## text\n" not in text
    assert "| text / baseline: B − A | 7 | 5 / 5 | 1 | 1 |" in text  # paired on the items both ran
    assert "Mode `baseline` of B against mode `text` of A" in text
    # one side naming a mode keeps that mode of it; the other side's same mode pairs with it
    alone = compare_runs(f"{a}:text", b)
    assert "## text" in alone and "## baseline\n\nOnly in B." in alone


def test_compare_refuses_a_mode_the_run_does_not_have(tmp_path, make_run):
    import pytest

    a = make_run(tmp_path / "a", modes=("text",))
    with pytest.raises(FileNotFoundError, match=r"has no episodes of mode 'native' \(its modes: text\)"):
        compare_runs(f"{a}:native", a)


def test_a_run_directory_with_a_colon_in_its_name_is_taken_whole(tmp_path, make_run):
    a = make_run(tmp_path / "run:2", modes=("text",))
    assert "## text" in compare_runs(a, a)


def _bfcl_run(path, replies: dict[str, str], *, first_reply: bool = False):
    """A run of single-turn BFCL items (category ``simple``), each answered by its scripted reply."""
    import json

    from textagent import ScriptedBackend
    from textagent.bench.bfcl.data import BfclItem
    from textagent.bench.bfcl.tasks import item_task
    from textagent.bench.episode import run_episode

    weather = {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
    truth = ({"get_weather": {"city": ["Paris"]}},)
    path.mkdir()
    episodes = []
    for n, (task, reply) in enumerate(replies.items()):
        item = BfclItem(task, "simple", n, ({"role": "user", "content": "Weather in Paris?"},), (weather,), truth)
        episodes.append(run_episode(item_task(item), "text", ScriptedBackend([reply, "ANSWER: done"])))
    write_episodes(path, episodes)
    (path / "run.json").write_text(json.dumps({"modes": ["text"], "settings": {"first_reply": first_reply}}))
    return path


def test_compare_pairs_bfcl_items_on_the_agent_view_overall_and_per_category(tmp_path):
    paris, memory = 'TOOL: get_weather ARGS: {"city": "Paris"}', "ANSWER: sunny"
    a = _bfcl_run(tmp_path / "a", {"simple_1": memory, "simple_2": paris})
    b = _bfcl_run(tmp_path / "b", {"simple_1": paris, "simple_2": paris})
    records = read_records(b)
    # as if the call came when the loop asked again: BFCL's view (the first reply) is wrong
    records[0]["bfcl"]["first"] = {"valid": False, "error_type": "no_call", "detail": ""}
    records[0]["success"] = False
    write_episodes(b, records)
    text = compare_runs(a, b)
    first, agent = text.split("### BFCL's agent view", 1)
    assert "| text: B − A | 2 | 1 / 1 | 0 | 0 |" in first  # BFCL's own view: the first reply
    assert "| text: B − A | 2 | 2 / 1 | 1 | 0 |" in agent and "| text, simple: B − A | 2 | 2 / 1 | 1 | 0 |" in agent
    # stopped at the first reply, the agent view is the first reply's: not shown again
    c = _bfcl_run(tmp_path / "c", {"simple_1": paris, "simple_2": paris}, first_reply=True)
    assert "agent view" not in compare_runs(a, c) and "agent view" in compare_runs(a, b)
