"""Choosing and checking the caller/judge LLMs: flags, environment, credentials, backends."""

from __future__ import annotations

import argparse
import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import jwt
import pytest

from lkeval.cli.flags import add_llm_arguments
from lkeval.cli.options import llm_options
from lkeval.llm.client import build_llm
from lkeval.llm.config import (
    LLMConfigError,
    LLMSpec,
    check_credentials,
)
from lkeval.llm.config import resolve_llm_spec as resolve
from lkeval.llm.judge import judge_conversation
from lkeval.results.model import TranscriptItem
from lkeval.testing.llm_server import LLMServer

LK = {"LIVEKIT_API_KEY": "APIkey123", "LIVEKIT_API_SECRET": "s" * 40}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_llm_arguments(parser)
    return parser.parse_args(list(argv))


def resolve_llm_spec(
    role: str,
    given: dict[str, str] | argparse.Namespace | None = None,
    environ: dict[str, str] | None = None,
) -> LLMSpec:
    """Resolve through the real flags and options: ``{"judge_model": "m"}`` is --judge-model m."""
    if not isinstance(given, argparse.Namespace):
        argv = [x for k, v in (given or {}).items() for x in (f"--{k.replace('_', '-')}", v)]
        given = parse(*argv)
    return resolve(role, llm_options(given), environ)  # type: ignore[arg-type]


def test_flag_defaults() -> None:
    args = parse()
    assert (args.max_turns, args.maybe_is_pass, args.rejudge, args.judges) == (12, False, 0, ())
    assert args.llm_timeout is None and args.judge_model is None
    args = parse(
        "--judges",
        "safety, tool_use",
        "--rejudge",
        "2",
        "--maybe-is-pass",
        "--max-turns",
        "5",
        "--llm-timeout",
        "30",
        "--judge-price",
        "1,2",
    )
    assert args.judges == ("safety", "tool_use") and args.rejudge == 2 and args.maybe_is_pass
    assert resolve_llm_spec("judge", args, LK).timeout == 30.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--judges", "safety,nope"],
        ["--rejudge", "-1"],
        ["--max-turns", "0"],
        ["--caller-price", "cheap"],
        ["--llm-timeout", "0"],
        ["--judge-api-key", "sk-x"],  # keys never come from flags
    ],
)
def test_bad_flags_are_rejected(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2


def test_model_and_url_from_flags_beat_env() -> None:
    env = {
        "LKEVAL_JUDGE_MODEL": "env-model",
        "LKEVAL_JUDGE_BASE_URL": "http://env:1/v1",
        "OPENAI_API_KEY": "k",
    }
    spec = resolve_llm_spec(
        "judge", parse("--judge-model", "flag-model", "--judge-base-url", "http://flag:2/v1/"), env
    )
    assert (spec.model, spec.base_url, spec.backend) == ("flag-model", "http://flag:2/v1", "openai")
    spec = resolve_llm_spec("judge", parse(), env)
    assert (spec.model, spec.base_url, spec.host) == ("env-model", "http://env:1/v1", "env:1")
    assert spec.api_key_env == "OPENAI_API_KEY"


def test_openai_base_url_is_the_fallback_and_role_key_comes_first() -> None:
    env = {
        "OPENAI_BASE_URL": "https://api.groq.com/openai/v1",
        "OPENAI_API_KEY": "o",
        "GROQ_API_KEY": "g",
        "LKEVAL_CALLER_API_KEY": "c",
        "LKEVAL_CALLER_MODEL": "llama-3",
    }
    caller = resolve_llm_spec("caller", None, env)
    assert caller.base_url == "https://api.groq.com/openai/v1"
    assert caller.api_key_env == "LKEVAL_CALLER_API_KEY"
    judge = resolve_llm_spec("judge", {"judge_model": "llama-3"}, env)
    assert judge.api_key_env == "GROQ_API_KEY"  # provider key before OPENAI_API_KEY


def test_default_model_prefers_livekit_inference_when_its_credentials_exist() -> None:
    spec = resolve_llm_spec("judge", None, LK)
    assert (spec.backend, spec.model, spec.host) == (
        "inference",
        "openai/gpt-4.1-mini",
        "agent-gateway.livekit.cloud",
    )
    assert (spec.api_key_env, spec.api_secret_env) == ("LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")
    spec = resolve_llm_spec("judge", None, {"OPENAI_API_KEY": "k"})
    assert (spec.backend, spec.model, spec.base_url) == (
        "openai",
        "gpt-4.1-mini",
        "https://api.openai.com/v1",
    )
    assert (spec.price_in, spec.price_out) == (0.40, 1.60)


def test_inference_model_strings_and_the_livekit_alias() -> None:
    env = {
        **LK,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "LIVEKIT_INFERENCE_URL": "http://127.0.0.1:7/v1",
    }
    # OPENAI_BASE_URL (set for the agent) makes it OpenAI-compatible...
    assert resolve_llm_spec("judge", {"judge_model": "openai/gpt-4o"}, env).backend == "openai"
    # ...unless the base URL says livekit
    spec = resolve_llm_spec(
        "judge", {"judge_model": "openai/gpt-4o", "judge_base_url": "livekit"}, env
    )
    assert (spec.backend, spec.base_url) == ("inference", "http://127.0.0.1:7/v1")
    assert (spec.price_in, spec.price_out) == (2.50, 10.00)
    with pytest.raises(LLMConfigError, match="provider/model"):
        resolve_llm_spec("judge", {"judge_model": "gpt-4o", "judge_base_url": "livekit"}, env)


def test_openai_prefix_is_dropped_for_openai_itself() -> None:
    spec = resolve_llm_spec(
        "caller",
        {"caller_model": "openai/gpt-4o-mini", "caller_base_url": "https://api.openai.com/v1"},
        {"OPENAI_API_KEY": "k"},
    )
    assert spec.model == "gpt-4o-mini"
    spec = resolve_llm_spec(
        "caller",
        {"caller_model": "openai/gpt-4o-mini", "caller_base_url": "https://openrouter.ai/api/v1"},
        {"OPENROUTER_API_KEY": "k"},
    )
    assert (spec.model, spec.api_key_env) == ("openai/gpt-4o-mini", "OPENROUTER_API_KEY")


def test_price_override_and_bad_values() -> None:
    spec = resolve_llm_spec("judge", {"judge_price": "1.5, 3"}, {"OPENAI_API_KEY": "k"})
    assert (spec.price_in, spec.price_out) == (1.5, 3.0)
    assert spec.cost(1_000_000, 500_000) == pytest.approx(3.0)
    assert (
        resolve_llm_spec("judge", {"judge_model": "llama3"}, {"OPENAI_API_KEY": "k"}).cost(10, 10)
        is None
    )
    with pytest.raises(LLMConfigError, match="--judge-price"):
        resolve_llm_spec("judge", None, {"LKEVAL_JUDGE_PRICE": "x", "OPENAI_API_KEY": "k"})
    with pytest.raises(LLMConfigError, match="LKEVAL_JUDGE_BASE_URL 'localhost:11434'"):
        resolve_llm_spec("judge", None, {"LKEVAL_JUDGE_BASE_URL": "localhost:11434"})
    with pytest.raises(LLMConfigError, match="--llm-timeout"):
        resolve_llm_spec("judge", None, {"LKEVAL_LLM_TIMEOUT": "soon"})


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:/v1", "an empty port"),
        ("http://127.0.0.1:99999/v1", "not a number from 1 to 65535"),
        ("http://127.0.0.1:80a/v1", "not a number from 1 to 65535"),
        ("http://127.0.0.1:0/v1", "port 0"),
        ("http://:8080/v1", "no host"),
        ("http://local host:8080/v1", "whitespace"),
        ("ftp://127.0.0.1/v1", "scheme must be http or https"),
    ],
)
def test_a_malformed_base_url_is_a_config_error_naming_its_source(url: str, problem: str) -> None:
    """Issue 18.13: such URLs were accepted, then retried as refused connections for 45 s."""
    with pytest.raises(LLMConfigError) as flag:
        resolve_llm_spec("judge", {"judge_base_url": url, "judge_model": "m"}, {})
    assert str(flag.value).startswith(f"--judge-base-url {url!r} is not a usable http(s) URL")
    assert problem in str(flag.value)
    for name in ("LKEVAL_CALLER_BASE_URL", "OPENAI_BASE_URL"):
        with pytest.raises(LLMConfigError, match=f"^{name} "):
            resolve_llm_spec("caller", {"caller_model": "m"}, {name: url})
    with pytest.raises(LLMConfigError, match=r"^LIVEKIT_INFERENCE_URL "):
        resolve_llm_spec(
            "judge", {"judge_model": "openai/gpt-4o"}, {**LK, "LIVEKIT_INFERENCE_URL": url}
        )


def test_well_formed_base_urls_are_kept() -> None:
    for url in (
        "http://127.0.0.1:8080/v1/",
        "https://user:pw@llm.example.com/v1",
        "http://[::1]:9/v1",
    ):
        spec = resolve_llm_spec("judge", {"judge_base_url": url, "judge_model": "m"}, {})
        assert spec.base_url == url.rstrip("/")


@pytest.mark.parametrize(
    ("role", "env", "flags", "needle"),
    [
        ("judge", {}, {}, "set LIVEKIT_API_KEY and LIVEKIT_API_SECRET"),
        ("judge", {"LIVEKIT_API_KEY": "k"}, {}, "set LIVEKIT_API_SECRET,"),
        (
            "caller",
            {},
            {"caller_model": "gpt-4o"},
            "caller LLM gpt-4o at api.openai.com needs an API key: set LKEVAL_CALLER_API_KEY or "
            "OPENAI_API_KEY (any value if the endpoint needs none)",
        ),
        (
            "judge",
            {},
            {"judge_base_url": "https://myorg.openai.azure.com/openai/v1"},
            "set LKEVAL_JUDGE_API_KEY or AZURE_OPENAI_API_KEY or OPENAI_API_KEY",
        ),
    ],
)
def test_missing_credentials_name_the_variable(
    role: str, env: dict[str, str], flags: dict[str, str], needle: str
) -> None:
    spec = resolve_llm_spec(role, flags, env)
    with pytest.raises(LLMConfigError) as info:
        check_credentials(spec)
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:11434/v1",
        "http://127.0.0.1:8000/v1",
        "http://ollama:11434/v1",
        "http://10.0.0.5/v1",
    ],
)
def test_local_endpoints_may_run_without_a_key(url: str) -> None:
    check_credentials(resolve_llm_spec("judge", {"judge_base_url": url, "judge_model": "m"}, {}))


def test_build_llm_picks_the_plugin_for_each_backend() -> None:
    from livekit.agents.inference import LLM as InferenceLLM
    from livekit.plugins import openai as lk_openai

    async def main() -> None:
        spec = resolve_llm_spec(
            "caller", {"caller_base_url": "http://localhost:1/v1", "caller_model": "llama3.2"}, {}
        )
        llm = build_llm(spec, environ={})
        assert isinstance(llm, lk_openai.LLM) and llm.model == "llama3.2"
        await llm.aclose()
        spec = resolve_llm_spec("judge", None, LK)
        llm = build_llm(spec, environ=LK)
        assert isinstance(llm, InferenceLLM) and llm.model == "openai/gpt-4.1-mini"
        await llm.aclose()
        with pytest.raises(LLMConfigError):
            build_llm(resolve_llm_spec("judge", None, {}), environ={})

    asyncio.run(main())


@pytest.fixture
def srv() -> Iterator[LLMServer]:
    with LLMServer() as server:
        yield server


def test_inference_path_sends_a_livekit_jwt_to_the_inference_url(
    srv: LLMServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    env = {**LK, "LIVEKIT_INFERENCE_URL": srv.base_url}
    for name in ("LIVEKIT_INFERENCE_API_KEY", "LIVEKIT_INFERENCE_API_SECRET", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    srv.set_rules(
        [
            {"status": 429, "times": 1},  # answered with Retry-After: 0
            {
                "model": "openai/gpt-4.1-mini",
                "tool_choice": "submit_verdict",
                "tool_calls": [
                    {"name": "submit_verdict", "arguments": {"reasoning": "ok", "verdict": "pass"}}
                ],
            },
        ]
    )
    spec = resolve_llm_spec("judge", {"judge_model": "openai/gpt-4.1-mini"}, env)
    # livekit's own retry loop serves LiveKit Inference (its client takes no max_retries)
    spec = replace(spec, retry_delay=0.01)
    assert spec.backend == "inference" and spec.host == f"127.0.0.1:{srv.port}"

    async def main() -> None:
        llm = build_llm(spec, environ=env)
        try:
            transcript = [TranscriptItem("message", 0, role="assistant", text="Hi")]
            verdict, usage = await judge_conversation(llm, spec, transcript, "greets", "")
            assert verdict.verdict == "pass" and usage.cost_usd is not None
        finally:
            await llm.aclose()

    retries = logging.getLogger("livekit.agents")  # lk-eval may have stopped its propagation
    retries.addHandler(caplog.handler)
    try:
        asyncio.run(main())
    finally:
        retries.removeHandler(caplog.handler)
    # the 429 was answered and retried by livekit's loop at once, not left to a timeout
    (retried,) = {r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()}
    assert "status_code=429" in retried, retried
    _, request = srv.requests
    assert request.body["model"] == "openai/gpt-4.1-mini"
    scheme, token = (request.authorization or "").split(" ", 1)
    assert scheme == "Bearer"
    claims = jwt.decode(token, LK["LIVEKIT_API_SECRET"], algorithms=["HS256"])
    assert claims["iss"] == LK["LIVEKIT_API_KEY"]
    assert claims["inference"]["perform"] is True


def test_llm_config_does_not_import_livekit_agents() -> None:
    code = "import sys, lkeval.llm.config; print('livekit.agents' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
