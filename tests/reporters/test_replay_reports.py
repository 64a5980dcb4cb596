"""Record/replay in the reports: per scenario replayed or live from call k (with why), and the
suite line (replayed, live, what it saved), the same in Markdown and JUnit properties."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import xmlschema
from report_fixtures import FAILED, PASSED, metadata

from lkeval.reporters import JUnitReporter, MarkdownReporter, build_report
from lkeval.results.gate import evaluate_gate
from lkeval.results.model import Replay, RunResults, ScenarioResult
from lkeval.results.wording import (
    LIVE,
    MISSED,
    REPLAYED,
    replay_line,
    replay_short,
    replay_text,
    replay_totals,
    scenario_state,
)

XSD = Path(__file__).parent.parent / "data" / "junit.xsd"
REPLAYED_FULLY = Replay("replayed", "a.json", calls_replayed=9, saved_usd=0.0041)
DIFF = "messages[0].content: 'book for Tuesday' → 'book for Wednesday'"
PARTIAL = Replay(
    "partial", "b.json", live_from_call=3, client="agent", reason=DIFF,
    calls_replayed=2, calls_live=6, saved_usd=0.001,
)  # fmt: skip
RECORDED = Replay("recorded", "c.json", reason="no cassette for this attempt", calls_live=8)
MISS = Replay("missed", "d.json", live_from_call=1, client="judge", reason="judge model differs")


def with_replay(result: ScenarioResult, *records: Replay, sid: str = "") -> ScenarioResult:
    attempts = tuple(replace(result.attempts[0], replay=r) for r in records)
    return replace(result, attempts=attempts, scenario_id=sid or result.scenario_id, label=sid)


def suite() -> RunResults:
    return RunResults(
        metadata(),
        (
            with_replay(PASSED, REPLAYED_FULLY, sid="same"),
            with_replay(PASSED, REPLAYED_FULLY, REPLAYED_FULLY, sid="same twice"),
            with_replay(FAILED, PARTIAL, sid="changed"),
            with_replay(PASSED, REPLAYED_FULLY, RECORDED, sid="half new"),
            with_replay(FAILED, MISS, sid="missed"),
        ),
    )


def test_each_scenario_is_replayed_live_from_call_k_or_a_miss_with_its_reason() -> None:
    by_id = {s.scenario_id: s for s in suite().scenarios}
    assert [scenario_state(s) for s in by_id.values()] == [REPLAYED, REPLAYED, LIVE, LIVE, MISSED]
    assert replay_short(by_id["changed"]) == "live from agent call 3"
    assert replay_text(by_id["changed"]) == f"live from the agent's call 3: {DIFF}"
    # the reason as the tape words it names the call itself: said once, not twice
    tape_worded = replace(PARTIAL, reason=f"replay miss at agent's call 3: {DIFF}")
    assert replay_text(with_replay(FAILED, tape_worded)) == f"live from the agent's call 3: {DIFF}"
    # one attempt replayed, the other had no cassette: the scenario was earned live
    assert replay_short(by_id["half new"]) == "live (recorded)"
    assert replay_text(by_id["half new"]) == "live: no cassette for this attempt"
    assert replay_text(by_id["missed"]) == "replay miss at the judge's call 1: judge model differs"
    assert replay_short(by_id["same"]) == "replayed"
    assert replay_text(PASSED) == "" and scenario_state(PASSED) is None


def test_the_suite_line_counts_scenarios_calls_and_what_replay_saved() -> None:
    totals = replay_totals(suite())
    assert totals is not None
    assert (totals.replayed, totals.live, totals.missed) == (2, 2, 1)
    assert (totals.calls_replayed, totals.calls_live) == (9 * 4 + 2, 6 + 8)
    assert totals.saved_usd is not None and abs(totals.saved_usd - (4 * 0.0041 + 0.001)) < 1e-9
    assert replay_line(suite()) == (
        "2 scenarios replayed, 2 live, 1 replay miss · 38 calls replayed, 14 live · "
        "saved $0.0174 and 38 calls"
    )
    assert replay_line(RunResults(metadata(), (PASSED,))) == ""  # no --cassettes: no line


def test_unpriced_replays_say_so_rather_than_zero_dollars() -> None:
    results = RunResults(
        metadata(), (with_replay(PASSED, replace(REPLAYED_FULLY, saved_usd=None)),)
    )
    assert replay_line(results).endswith("saved 9 calls (unpriced)")


def test_the_comment_has_the_line_a_replay_column_and_the_live_scenarios_with_why() -> None:
    results = suite()
    markdown = MarkdownReporter().format(build_report(results, None, evaluate_gate(results, None)))
    assert "**Record/replay:** 2 scenarios replayed, 2 live, 1 replay miss" in markdown
    assert "| Replay |" in markdown and "| live from agent call 3 |" in markdown
    assert "### 🔁 Live, not replayed (3)" in markdown
    assert "- half new · live: no cassette for this attempt" in markdown
    # a failure says where it went live: the call the change altered
    failure = markdown.split("**❌ changed**", 1)[1].split("###", 1)[0]
    assert "live from the agent's call 3: messages" in failure


def test_a_run_without_cassettes_has_no_replay_column_or_line() -> None:
    results = RunResults(metadata(), (PASSED, FAILED))
    markdown = MarkdownReporter().format(build_report(results, None, evaluate_gate(results, None)))
    assert "Replay" not in markdown and "Record/replay" not in markdown and "🔁" not in markdown
    assert 'name="replay"' not in JUnitReporter().format(
        build_report(results, None, evaluate_gate(results, None))
    )


def test_junit_carries_the_replay_as_testcase_properties() -> None:
    results = suite()
    xml = JUnitReporter().format(build_report(results, None, evaluate_gate(results, None)))
    xmlschema.XMLSchema(str(XSD)).validate(xml)
    assert '<property name="replay" value="live" />' in xml
    assert '<property name="replay_detail" value="live from the agent\'s call 3: ' in xml
    assert '<property name="replay" value="missed" />' in xml
    assert '<property name="calls_replayed" value="18" />' in xml  # "same twice": 9 + 9
    assert '<property name="saved_usd" value="0.008200" />' in xml
