"""One attempt's tapes: what the attempt becomes (never a pass on a miss), what the cassette
holds (masked, bounded, deterministic) and when a cassette is refused, with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lkeval.host import tape as tp
from lkeval.host.tape import Rules, Tape, request_record
from lkeval.replay import cassette as cs
from lkeval.replay.session import Cassettes, ReplayConfigError, load_rules
from lkeval.results.model import Attempt, Usage
from lkeval.results.pricing import PriceTable
from lkeval.text.masking import register_secret

IDENTITY = {"caller_model": "caller", "judge_model": "judge", "judge_prompt": "abc"}
USAGE_SSE = 'data: {"choices": [], "usage": {"prompt_tokens": 1000000, "completion_tokens": 0}}\n\n'


def _exchange(call: int, content: str, reply: str = "ok") -> dict[str, Any]:
    body = json.dumps({"model": "gpt-x", "messages": [{"role": "user", "content": content}]})
    return {
        "call": call,
        "request": request_record("POST", "http://llm/v1/chat/completions", body.encode()),
        "response": {"status": 200, "headers": {}, "chunks": [f"data: {reply}\n\n", USAGE_SSE]},
    }


def _cassettes(tmp_path: Path, mode: str, identity: dict[str, str] | None = None) -> Cassettes:
    return Cassettes(
        tmp_path / "tapes",
        mode,
        Rules(),
        identity or IDENTITY,
        scratch=tmp_path / "scratch",
        prices=PriceTable({"gpt-x": (2.0, 0.0)}),
    )


def _recorded(tmp_path: Path, agent: list[dict[str, Any]], judge: list[dict[str, Any]]) -> None:
    cassette = cs.Cassette("s", 1, IDENTITY, {"agent": agent, "judge": judge})
    cs.write_cassette(tmp_path / "tapes" / "s.json", cassette)


def _agent_says(tapes: Any, *events: dict[str, Any]) -> None:
    with tapes.agent_out.open("a", encoding="utf-8") as fh:
        for event in ({"installed": ["httpx"]}, *events):
            fh.write(json.dumps(event) + "\n")


def _replayed(exchange: dict[str, Any]) -> dict[str, Any]:
    return {"exchange": {**exchange, "replayed": True}}


def test_a_full_replay_is_kept_and_its_calls_cost_nothing(tmp_path: Path) -> None:
    agent, judge = [_exchange(1, "hi")], [_exchange(1, "judge this")]
    _recorded(tmp_path, agent, judge)
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    assert not tapes.refused
    tapes.agent_env()
    _agent_says(tapes, _replayed(agent[0]))
    call = tapes.tape("judge").begin("POST", "http://llm/v1/chat/completions", b"")
    assert call.recorded is None  # a different body: this one misses ...
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    tapes.agent_env()
    _agent_says(tapes, _replayed(agent[0]))
    body = json.dumps(judge[0]["request"]["body"]["json"]).encode()
    call = tapes.tape("judge").begin("POST", "http://llm/v1/chat/completions", body)
    assert call.recorded is not None  # ... the same one replays
    tapes.tape("judge").finish(call, call.recorded["response"])
    usage = {"agent": Usage(1000000, 0, 2.0, ("gpt-x",)), "judge": Usage(1000000, 0, 2.0)}
    before = (tmp_path / "tapes" / "s.json").read_text()
    attempt = tapes.finish(Attempt("passed", usage=usage))
    assert attempt.status == "passed" and attempt.replay is not None
    assert attempt.replay.mode == "replayed" and attempt.replay.calls_replayed == 2
    assert attempt.replay.saved_usd == 4.0
    assert attempt.usage["agent"].cost_usd == 0.0 and attempt.usage["judge"].cost_usd == 0.0
    assert (tmp_path / "tapes" / "s.json").read_text() == before  # nothing new: not rewritten


def test_a_replay_miss_is_an_error_even_when_the_conversation_passed(tmp_path: Path) -> None:
    _recorded(tmp_path, [_exchange(1, "hi")], [])
    tapes = _cassettes(tmp_path, "replay").open("s", 1)
    tapes.agent_env()
    reason = "replay miss at agent's call 1: body.messages[0].content: ..."
    _agent_says(tapes, {"miss": {"call": 1, "reason": reason}})
    attempt = tapes.finish(Attempt("passed"))
    assert attempt.status == "error" and attempt.reason == reason
    assert attempt.replay is not None and attempt.replay.mode == "missed"
    assert (attempt.replay.client, attempt.replay.live_from_call) == ("agent", 1)


def test_fewer_calls_than_recorded_is_a_miss_in_replay_mode(tmp_path: Path) -> None:
    agent = [_exchange(1, "hi"), _exchange(2, "bye")]
    _recorded(tmp_path, agent, [])
    tapes = _cassettes(tmp_path, "replay").open("s", 1)
    tapes.agent_env()
    _agent_says(tapes, _replayed(agent[0]))
    attempt = tapes.finish(Attempt("passed"))
    assert attempt.status == "error" and "1 more call(s) than this run made" in attempt.reason


def test_an_agent_whose_recorder_never_started_cannot_pass(tmp_path: Path) -> None:
    tapes = _cassettes(tmp_path, "record").open("s", 1)
    tapes.agent_env()  # and the agent reports nothing at all
    attempt = tapes.finish(Attempt("passed"))
    assert attempt.status == "error" and "recorder did not start" in attempt.reason


def test_auto_from_a_miss_records_the_new_episode(tmp_path: Path) -> None:
    agent = [_exchange(1, "hi"), _exchange(2, "old")]
    _recorded(tmp_path, agent, [])
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    tapes.agent_env()
    new = {**_exchange(2, "new"), "replayed": False}
    _agent_says(
        tapes,
        _replayed(agent[0]),
        {"live": {"call": 2, "reason": "replay miss at agent's call 2: ..."}},
        {"exchange": new},
    )
    attempt = tapes.finish(Attempt("passed"))
    assert attempt.status == "passed" and attempt.replay is not None
    assert attempt.replay.mode == "partial" and attempt.replay.live_from_call == 2
    written = cs.read_cassette(tmp_path / "tapes" / "s.json")
    assert isinstance(written, cs.Cassette)
    assert [
        e["request"]["body"]["json"]["messages"][0]["content"] for e in written.of("agent")
    ] == [
        "hi",
        "new",
    ]


def test_auto_runs_again_live_when_the_recording_has_calls_this_run_never_made(
    tmp_path: Path,
) -> None:
    """A leftover found only at the end: everything replayed, the judge's verdict too, but the
    agent's last recorded call (a side-effecting POST) was never made. The recorded verdict is
    not kept: the attempt is run again live, and the cassette is left for that run."""
    agent, judge = [_exchange(1, "hi"), _exchange(2, "book it")], [_exchange(1, "judge this")]
    _recorded(tmp_path, agent, judge)
    before = (tmp_path / "tapes" / "s.json").read_text()
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    tapes.agent_env()
    _agent_says(tapes, _replayed(agent[0]))
    body = json.dumps(judge[0]["request"]["body"]["json"]).encode()
    call = tapes.tape("judge").begin("POST", "http://llm/v1/chat/completions", body)
    assert call.recorded is not None
    tapes.tape("judge").finish(call, call.recorded["response"])
    tapes.finish(Attempt("passed"))
    assert tapes.rerun == (
        "replay miss at agent's call 2: the recording has 1 more call(s) than this run made; "
        "run again live"
    )
    assert (tmp_path / "tapes" / "s.json").read_text() == before
    again = _cassettes(tmp_path, "auto").open("s", 1, tapes.rerun)
    assert again.client_mode == "record" and again.tape("judge").live
    again.agent_env()
    assert json.loads(again.agent_in.read_text())["mode"] == "record"


def test_auto_runs_again_live_when_the_agent_diverged_after_the_verdict_was_replayed(
    tmp_path: Path,
) -> None:
    agent, judge = [_exchange(1, "hi"), _exchange(2, "veto check")], [_exchange(1, "judge")]
    _recorded(tmp_path, agent, judge)
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    tapes.agent_env()
    body = json.dumps(judge[0]["request"]["body"]["json"]).encode()
    call = tapes.tape("judge").begin("POST", "http://llm/v1/chat/completions", body)
    assert call.recorded is not None
    tapes.tape("judge").finish(call, call.recorded["response"])
    live = {"live": {"call": 2, "reason": "replay miss at agent's call 2: body..."}}
    _agent_says(tapes, _replayed(agent[0]), live, {"exchange": {**agent[1], "replayed": False}})
    tapes.finish(Attempt("passed"))
    assert tapes.rerun.endswith("after the recorded verdict was replayed; run again live")


def test_a_divergence_before_the_verdict_keeps_the_live_verdict(tmp_path: Path) -> None:
    """The agent diverges first (its process raises the attempt's flag): the judge goes live
    though its request equals the recording, and the attempt stands as partial."""
    agent, judge = [_exchange(1, "hi")], [_exchange(1, "judge")]
    _recorded(tmp_path, agent, judge)
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    tapes.agent_env()
    spec = json.loads(tapes.agent_in.read_text())
    tp.raise_flag(spec["live_flag"], "replay miss at agent's call 1: body...")
    live = {"live": {"call": 1, "reason": "replay miss at agent's call 1: body..."}}
    _agent_says(tapes, live, {"exchange": {**_exchange(1, "hey"), "replayed": False}})
    body = json.dumps(judge[0]["request"]["body"]["json"]).encode()
    call = tapes.tape("judge").begin("POST", "http://llm/v1/chat/completions", body)
    assert call.live
    tapes.tape("judge").finish(call, judge[0]["response"])
    attempt = tapes.finish(Attempt("passed"))
    assert not tapes.rerun and attempt.replay is not None and attempt.replay.mode == "partial"
    assert attempt.replay.calls_replayed == 0


@pytest.mark.parametrize(
    ("identity", "reason"),
    [
        (
            {**IDENTITY, "judge_model": "judge-2"},
            "recorded with judge model 'judge', this run uses 'judge-2'",
        ),
        ({**IDENTITY, "caller_model": "c2"}, "recorded with caller model 'caller'"),
        ({**IDENTITY, "judge_prompt": "zzz"}, "recorded with judge prompt 'abc'"),
    ],
)
def test_a_cassette_of_other_models_or_prompts_is_not_replayed(
    tmp_path: Path, identity: dict[str, str], reason: str
) -> None:
    _recorded(tmp_path, [_exchange(1, "hi")], [])
    auto = _cassettes(tmp_path, "auto", identity).open("s", 1)
    assert auto.refused.startswith(reason) and auto.client_mode == "record"
    replay = _cassettes(tmp_path, "replay", identity).open("s", 1)
    attempt = replay.finish(Attempt("error"))
    assert attempt.status == "error" and attempt.reason.startswith(reason)
    judged = _cassettes(tmp_path, "replay", identity).open("s", 1)
    call = judged.tape("judge").begin("POST", "http://llm/v1/chat/completions", b"{}")
    assert call.miss == f"replay miss at judge's call 1: {judged.refused}"  # the why
    assert judged.finish(Attempt("passed")).status == "error"


def _cassettes_with(tmp_path: Path, mode: str, rules: Rules) -> Cassettes:
    return Cassettes(tmp_path / "tapes", mode, rules, IDENTITY, scratch=tmp_path / "scratch")


def test_a_cassette_recorded_under_other_scrub_rules_is_not_replayed(tmp_path: Path) -> None:
    """A wider rule makes a changed request match a stale recording: the agent's prompt went
    from kind to rude, a rule added alongside scrubs the difference, and the recorded (kind)
    conversation and verdict would be replayed for the rude agent. The rules are part of what
    a cassette was recorded with, so it is refused instead."""
    _recorded(tmp_path, [_exchange(1, "Be kind to the guest.")], [])
    wide = Rules(patterns=[r"Be \w+"])
    rude = json.dumps(
        {"model": "gpt-x", "messages": [{"role": "user", "content": "Be rude to the guest."}]}
    ).encode()
    recorded = cs.read_cassette(tmp_path / "tapes" / "s.json")
    assert isinstance(recorded, cs.Cassette)
    stale = Tape("agent", "replay", recorded.of("agent"), wide, lambda e: None)
    assert stale.begin("POST", "http://llm/v1/chat/completions", rude).recorded is not None
    for mode in ("replay", "auto"):
        tapes = _cassettes_with(tmp_path, mode, wide).open("s", 1)
        assert tapes.refused.startswith("recorded with cassette rules '(none)', this run uses ")
        tapes.agent_env()
        spec = json.loads(tapes.agent_in.read_text())
        assert spec["exchanges"] == [], "nothing recorded is handed to the agent"
    attempt = _cassettes_with(tmp_path, "replay", wide).open("s", 1).finish(Attempt("passed"))
    assert attempt.status == "error" and "cassette rules" in attempt.reason


def test_the_same_rules_replay_and_their_digest_is_recorded(tmp_path: Path) -> None:
    rules = Rules(["metadata.session"], [r"\d{4}-\d{2}-\d{2}"])
    assert rules.digest() == Rules(["metadata.session"], [r"\d{4}-\d{2}-\d{2}"]).digest()
    assert rules.digest() != Rules(["metadata.session"]).digest() and Rules().digest() == ""
    tapes = _cassettes_with(tmp_path, "record", rules).open("s", 1)
    tapes.agent_env()
    _agent_says(tapes, {"exchange": {**_exchange(1, "hi"), "replayed": False}})
    assert tapes.finish(Attempt("passed")).status == "passed"
    written = json.loads((tmp_path / "tapes" / "s.json").read_text())
    assert written["recorded_with"]["cassette_rules"] == rules.digest()
    assert _cassettes_with(tmp_path, "replay", rules).open("s", 1).refused == ""
    assert (
        _cassettes_with(tmp_path, "replay", Rules())
        .open("s", 1)
        .refused.startswith("recorded with cassette rules")
    )


def test_another_format_version_or_no_cassette_is_said(tmp_path: Path) -> None:
    tapes = _cassettes(tmp_path, "auto").open("s", 1)
    assert tapes.refused == "no cassette recorded for this attempt"
    _recorded(tmp_path, [], [])
    path = tmp_path / "tapes" / "s.json"
    path.write_text(path.read_text().replace('"format_version": 2', '"format_version": 99'))
    assert "cassette format version 99" in _cassettes(tmp_path, "auto").open("s", 1).refused


def test_cassettes_are_masked_sorted_and_the_same_on_a_rewrite(tmp_path: Path) -> None:
    register_secret("sk-canary-0123456789abcdef")
    exchange = _exchange(1, "my key is sk-canary-0123456789abcdef")
    first = cs.cassette_text(cs.Cassette("s", 1, IDENTITY, {"agent": [exchange]}))
    assert "sk-canary" not in first and "***" in first
    assert first == cs.cassette_text(cs.Cassette("s", 1, IDENTITY, {"agent": [exchange]}))
    data = json.loads(first)
    assert list(data) == sorted(data)


def test_an_oversized_cassette_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cs, "MAX_CASSETTE_BYTES", 100)
    with pytest.raises(cs.CassetteError, match="over the 0 MiB bound: not recorded"):
        cs.write_cassette(
            tmp_path / "x.json", cs.Cassette("s", 1, IDENTITY, {"agent": [_exchange(1, "x")]})
        )


def test_rules_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text('{"ignore_fields": ["a..b"]}')
    with pytest.raises(ReplayConfigError, match=r"rules.json: ignore_fields: 'a..b'"):
        load_rules(path)
    with pytest.raises(ReplayConfigError, match="no such file"):
        load_rules(tmp_path / "missing.json")
    path.write_text('{"ignore_patterns": ["BK-\\\\d+"]}')
    assert load_rules(path).text("BK-12 x") == "<scrubbed> x"
