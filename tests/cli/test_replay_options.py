"""The record/replay surface: its flags, and the per-attempt replay record in results.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from lkeval.cli import build_parser
from lkeval.cli.options import run_options
from lkeval.cli.run import suite_settings
from lkeval.errors import UsageError
from lkeval.results.metrics import scenario_metrics
from lkeval.results.model import (
    Attempt,
    Replay,
    RunMetadata,
    RunResults,
    ScenarioResult,
    TurnMetrics,
)
from lkeval.results.results_json import dump_results, results_from_dict

BASE = ["run", "--agent", "agent.py", "--scenarios", "s.yaml"]


def _options(*flags: str) -> object:
    return run_options(build_parser().parse_args([*BASE, *flags]), environ={})


def test_without_cassettes_record_and_replay_is_off() -> None:
    settings = suite_settings(_options())  # type: ignore[arg-type]
    assert settings.cassettes is None


def test_cassettes_default_to_auto() -> None:
    settings = suite_settings(_options("--cassettes", "tapes"))  # type: ignore[arg-type]
    assert settings.cassettes == Path("tapes") and settings.cassette_mode == "auto"
    assert settings.cassette_rules is None


def test_mode_and_rules_are_kept() -> None:
    flags = ("--cassettes", "t", "--cassette-mode", "replay", "--cassette-rules", "r.json")
    settings = suite_settings(_options(*flags))  # type: ignore[arg-type]
    assert settings.cassette_mode == "replay" and settings.cassette_rules == Path("r.json")


@pytest.mark.parametrize("flag", [["--cassette-mode", "replay"], ["--cassette-rules", "r.json"]])
def test_a_cassette_flag_without_a_directory_is_a_usage_error(flag: list[str]) -> None:
    with pytest.raises(UsageError, match=f"{flag[0]} needs --cassettes DIR"):
        _options(*flag)


def test_an_unknown_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*BASE, "--cassettes", "t", "--cassette-mode", "sometimes"])
    assert exc.value.code == 2 and "--cassette-mode" in capsys.readouterr().err


def _results(attempt: Attempt) -> RunResults:
    scenario = ScenarioResult("s", "S", "g", "G", "s.yaml", 1, attempt.status, attempts=(attempt,))
    return RunResults(RunMetadata("1", None, "a.py", ("s.yaml",), "now"), (scenario,))


def test_the_replay_record_round_trips_through_results_json() -> None:
    import json

    replay = Replay(
        "partial",
        cassette="s.json",
        live_from_call=3,
        client="agent",
        reason="replay miss at agent's call 3: body.messages[0].content differs",
        calls_replayed=2,
        calls_live=4,
        saved_usd=0.0012,
    )
    turns = (TurnMetrics(1, 10.0, replayed=True), TurnMetrics(2, 900.0))
    results = _results(Attempt("passed", turns=turns, replay=replay))
    loaded = results_from_dict(json.loads(dump_results(results)))
    (attempt,) = loaded.scenarios[0].attempts
    assert attempt.replay == replay and attempt.turns == turns
    assert not replay.fully_replayed and Replay("replayed").fully_replayed


def test_replayed_turns_are_not_pooled_into_latency_figures() -> None:
    turns = (TurnMetrics(1, 10.0, replayed=True), TurnMetrics(2, 900.0, replayed=True))
    metrics = scenario_metrics(_results(Attempt("passed", turns=turns)).scenarios[0])
    assert metrics.turns == 0 and metrics.latency is None
    live = (TurnMetrics(1, 10.0, replayed=True), TurnMetrics(2, 900.0))
    metrics = scenario_metrics(_results(Attempt("passed", turns=live)).scenarios[0])
    assert metrics.turns == 1 and metrics.latency is not None and metrics.latency.max == 900.0
