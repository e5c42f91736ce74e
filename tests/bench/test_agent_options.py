"""bench/agent_options.py: a bench mode's Agent options under a run's settings, one place for the
single- and the multi-turn episode."""

from dataclasses import replace

import pytest

from textagent import Agent, ScriptedBackend, ToolSet
from textagent.bench.ablations import FirstFailureTextMode, NoFeedbackTextMode
from textagent.bench.agent_options import agent_options
from textagent.bench.baseline import AGENT_OPTIONS, BaselineMode
from textagent.bench.bfcl.prompt_mode import BfclPromptMode
from textagent.bench.episode import Settings
from textagent.bench.proxy_client import ProxyClientMode


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city
    """
    return city


def bare_tools():
    return ToolSet([lookup])  # no worked example of its own


class _Quiet:
    """A check that never objects."""

    name = "quiet"

    def on_answer(self, run, answer):
        return None


def test_the_loop_options_reach_textagents_own_loop_and_not_the_comparison_modes(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "optionchecks", types.SimpleNamespace(Quiet=_Quiet))
    settings = Settings(checks="optionchecks:Quiet", max_repeats=3)
    for mode in ("text", "constrained", "native", "native+fallback", "text-no-feedback", "proxy"):
        options = agent_options(mode, settings, bare_tools())
        assert options["max_repeats"] == 3 and len(options["checks"]) == 1, mode
    documents = [{"name": "lookup", "description": "Look a city up.", "parameters": {}}]
    for mode, kind in (("baseline", BaselineMode), ("bfcl-prompt", BfclPromptMode)):
        options = agent_options(mode, settings, bare_tools(), documents=documents, system="Be brief.")
        assert isinstance(options.pop("mode"), kind) and options == AGENT_OPTIONS  # run as their originals ran
    bfcl = agent_options("bfcl-prompt", settings, bare_tools(), documents=documents, system="Be brief.")["mode"]
    assert (bfcl.functions, bfcl.system) == (documents, "Be brief.")  # built for the task


def test_an_unknown_mode_is_refused_with_the_modes_it_could_be():
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):
        agent_options("bogus", Settings(), bare_tools())


def test_each_mode_gets_its_own_mode_and_the_text_modes_their_settings():
    settings = Settings(grouped_listing=True, stream=True, example_style="concrete", example_tool="closest")
    text = agent_options("text", settings, bare_tools())
    assert text["mode"] == "text" and text["stream"] and "system_prompt" in text
    assert (text["example_style"], text["example_tool"]) == ("concrete", "closest")
    ablation = agent_options("text-no-feedback", settings, bare_tools())
    assert isinstance(ablation["mode"], NoFeedbackTextMode) and ablation["max_format_errors"] == 1
    assert "system_prompt" in ablation  # listed as text mode lists
    first = agent_options("text-first-failure", Settings(max_call_errors=5), bare_tools())
    assert isinstance(first["mode"], FirstFailureTextMode)
    assert (first["max_format_errors"], first["max_call_errors"]) == (1, 1)  # the mode's own, not the run's
    native = agent_options("native", settings, bare_tools())
    assert "stream" not in native and "system_prompt" not in native and "example" not in native
    assert isinstance(agent_options("proxy", settings, bare_tools())["mode"], ProxyClientMode)


def test_the_examples_ablation_shows_native_modes_the_text_modes_exchanges():
    settings = replace(Settings(), native_examples=True)
    native = agent_options("native+fallback", settings, bare_tools(), question="Where is Paris?")
    assert any(call[0] == "lookup" for worked in native["example"] for call in worked.calls)
    assert "example" not in agent_options("text", settings, bare_tools())  # text modes have theirs


def test_the_examples_ablation_builds_around_the_question_under_closest():
    def clock(zone: str) -> str:
        """Tell the time in a time zone.

        Args:
            zone: the time zone
        """
        return zone

    tools = ToolSet([lookup, clock])
    settings = replace(Settings(), native_examples=True, example_tool="closest")
    native = agent_options("native", settings, tools, question="What time is it in the Tokyo time zone?")
    assert native["example"][0].calls[0][0] == "clock"
    first = agent_options("native", replace(settings, example_tool="first"), tools)  # no question needed
    assert first["example"][0].calls[0][0] == "lookup"
    with pytest.raises(ValueError, match="needs the question"):
        agent_options("native", settings, tools)


def test_the_options_build_an_agent_that_runs():
    backend = ScriptedBackend(['TOOL: lookup ARGS: {"city": "Paris"}', "ANSWER: Paris."])
    options = agent_options("text", Settings(max_repeats=2), bare_tools())
    result = Agent(backend, bare_tools(), chat_format="chatml", **options).run("Where?")
    assert result.stop_reason == "answer" and result.answer == "Paris."


@pytest.mark.parametrize("mode", ["text", "constrained", "native", "text-no-feedback"])
def test_the_retry_setting_reaches_textagents_own_loop(mode):
    from textagent.retry import Retry

    settings = Settings(retry="vary,sample", retry_temperature=0.5, seed=3)
    options = agent_options(mode, settings, bare_tools(), question="Where is Paris?")
    assert options["retry"] == Retry(vary=True, grammar=False, temperature=0.5, seed=3, rewind_temperature=0.5)
    assert agent_options(mode, Settings(), bare_tools(), question="Where is Paris?")["retry"] == Retry()


def test_the_proxys_client_asks_without_retries_they_are_the_proxys():
    from textagent.retry import Retry

    options = agent_options("proxy", Settings(retry="vary,grammar"), bare_tools(), question="Where is Paris?")
    assert options["retry"] == Retry()


def test_the_comparison_modes_keep_their_own_loops_rules_under_retry():
    settings = Settings(retry="vary,grammar,sample")
    options = agent_options("baseline", settings, bare_tools())
    assert "retry" not in options


def test_an_unknown_retry_part_is_a_usage_error(capsys):
    from textagent.bench.options import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--retry", "vary,louder"])
    assert "unknown retry part 'louder'" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "2.5", "warm"])
def test_a_retry_temperature_out_of_range_is_a_usage_error(value, capsys):
    from textagent.bench.options import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--retry", "sample", "--retry-temperature", value])
    assert "above 0 and at most 2" in capsys.readouterr().err


def test_the_odds_threshold_reaches_the_loop_and_defaults_to_the_retrys_own():
    from textagent.bench.options import build_parser
    from textagent.retry import ODDS, Retry

    assert build_parser().parse_args([]).retry_odds == ODDS == Settings().retry_odds
    options = agent_options("text", Settings(retry="odds", retry_odds=0.3), bare_tools(), question="Where is Paris?")
    assert options["retry"] == Retry(odds=0.3)


@pytest.mark.parametrize("value", ["nan", "0", "-1", "1.5", "likely"])
def test_an_odds_threshold_out_of_range_is_a_usage_error(value, capsys):
    from textagent.bench.options import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["--retry", "odds", "--retry-odds", value])
    assert "above 0 and at most 1" in capsys.readouterr().err


def test_the_verify_threshold_reaches_the_loop_and_defaults_to_the_retrys_own(capsys):
    from textagent.bench.options import build_parser
    from textagent.retry import VERIFY, Retry

    assert build_parser().parse_args([]).retry_verify == VERIFY == Settings().retry_verify
    settings = Settings(retry="odds,verify", retry_odds=0.05, retry_verify=0.7)
    options = agent_options("text", settings, bare_tools(), question="Where is Paris?")
    assert options["retry"] == Retry(odds=0.05, verify=0.7)
    for value in ("0", "1.5", "sure"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--retry", "odds,verify", "--retry-verify", value])
        assert "above 0 and at most 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--retry", "verify"])
    assert "needs odds" in capsys.readouterr().err
