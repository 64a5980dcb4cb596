"""The run's cassettes: what they must have been recorded with comes from the evaluator's
protocol (a rename fails the type check, not the replay check), and the object is whole when
built (the agents' scratch directory is given, not set afterwards)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from lkeval.host.tape import Rules
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, resolve_llm_spec
from lkeval.llm.evaluator import LLMEvaluator
from lkeval.replay.session import RULES_IDENTITY
from lkeval.run.collaborators import RunEvaluator
from lkeval.run.plan import SuiteSettings, open_cassettes


def _evaluator() -> LLMEvaluator:
    flags = LLMOptions(
        caller=LLMEndpointOptions(model="c", base_url="http://127.0.0.1:9/v1"),
        judge=LLMEndpointOptions(model="j", base_url="http://127.0.0.1:9/v1"),
    )
    caller, judge = (resolve_llm_spec(r, flags, {}) for r in ("caller", "judge"))
    return LLMEvaluator(caller, judge, judge_scripted=False, environ={})


def _settings(tmp_path: Path) -> SuiteSettings:
    return SuiteSettings(
        "agent.py", (), tmp_path / "results.json", tmp_path / "logs", cassettes=tmp_path / "tapes"
    )


def test_the_cassettes_identity_includes_the_evaluators_prompts_digest(tmp_path: Path) -> None:
    evaluator = _evaluator()
    cassettes = open_cassettes(_settings(tmp_path), Rules(), evaluator, tmp_path / "scratch")
    assert cassettes is not None
    digest = evaluator.prompts_digest()
    assert len(digest) == 16
    assert cassettes.identity == {
        "caller_model": "c",
        "judge_model": "j",
        "judge_prompt": digest,
        RULES_IDENTITY: Rules().digest(),
    }


def test_the_prompts_digest_is_part_of_the_run_evaluator_protocol() -> None:
    """What :func:`open_cassettes` calls is declared on the protocol: mypy then fails on an
    evaluator that renames it, where a ``getattr`` silently recorded an empty prompt digest."""
    members = {n for n, _ in inspect.getmembers(RunEvaluator) if not n.startswith("_")}
    assert "prompts_digest" in members
    assert all(hasattr(LLMEvaluator, name) for name in members)


def test_the_cassettes_are_not_changed_after_they_are_built(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    cassettes = open_cassettes(_settings(tmp_path), Rules(), _evaluator(), scratch)
    assert cassettes is not None
    assert cassettes.scratch == scratch
    with pytest.raises(dataclasses.FrozenInstanceError):
        cassettes.scratch = tmp_path / "elsewhere"  # type: ignore[misc]
    tapes = cassettes.open("hotel/books", 1)
    env = tapes.agent_env()
    assert all(Path(path).parent == scratch.resolve() for path in env.values())
