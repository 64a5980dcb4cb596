"""``lkeval dev`` keeps the judge preflight between runs of the same judge: the judge (a real
scripted server over HTTP) is asked once; a different judge, prompt or option asks again, and
a judge that failed its canaries is never kept."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

from lkeval.llm import preflight_cache
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, LLMSpec, resolve_llm_spec
from lkeval.llm.evaluator import LLMEvaluator
from lkeval.llm.preflight import WeakJudgeError
from lkeval.results.model import JudgeCheck
from lkeval.testing.llm_server import LLMServer

REFUSAL = "I can't help with that"  # only the known-bad canary has the agent say this


def _verdict(value: str, **match: Any) -> dict[str, Any]:
    args = {"reasoning": f"canary {value}", "verdict": value}
    return {**match, "tool_calls": [{"name": "submit_verdict", "arguments": args}]}


def _evaluator(server: LLMServer, cached: bool = True) -> LLMEvaluator:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url=server.base_url))
    spec = dataclasses.replace(resolve_llm_spec("judge", flags, environ={}), max_retries=0)
    evaluator = LLMEvaluator(None, spec, judge_scripted=True, environ={})
    evaluator.cache_preflight = cached
    return evaluator


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_second_run_of_the_same_judge_asks_it_nothing() -> None:
    with LLMServer([_verdict("fail", last_user=REFUSAL), _verdict("pass")]) as server:
        first = _evaluator(server).preflight(io.StringIO())
        asked = len(server.requests)
        out = io.StringIO()
        second = _evaluator(server).preflight(out)
        assert len(server.requests) == asked > 0
    assert second == first
    assert "kept from an earlier run of this judge" in out.getvalue()
    assert "the judge tells them apart" in out.getvalue()  # the same line as when asked


def test_lkeval_run_asks_every_time() -> None:
    with LLMServer([_verdict("fail", last_user=REFUSAL), _verdict("pass")]) as server:
        _evaluator(server, cached=False).preflight(io.StringIO())
        asked = len(server.requests)
        _evaluator(server, cached=False).preflight(io.StringIO())
        assert len(server.requests) == 2 * asked
    assert not preflight_cache.cache_dir().exists()


def test_a_judge_that_failed_its_canaries_is_asked_again() -> None:
    with LLMServer([_verdict("pass")]) as server:  # passes the known-bad canary
        for _ in range(2):
            with pytest.raises(WeakJudgeError):
                _evaluator(server).preflight(io.StringIO())
    assert not list(preflight_cache.cache_dir().glob("*.json"))


def _spec(**changes: Any) -> LLMSpec:
    flags = LLMOptions(judge=LLMEndpointOptions(model="judge", base_url="http://127.0.0.1:9/v1"))
    return dataclasses.replace(resolve_llm_spec("judge", flags, environ={}), **changes)


@pytest.mark.parametrize(
    "other",
    [
        {"spec": _spec(model="judge-2")},
        {"spec": _spec(base_url="http://127.0.0.1:10/v1")},
        {"prompts": "other-prompts"},
        {"maybe_is_pass": True},
        {"allow_weak": True},
    ],
)
def test_the_key_changes_with_what_the_outcome_depends_on(other: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "spec": _spec(),
        "prompts": "p",
        "maybe_is_pass": False,
        "allow_weak": False,
    }
    key = preflight_cache.cache_key(*base.values())
    assert preflight_cache.cache_key(*{**base, **other}.values()) != key


def test_an_unreadable_entry_is_asked_again(tmp_path: Path) -> None:
    check = JudgeCheck("fail", "pass", known_fail_votes=("fail",), known_pass_votes=("pass",))
    preflight_cache.save_check("k", check, tmp_path)
    assert preflight_cache.load_check("k", tmp_path) == check
    (tmp_path / "k.json").write_text("{not json", encoding="utf-8")
    assert preflight_cache.load_check("k", tmp_path) is None
