"""Replaying with no keys: ``--cassette-mode replay`` needs no LLM credentials.

In ``replay`` mode every HTTP call of the agent, the caller and the judge is answered from the
cassettes, and a call they do not hold is answered locally with an error (docs/replay.md):
nothing reaches a provider. The clients still refuse to be built without a key (lk-eval's
credential check, the OpenAI SDK in the agent, LiveKit Inference's token signing), so a key
that is missing is filled with :data:`PLACEHOLDER`, which is no secret and never leaves the
machine. A key that is set is left as it is. This is what lets a CI failure be reproduced on a
laptop with no keys, and a fork's pull request evaluate what replays in full.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from lkeval.llm.config import LLMOptions, MissingCredentialsError
from lkeval.llm.evaluator import build_evaluator
from lkeval.scenarios.model import Scenario

PLACEHOLDER = "lkeval-replay-no-key"
#: Keys agents commonly need just to build their models: the OpenAI SDK's, LiveKit Inference's.
AGENT_KEYS = ("OPENAI_API_KEY", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


def keyless_environ(
    options: LLMOptions,
    scenarios: Sequence[Scenario],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``environ`` with a placeholder for each key the caller and judge lack.

    The models are resolved as without keys would resolve them, except that a spec asking for
    LiveKit Inference keeps it (its own variables are filled, not an OpenAI key): name the
    models as the recording run did (``--caller-model``, ``--judge-model``) and the cassettes
    match; a cassette recorded with other models is not replayed, and says so.
    """
    env = dict(os.environ if environ is None else environ)
    for _ in range(4):  # caller and judge, each at most a key and a secret
        try:
            build_evaluator(options, scenarios, env)
            return env
        except MissingCredentialsError as exc:
            wanted = [name for name in exc.variables if not env.get(name)]
            inference = [name for name in wanted if name.startswith("LIVEKIT_")]
            fill = inference or wanted[:1]
            if not fill:
                raise
            env.update(dict.fromkeys(fill, PLACEHOLDER))
    return env


def agent_placeholders(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """For the agent's environment: a placeholder for each of :data:`AGENT_KEYS` unset or empty
    (an agent that builds an OpenAI or LiveKit Inference model refuses to start without)."""
    env = os.environ if environ is None else environ
    return {name: PLACEHOLDER for name in AGENT_KEYS if not env.get(name)}
