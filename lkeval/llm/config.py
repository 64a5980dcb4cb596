"""Which LLM plays the caller and which one judges: flags, environment, credentials, prices.

What the command line says about them is :class:`LLMOptions`: typed, frozen data built once at
the top (:mod:`lkeval.cli.options`) and passed down, so nothing in ``lkeval.llm`` reads
``argparse`` and every option is a named field grep can follow. ``None`` there means "not given
on the command line": :func:`resolve_llm_spec` then reads the ``LKEVAL_<ROLE>_*`` variables and
finally the defaults of :mod:`lkeval.defaults`. Where the servers are (URLs, keys by host) is
:mod:`lkeval.llm.endpoints`.

Kept free of ``livekit.agents`` imports at module level (importing it costs ~1.5 s): the CLI
resolves and checks both LLMs before any agent boots, so a missing key fails in milliseconds
with exit 2 instead of after the first scenario. Only :func:`lkeval.llm.client.build_llm`
imports livekit.

Two backends, chosen from the model string and base URL:

* ``openai/gpt-4.1-mini`` with no base URL → LiveKit Inference (``LIVEKIT_API_KEY`` and
  ``LIVEKIT_API_SECRET``, optional ``LIVEKIT_INFERENCE_URL``), the gateway LiveKit's own
  ``JudgeGroup`` uses for model strings.
* a base URL (or a model without ``/``, meaning api.openai.com) → any OpenAI-compatible
  chat-completions endpoint through livekit-plugins-openai.

API keys come from the environment only, never from flags (flags end up in shell history,
CI logs and the results file's ``argv``), and the spec records the *name* of the variable
that held the key, never its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from lkeval import defaults
from lkeval.errors import ConfigError
from lkeval.llm.endpoints import (
    OPENAI_DEFAULT_URL,
    env_value,
    inference_credentials,
    inference_url,
    is_local_host,
    key_envs,
    url_problem,
    wants_inference,
)
from lkeval.scenarios.bounds import MAX_LLM_RETRIES, MAX_TIMEOUT_SECONDS
from lkeval.scenarios.model import BUILTIN_JUDGES

__all__ = [
    "BUILTIN_JUDGES",
    "LLMConfigError",
    "LLMEndpointOptions",
    "LLMOptions",
    "LLMSpec",
    "check_credentials",
    "read_secret",
    "resolve_llm_spec",
]

Role = Literal["caller", "judge"]
Backend = Literal["inference", "openai"]

MAX_TOKENS: dict[Role, int] = {"caller": 400, "judge": 600}
"""Cap of one reply: a caller says a sentence or two, a judge a short reasoning and a verdict.

Its job is to stop a weak model that rambles (or pads: llama.cpp with a small model writes a
forced call as text, then newlines up to the cap) before the timeout, not to shape the answer.
A verdict with its brief reasoning is 60-250 tokens; 600 leaves a reasoning model room to think
without letting a padding model cost 1500 tokens a call.
"""
VerdictForm = Literal["tool", "json_schema"]


@dataclass(frozen=True)
class LLMEndpointOptions:
    """``--<role>-model``, ``--<role>-base-url``, ``--<role>-price`` of one role."""

    model: str | None = None
    base_url: str | None = None
    price: str | None = None


@dataclass(frozen=True)
class LLMOptions:
    """The caller's and the judge's flags, and how judging is done."""

    caller: LLMEndpointOptions = field(default_factory=LLMEndpointOptions)
    judge: LLMEndpointOptions = field(default_factory=LLMEndpointOptions)
    judges: tuple[str, ...] = ()
    rejudge: int = 0
    maybe_is_pass: bool = False
    allow_weak_judge: bool = False
    """Run on when the judge passes the known-bad canary (the preflight stops the run else)."""
    max_turns: int = defaults.MAX_TURNS
    retries: int | None = None
    timeout: float | None = None
    caller_temperature: float | None = None
    """None: LKEVAL_CALLER_TEMPERATURE, else the default (the judge always uses 0)."""
    prices: tuple[tuple[str, tuple[float, float]], ...] = ()
    """``--price MODEL=IN,OUT`` overrides (USD per 1M tokens) of the genai-prices table."""

    def endpoint(self, role: str) -> LLMEndpointOptions:
        """The flags of ``role`` (``"caller"`` or ``"judge"``)."""
        if role == "caller":
            return self.caller
        if role == "judge":
            return self.judge
        raise ValueError(f"unknown LLM role {role!r}")


class LLMConfigError(ConfigError):
    """The caller or judge LLM is misconfigured; the message is one line naming what to set."""


class MissingCredentialsError(LLMConfigError):
    """No credentials for an LLM; ``variables`` names what would do (a fork PR has none)."""

    def __init__(self, message: str, variables: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.variables = variables


@dataclass(frozen=True)
class LLMSpec:
    """Everything needed to build and call one LLM, with no secret in it.

    ``api_key_env``/``api_secret_env`` name the variables holding the credentials (None when
    none was found). ``max_retries`` is handed to the OpenAI SDK, which backs off and honours
    ``Retry-After``; ``retry_delay`` is livekit's fixed retry interval, used only for LiveKit
    Inference (whose client cannot take ``max_retries``; tests shrink it). ``max_tokens`` caps
    every reply, so a weak model cannot ramble until the timeout.
    """

    role: Role
    model: str
    backend: Backend
    base_url: str
    api_key_env: str | None = None
    api_secret_env: str | None = None
    temperature: float | None = 0.0
    timeout: float = defaults.LLM_TIMEOUT
    max_retries: int = defaults.LLM_RETRIES
    retry_delay: float = 1.0
    max_tokens: int | None = None
    price_in: float | None = None
    price_out: float | None = None
    verdict_form: VerdictForm = "tool"
    """How the judge is asked for a verdict: a forced tool call, or (where the server does not
    return tool calls for this model) a ``json_schema`` response_format; the preflight learns it."""

    @property
    def host(self) -> str:
        """The endpoint's host (and port), for error messages and reports."""
        parts = urlsplit(self.base_url)
        # netloc without any user:password@ a URL may carry: hosts go into every report
        host = parts.netloc.rpartition("@")[2]
        return host or self.base_url

    @property
    def label(self) -> str:
        """``judge LLM gpt-4.1-mini at api.openai.com``: how messages name this LLM."""
        via = "LiveKit Inference " if self.backend == "inference" else ""
        return f"{self.role} LLM {self.model} at {via}{self.host}"

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        """Estimated USD cost of a call, or None when the price is unknown."""
        if self.price_in is None or self.price_out is None:
            return None
        return (input_tokens * self.price_in + output_tokens * self.price_out) / 1_000_000


def parse_price(text: str) -> tuple[float, float]:
    """Parse ``"IN,OUT"`` USD per 1M tokens, e.g. ``"0.4,1.6"``."""
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError
        price_in, price_out = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(
            f"price {text!r} is not IN,OUT (USD per 1M input and output tokens, e.g. 0.4,1.6)"
        ) from None
    if price_in < 0 or price_out < 0:
        raise ValueError(f"price {text!r} is negative")
    return price_in, price_out


def _named(
    role: Role, options: LLMOptions, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(model, base URL) as ``--<role>-model``/``--<role>-base-url`` or ``LKEVAL_<ROLE>_*``
    name them (None where neither does): read here only, for :func:`resolve_llm_spec` and
    :func:`is_named` alike."""
    flags = options.endpoint(role)
    up = role.upper()
    return (
        flags.model or env_value(env, f"LKEVAL_{up}_MODEL"),
        flags.base_url or env_value(env, f"LKEVAL_{up}_BASE_URL"),
    )


def is_named(role: Role, options: LLMOptions, environ: Mapping[str, str]) -> bool:
    """Whether the flags or the environment name this role's model or server (a judge named
    so judges scripted scenarios too); a blank variable names nothing."""
    return any(_named(role, options, environ))


def _check_url(url: str, source: str) -> str:
    """The URL without a trailing ``/``; :class:`LLMConfigError` naming ``source`` if malformed.

    Malformed includes what ``urlsplit`` lets through but no client can reach: no host, an
    empty or non-numeric port (``http://127.0.0.1:/v1``), a port outside 1-65535, spaces. Such
    a URL would otherwise be retried as a refused connection for the whole retry budget.
    """
    problem = url_problem(url)
    if problem:
        raise LLMConfigError(
            f"{source} {url!r} is not a usable http(s) URL ({problem}; "
            "e.g. http://localhost:11434/v1)"
        )
    return url.rstrip("/")


def resolve_llm_spec(
    role: Role,
    options: LLMOptions | None = None,
    environ: Mapping[str, str] | None = None,
) -> LLMSpec:
    """The caller's or judge's LLM from flags, then ``LKEVAL_<ROLE>_*`` variables, then defaults.

    Raises :class:`LLMConfigError` for malformed values (a base URL that is not http(s), a bad
    price); missing credentials are left to :func:`check_credentials`, so ``--help``-like
    paths and dry runs never need secrets.
    """
    env = os.environ if environ is None else environ
    options = options or LLMOptions()
    flags = options.endpoint(role)
    base, base_source = _base_url_setting(role, flags.base_url, env)
    model, _ = _named(role, options, env)
    point = _endpoint(role, model or _default_model(role, base, env), base, base_source, env)
    price = _price(role, flags.price, point.model, options, env)
    return LLMSpec(
        role=role,
        temperature=_temperature(role, options, env),
        model=point.model,
        backend=point.backend,
        base_url=point.base_url,
        api_key_env=point.key_env,
        api_secret_env=point.secret_env,
        timeout=_timeout(options, env),
        max_retries=_retries(options, env),
        max_tokens=MAX_TOKENS[role],
        price_in=price[0] if price else None,
        price_out=price[1] if price else None,
    )


@dataclass(frozen=True)
class _Endpoint:
    backend: Backend
    base_url: str
    model: str
    key_env: str | None
    secret_env: str | None


def _base_url_setting(
    role: Role, flag: str | None, env: Mapping[str, str]
) -> tuple[str | None, str]:
    """The base URL asked for and where it came from (for error messages)."""
    if flag:
        return flag, f"--{role}-base-url"
    for name in (f"LKEVAL_{role.upper()}_BASE_URL", "OPENAI_BASE_URL"):
        if value := env_value(env, name):
            return value, name
    return None, ""


def _default_model(role: Role, base: str | None, env: Mapping[str, str]) -> str:
    """No model given: LiveKit Inference when LiveKit credentials are there (the agent's own
    deployment usually has them), else OpenAI's same model."""
    lk_key, lk_secret = inference_credentials(env)
    has_openai_key = bool(
        env_value(env, f"LKEVAL_{role.upper()}_API_KEY") or env_value(env, "OPENAI_API_KEY")
    )
    use_inference = wants_inference(base) or (
        not base and bool((lk_key and lk_secret) or not has_openai_key)
    )
    return f"openai/{defaults.LLM_MODEL}" if use_inference else defaults.LLM_MODEL


def _endpoint(
    role: Role, model: str, base: str | None, base_source: str, env: Mapping[str, str]
) -> _Endpoint:
    """The backend, URL, model name and credential variables for a model and base URL."""
    if wants_inference(base) or (not base and "/" in model):
        if "/" not in model:
            raise LLMConfigError(
                f"{role} model {model!r}: LiveKit Inference models are written provider/model, "
                f"e.g. openai/{defaults.LLM_MODEL}"
            )
        url = _check_url(inference_url(env), "LIVEKIT_INFERENCE_URL")
        return _Endpoint("inference", url, model, *inference_credentials(env))
    url = _check_url(base, base_source) if base else OPENAI_DEFAULT_URL
    if urlsplit(url).hostname == "api.openai.com":
        model = model.removeprefix("openai/")  # OpenAI itself has no provider prefix
    key_env = next((n for n in key_envs(role, url) if env_value(env, n)), None)
    return _Endpoint("openai", url, model, key_env, None)


def _price(
    role: Role, flag: str | None, model: str, options: LLMOptions, env: Mapping[str, str]
) -> tuple[float, float] | None:
    """``--<role>-price`` / ``LKEVAL_<ROLE>_PRICE``, else the price table's."""
    text = flag or env_value(env, f"LKEVAL_{role.upper()}_PRICE")
    if not text:
        from lkeval.results.pricing import PriceTable

        return PriceTable(dict(options.prices)).price(model)
    try:
        return parse_price(str(text))
    except ValueError as exc:
        raise LLMConfigError(f"--{role}-price: {exc}") from None


def _timeout(options: LLMOptions, env: Mapping[str, str]) -> float:
    value: Any = options.timeout or env_value(env, "LKEVAL_LLM_TIMEOUT") or defaults.LLM_TIMEOUT
    try:
        timeout = float(value)
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:  # nan, inf and 1e999 too
            raise ValueError
    except ValueError:
        raise LLMConfigError(
            f"--llm-timeout (or LKEVAL_LLM_TIMEOUT) {value!r} is not a number of seconds "
            f"more than 0 and at most {MAX_TIMEOUT_SECONDS:g}"
        ) from None
    return timeout


def _retries(options: LLMOptions, env: Mapping[str, str]) -> int:
    value: Any = options.retries
    if value is None:
        value = env_value(env, "LKEVAL_LLM_RETRIES") or defaults.LLM_RETRIES
    try:
        retries = int(value)
        if not 0 <= retries <= MAX_LLM_RETRIES:
            raise ValueError
    except ValueError:
        raise LLMConfigError(
            f"--llm-retries (or LKEVAL_LLM_RETRIES) {value!r} is not a whole number from 0 "
            f"to {MAX_LLM_RETRIES}"
        ) from None
    return retries


def _temperature(role: Role, options: LLMOptions, env: Mapping[str, str]) -> float:
    """The caller's sampling temperature (flag, env, default); the judge's is always 0."""
    if role == "judge":
        return 0.0
    value: Any = options.caller_temperature
    if value is None:
        value = env_value(env, "LKEVAL_CALLER_TEMPERATURE")
    if value is None:
        return defaults.CALLER_TEMPERATURE
    try:
        temperature = float(value)
        if not 0 <= temperature <= 2:
            raise ValueError
    except ValueError:
        raise LLMConfigError(
            f"--caller-temperature {value!r} is not a number from 0 to 2"
        ) from None
    return temperature


def check_credentials(spec: LLMSpec) -> None:
    """Raise :class:`LLMConfigError` naming the variable to set when credentials are missing.

    Self-hosted endpoints on local or private hosts (Ollama, vLLM) may run keyless; any other
    host needs a key, even a dummy one, so a forgotten secret fails before agents boot rather
    than as a 401 in every scenario.
    """
    flag = f"--{spec.role}-base-url"
    up = spec.role.upper()
    if spec.backend == "inference":
        missing = [
            name
            for name, found in (
                ("LIVEKIT_API_KEY", spec.api_key_env),
                ("LIVEKIT_API_SECRET", spec.api_secret_env),
            )
            if found is None
        ]
        if missing:
            raise MissingCredentialsError(
                f"{spec.role} LLM {spec.model} uses LiveKit Inference: set "
                f"{' and '.join(missing)}, or use another provider with --{spec.role}-model / "
                f"{flag} and LKEVAL_{up}_API_KEY or OPENAI_API_KEY",
                (*missing, f"LKEVAL_{up}_API_KEY", "OPENAI_API_KEY"),
            )
        return
    if spec.api_key_env is None and not is_local_host(urlsplit(spec.base_url).hostname or ""):
        names = " or ".join(key_envs(spec.role, spec.base_url))
        raise MissingCredentialsError(
            f"{spec.role} LLM {spec.model} at {spec.host} needs an API key: set {names} "
            "(any value if the endpoint needs none)",
            tuple(key_envs(spec.role, spec.base_url)),
        )


def read_secret(spec: LLMSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key value, read at the last moment so it never sits in a spec or a log."""
    env = os.environ if environ is None else environ
    return env_value(env, spec.api_key_env) if spec.api_key_env else None
