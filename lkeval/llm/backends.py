"""The livekit ``LLM`` object for an :class:`~lkeval.llm.config.LLMSpec`.

Apart from :mod:`lkeval.llm.config` because this is the one place that imports livekit
(~1.5 s): resolving and checking a spec must stay fast enough to fail before agents boot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lkeval.llm.config import LLMSpec, _env, check_credentials, read_secret

if TYPE_CHECKING:
    from livekit.agents.llm import LLM

__all__ = ["build_llm"]


def build_llm(spec: LLMSpec, environ: Mapping[str, str] | None = None) -> LLM:
    """A livekit ``LLM`` for the spec; the caller owns it and must ``await llm.aclose()``.

    Temperature is not baked into the LLM: :mod:`lkeval.llm.client` sends it per request so it
    can drop it for a provider that rejects it.
    """
    check_credentials(spec)
    env = os.environ if environ is None else environ
    if spec.backend == "inference":
        from livekit.agents.inference import LLM as InferenceLLM
        from livekit.agents.inference.llm import min_reasoning_effort

        extra: dict[str, Any] = {}
        if (effort := min_reasoning_effort(spec.model)) is not None:
            extra["reasoning_effort"] = effort  # as JudgeGroup does: fastest, cheapest
        return InferenceLLM(
            spec.model,
            base_url=spec.base_url,
            api_key=_env(env, spec.api_key_env or ""),
            api_secret=_env(env, spec.api_secret_env or ""),
            extra_kwargs=extra,
        )

    from livekit.plugins import openai as lk_openai

    return lk_openai.LLM(
        model=spec.model,
        base_url=spec.base_url,
        # A keyless local server still needs a non-empty string for the OpenAI SDK.
        api_key=read_secret(spec, env) or "lkeval-no-key",
        # The SDK's own retry machinery: backoff with jitter, honours Retry-After.
        max_retries=spec.max_retries,
    )
