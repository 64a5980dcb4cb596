"""``--cassette-mode replay`` needs no keys: a missing caller/judge/agent key is filled with a
placeholder (no secret, never sent: replay answers every call locally); a key that is set stays."""

from __future__ import annotations

import pytest

from lkeval.cli import build_parser
from lkeval.cli.options import run_options
from lkeval.cli.run import suite_settings
from lkeval.llm.config import LLMEndpointOptions, LLMOptions, MissingCredentialsError
from lkeval.llm.evaluator import build_evaluator, keyless_environ
from lkeval.llm.placeholders import PLACEHOLDER, agent_placeholders
from lkeval.scenarios.model import Scenario

SIMULATED = [  # played by the simulated caller: needs a caller and a judge
    Scenario(
        label="A", instructions="You are Ada.", agent_expectations="Books it.", file="s.yaml",
        line=1, group_id="G", group_name="G", id="a", id_derived=False,
    )
]  # fmt: skip


def test_without_any_key_the_default_models_get_livekit_placeholders() -> None:
    with pytest.raises(MissingCredentialsError):
        build_evaluator(LLMOptions(), SIMULATED, {})
    env = keyless_environ(LLMOptions(), SIMULATED, {})
    assert env == {"LIVEKIT_API_KEY": PLACEHOLDER, "LIVEKIT_API_SECRET": PLACEHOLDER}
    evaluator = build_evaluator(LLMOptions(), SIMULATED, env)
    assert evaluator is not None
    assert {u.model for u in evaluator.llms_in_use()} == {"openai/gpt-4.1-mini"}


def test_named_openai_models_keep_their_provider_and_get_one_key() -> None:
    named = LLMOptions(
        caller=LLMEndpointOptions(model="gpt-4.1-mini"),
        judge=LLMEndpointOptions(model="gpt-4.1-mini"),
    )
    env = keyless_environ(named, SIMULATED, {})
    assert set(env.values()) == {PLACEHOLDER} and not any(k.startswith("LIVEKIT") for k in env)
    evaluator = build_evaluator(named, SIMULATED, env)
    assert evaluator is not None and {u.host for u in evaluator.llms_in_use()} == {"api.openai.com"}


def test_a_key_that_is_set_is_never_replaced() -> None:
    env = keyless_environ(LLMOptions(), SIMULATED, {"OPENAI_API_KEY": "sk-real"})
    assert env == {"OPENAI_API_KEY": "sk-real"}
    assert agent_placeholders({"OPENAI_API_KEY": "sk-real", "LIVEKIT_API_KEY": ""}) == {
        "LIVEKIT_API_KEY": PLACEHOLDER,
        "LIVEKIT_API_SECRET": PLACEHOLDER,
    }


def settings(*extra: str):  # type: ignore[no-untyped-def]
    argv = ["run", "--agent", "a.py", "--scenarios", "s.yaml", *extra]
    return suite_settings(run_options(build_parser().parse_args(argv)))


def test_only_replay_mode_gives_the_agent_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    replaying = dict(settings("--cassettes", "c", "--cassette-mode", "replay", "--env", "X=1").env)
    assert replaying == {
        "OPENAI_API_KEY": PLACEHOLDER,
        "LIVEKIT_API_KEY": PLACEHOLDER,
        "LIVEKIT_API_SECRET": PLACEHOLDER,
        "X": "1",
    }
    mine = dict(
        settings("--cassettes", "c", "--cassette-mode", "replay", "--env", "OPENAI_API_KEY=k").env
    )
    assert mine["OPENAI_API_KEY"] == "k"  # --env wins
    assert dict(settings("--cassettes", "c").env) == {}  # auto may go live: no placeholder
    assert dict(settings().env) == {}
