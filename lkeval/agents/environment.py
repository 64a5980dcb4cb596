"""The agent's environment (cold or warm, and the fork server's own): ours without lk-eval's
credentials and Action inputs, plus the run's additions.

Its own module, standard library only, because ``lkeval run`` builds it in its first lines to
start the fork server before lk-eval's own imports (:mod:`lkeval.run.early_start`), and the
run builds it again later from its settings: the two must be the same function.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from lkeval.host.agent_host import INFERENCE_CLASS_ENV

# lk-eval's own credentials, which the agent under test has no use for: the CI token (it can
# write to the repository), the Actions runtime tokens, and the caller's and judge's keys.
# ``--env`` can still hand any of them to the agent explicitly.
WITHHELD_FROM_AGENT = (
    "GITHUB_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "LKEVAL_CALLER_API_KEY",
    "LKEVAL_JUDGE_API_KEY",
)


#: livekit-agents' event-loop monitor (1.8 and later) checks the agent's job loop (the console
#: does not monitor its server's) from a timer and a thread, every fifth of its warn threshold
#: but at least every 50 ms: at its default (100 ms) that is 100 wake-ups a second, ~12 ms of
#: CPU per second per agent, a quarter of what a turn on a 1 s LLM costs the agent
#: (BENCHMARKS.md, "CPU per turn"). From 250 ms the tick is 50 ms; blocks of 250 ms and more
#: are still logged. The user's own value (the environment, ``--env``) wins.
LOOP_MONITOR_ENV = "LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS"
LOOP_MONITOR_WARN_MS = "250"


def agent_environment(added: Mapping[str, str], inference_class: str) -> dict[str, str]:
    """Ours without lk-eval's own credentials and Action inputs, plus ``added`` (``--env``),
    with unbuffered output and, unless set, a loop monitor that wakes less often
    (:data:`LOOP_MONITOR_ENV`)."""
    inherited = {
        k: v
        for k, v in os.environ.items()
        if k not in WITHHELD_FROM_AGENT and not k.startswith("INPUT_")
    }
    return {
        LOOP_MONITOR_ENV: LOOP_MONITOR_WARN_MS,
        **inherited,
        **added,
        INFERENCE_CLASS_ENV: inference_class,
        "PYTHONUNBUFFERED": "1",
    }


__all__ = ["LOOP_MONITOR_ENV", "LOOP_MONITOR_WARN_MS", "WITHHELD_FROM_AGENT", "agent_environment"]
