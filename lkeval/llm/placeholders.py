"""Placeholder keys for replaying cassettes with none: no call leaves the machine then, but
the clients (lk-eval's credential check, the OpenAI SDK in the agent, LiveKit Inference's
token signing) refuse to be built without a key. A placeholder is no secret and never leaves
the machine; a key that is set is never replaced."""

from __future__ import annotations

import os
from collections.abc import Mapping

PLACEHOLDER = "lkeval-replay-no-key"
#: Keys agents commonly need just to build their models: the OpenAI SDK's, LiveKit Inference's.
AGENT_KEYS = ("OPENAI_API_KEY", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


def agent_placeholders(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """For the agent's environment: a placeholder for each of :data:`AGENT_KEYS` unset or empty
    (an agent that builds an OpenAI or LiveKit Inference model refuses to start without)."""
    env = os.environ if environ is None else environ
    return {name: PLACEHOLDER for name in AGENT_KEYS if not env.get(name)}


__all__ = ["AGENT_KEYS", "PLACEHOLDER", "agent_placeholders"]
