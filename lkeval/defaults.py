"""Every default of ``lkeval run``, written once, at the floor of the package.

The command line (its flags and ``--help``) and the layers below it (the run, the LLM side)
read their defaults from here, so no layer imports another just for a constant and a default
changed here changes everywhere at once. Only plain values live here: what decides a default
from the machine (:func:`default_concurrency`) is a small pure function.
"""

from __future__ import annotations

import os

RESULTS = "lkeval-results/results.json"
"""``--results``: the results file (reports and ``logs/`` go beside it)."""
BASELINE_ARTIFACT = "lk-eval-results"
"""``--baseline-artifact``: the artifact name ``--baseline github:BRANCH`` looks for (the name
the example workflows upload the results directory under)."""

BOOT_TIMEOUT = 60.0
"""``--boot-timeout``: seconds for an agent to boot and answer its first turn."""
TURN_TIMEOUT = 90.0
"""``--turn-timeout``: seconds for one agent turn (above the ~44 s an agent takes to give up on
a hanging LLM endpoint)."""
MAX_TURNS = 12
"""``--max-turns``: most caller turns in a simulated conversation."""
MAX_SILENT_TURNS = 2
"""A simulated conversation ends when the agent answers this many caller turns in a row with
silence (an empty answer is legal: the agent chose not to speak)."""
STOP_GRACE = 5.0
"""Seconds an agent gets to exit on its own before it is killed."""
MAX_ERRORS = 3
"""``--max-errors``: stop booting when the first N attempts fail alike on the agent's side."""
RUN_ATTEMPTS_PER_SCENARIO = 10
"""``--max-run-attempts``: attempts a run may start in all, per selected scenario."""
AGENT_MEMORY_MIB = 2048
"""``--agent-memory``: MiB one agent may hold resident. A real agent (LiveKit, a plugin, an
ONNX model) stays well under 1 GiB; 2 GiB leaves most of a 7 GB hosted runner to the rest."""
AGENT_LOG_MIB = 64
"""``--agent-log-limit``: MiB of log one agent may write (far above a chatty agent at DEBUG,
a few MiB per conversation)."""

INFERENCE_CLASS = "low"
"""``--inference-class``: the LiveKit Inference class of the agent's own calls, ``low`` as
LiveKit's text simulations pin them (livekit-agents 1.6.10 and later), or ``agent``: the class
each model asks for, as in production (docs/protocol.md)."""
INFERENCE_CLASSES = ("low", "agent")

MODE = "text"
"""``--mode``: how scenarios without their own ``mode:`` play, ``text`` turns or ``audio``
(spoken into the agent's microphone in real time, heard from its speaker; docs/audio.md)."""
MODES = ("text", "audio")
SPEECH = "agent"
"""``--speech``: in audio mode, ``agent`` leaves the agent's speech models as it configured
them (its own provider keys); ``local`` serves its LiveKit Inference / OpenAI STT and TTS from
lk-eval's local speech server (an oracle STT: recognition is not tested; espeak TTS);
``local:pocketsphinx`` the same with pocketsphinx recognizing what the agent received (the
``speech`` extra)."""
SPEECH_CHOICES = ("agent", "local", "local:pocketsphinx")
VOICE = "espeak"
"""``--voice``: the caller's text-to-speech in audio mode (``espeak[:VOICE]``,
``openai:MODEL[:VOICE]``, ``inference:PROVIDER/MODEL[:VOICE]``)."""
AUDIO_CONCURRENCY_PER_CORE = 1
"""Audio conversations at once per core when ``--concurrency`` is not given: an audio turn
runs in real time and each agent runs its VAD and end-of-turn models locally (0.1-1.2 s of CPU
a turn), so the text default would starve them (bench/audio.py, BENCHMARKS.md)."""

CASSETTE_MODES = ("auto", "replay", "record")
"""``--cassette-mode``: with ``--cassettes DIR``, ``auto`` (the default) replays while requests
match and goes live from the first that differs, ``replay`` uses cassettes only (a request with
no match is an error), ``record`` runs live and rewrites them (docs/replay.md)."""
CASSETTE_MODE = "auto"
CASSETTES_ARTIFACT = "lk-eval-cassettes"
"""``--cassettes-artifact``: the artifact name ``--cassettes-from github:BRANCH`` restores (the
name the cassettes recipe uploads the cassettes directory under)."""

LLM_MODEL = "gpt-4.1-mini"
"""The caller's and judge's model when neither flag nor environment names one."""
LLM_TIMEOUT = 60.0
"""``--llm-timeout``: seconds one caller/judge call may take, start to last token, retries
included."""
LLM_RETRIES = 4
"""``--llm-retries``: retries of a caller/judge request on 429, 5xx and timeouts."""
CALLER_TEMPERATURE = 0.7
"""The simulated caller's temperature (the judge always uses 0)."""


WARM_CONCURRENCY_PER_CORE = 16
WARM_CONCURRENCY_MAX = 32
AGENTS_MEMORY_SHARE = 0.75
"""Share of the memory available when a run's engine starts (its cgroup's limit less its usage,
else MemAvailable) that its agents may take together (lkeval.agents.memory); the rest is left
to lk-eval, the fork server, the LLM server a local model runs in, and the agents' growth
between two measurements."""
AGENT_BUDGET_MIB = 256
"""Memory the default concurrency plans per live agent (a warm one holds ~35 MiB of its own
and ~95 MiB PSS after its first turns; the rest is headroom for the agent's own work)."""


def default_concurrency(warm: bool = True, cores: int | None = None, audio: bool = False) -> int:
    """``--concurrency``, from what a scenario costs on this machine.

    Cold starts (``--cold-start``, or warm starts unavailable): an agent boots CPU-bound
    (~2.5 CPU-s), so more at once than cores only queues them: ``min(4, cores)``.

    Warm starts: a boot is ~0.1-0.35 CPU-s and a turn ~30 ms of CPU, while a conversation
    lasts as long as its LLM answers (seconds each with a real provider): an LLM-bound suite
    keeps a core a few % busy per conversation. So 16 per core, at most 32: with one boot at
    a time per two cores (:func:`booting_agents`), 40 scenarios on 2 cores with 1 s answers ran
    fastest at 32 (14.9 s; 19.6 at 16, 16.0 at 48) with turns at 1.17x the LLM's latency at
    the p95 (BENCHMARKS.md). And no more than the available memory holds at
    :data:`AGENT_BUDGET_MIB` per agent (talking and prepared). Whatever the concurrency,
    the run then admits agents only while the largest measured fits in
    :data:`AGENTS_MEMORY_SHARE` of its memory (:mod:`lkeval.agents.memory`).
    """
    n = max(1, cores if cores is not None else os.cpu_count() or 1)
    if audio:  # real-time turns, each agent's VAD and turn detector on these cores
        return max(1, AUDIO_CONCURRENCY_PER_CORE * n)
    if not warm:
        return max(1, min(4, n))
    wanted = min(WARM_CONCURRENCY_MAX, WARM_CONCURRENCY_PER_CORE * n)
    available = _available_mib()
    if available is not None:
        fits = available // AGENT_BUDGET_MIB - prepared_agents(wanted, n)
        wanted = min(wanted, max(1, fits))
    return max(1, wanted)


def _available_mib() -> int | None:
    """MemAvailable from /proc/meminfo (None elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def prepared_agents(concurrency: int, cores: int | None = None) -> int:
    """Agents booting, or booted and waiting for a conversation slot, at most (besides the
    ``concurrency`` talking): as many as the conversations on a small run, and at most two
    per core. A prepared agent only has to cover the next boot (~0.3 s warm), not a whole
    conversation; more of them only boot at once on the same cores and hold memory (at
    c=64 that was 128 agents, 4 GiB, and slower turns, issue 20.3)."""
    per_core = 2 * max(1, cores if cores is not None else os.cpu_count() or 1)
    return max(1, min(concurrency, max(2, per_core)))


#: Seconds a warm boot counts against :func:`booting_agents`: its CPU-bound part (fork,
#: entrypoint, server start) takes 0.1-0.3 s; a boot still going after this waits on
#: something else (the network, a lock) and no longer holds the next one back.
BOOT_CPU_WINDOW = 1.0


def booting_agents(concurrency: int, warm: bool = True, cores: int | None = None) -> int:
    """Agents booting at once, at most (of the :func:`prepared_agents`).

    A warm boot is CPU-bound for its first ~0.1-0.3 s, and the scheduler shares the cores
    equally among everything runnable: four boots beside 32 conversations on 2 cores gave
    each turn's ~30 ms of agent CPU a fraction of a core, and turns at c=32 stretched to a
    p95 of 1.4-1.6x the LLM's latency; one boot at a time kept it at 1.1-1.26x with the same
    wall (issue 20.3, BENCHMARKS.md). So one per two cores, at least one. Cold boots (~2.5
    CPU-s each, nothing else to share the cores with) keep one per prepared agent."""
    prepared = prepared_agents(concurrency, cores)
    if not warm:
        return prepared
    n = max(1, cores if cores is not None else os.cpu_count() or 1)
    return max(1, min(prepared, n // 2))


__all__ = [
    "AGENTS_MEMORY_SHARE",
    "AGENT_LOG_MIB",
    "AGENT_MEMORY_MIB",
    "AUDIO_CONCURRENCY_PER_CORE",
    "BASELINE_ARTIFACT",
    "BOOT_CPU_WINDOW",
    "BOOT_TIMEOUT",
    "CALLER_TEMPERATURE",
    "CASSETTES_ARTIFACT",
    "CASSETTE_MODE",
    "CASSETTE_MODES",
    "INFERENCE_CLASS",
    "INFERENCE_CLASSES",
    "LLM_MODEL",
    "LLM_RETRIES",
    "LLM_TIMEOUT",
    "MAX_ERRORS",
    "MAX_SILENT_TURNS",
    "MAX_TURNS",
    "MODE",
    "MODES",
    "RESULTS",
    "RUN_ATTEMPTS_PER_SCENARIO",
    "SPEECH",
    "SPEECH_CHOICES",
    "STOP_GRACE",
    "TURN_TIMEOUT",
    "VOICE",
    "booting_agents",
    "default_concurrency",
    "prepared_agents",
]
