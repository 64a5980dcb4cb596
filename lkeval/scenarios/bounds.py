"""Upper bounds on a run's scale, the same for a scenario file's keys and for the flags.

A scenario file can come from a pull request, and a flag from a workflow input: ``repeat:
1000000`` once passed ``validate`` and grew ``run`` to 3.4 GB, deaf to Ctrl-C for minutes
while it planned; ``repeat: 99999999999999999999999`` crashed it (OverflowError). Each bound
sits far above what a real suite uses (a pass@k sample is 3-20 runs; an agent boots in
seconds; a simulated caller takes a handful of turns) and far below what breaks the runner.
``validate`` and ``run`` read the file through the same loader, so both refuse alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from lkeval.scenarios.model import Scenario

MAX_REPEAT = 1_000
"""Runs of one scenario (``repeat``, ``--repeat``); ``min_pass`` is at most ``repeat``."""
MAX_TURNS = 1_000
"""Caller turns in one simulated conversation (``max_turns``, ``--max-turns``)."""
MAX_TIMEOUT_SECONDS = 3_600.0
"""Any one timeout (``boot_timeout``, ``turn_timeout``, their flags, ``--llm-timeout``)."""
MAX_LLM_RETRIES = 20
"""Retries of one caller/judge request (``--llm-retries``, ``LKEVAL_LLM_RETRIES``), with backoff."""
MAX_REJUDGE = 20
"""Extra judge asks of a failed verdict (``--rejudge``)."""
MAX_CONCURRENCY = 256
"""Conversations at once (``--concurrency``): each holds an agent process or two."""
MAX_AGENT_LOG_MIB = 10_240
"""Log one agent may write (``--agent-log-limit``): it is disk, twice (raw and published)."""
MAX_RUNS = 100_000
"""Runs (scenarios x repeats) in one ``lkeval run``, after selection and sharding."""


def runs_problem(
    scenarios: Sequence[Scenario], repeat: int | None, min_pass: int | None
) -> str | None:
    """Why the selected scenarios, repeated, are too many runs for one ``lkeval run``."""
    total = sum(s.runs(repeat, min_pass)[0] for s in scenarios)
    if total <= MAX_RUNS:
        return None
    return (
        f"{total} runs ({len(scenarios)} scenarios with their repeats); at most {MAX_RUNS} "
        "fit one run: select fewer (--match, --tag), shard them (--shard), or repeat less"
    )
