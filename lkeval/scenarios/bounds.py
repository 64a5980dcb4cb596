"""Upper bounds on a run's scale, the same for a scenario file's keys and for the flags.

A scenario file can come from a pull request, and a flag from a workflow input: ``repeat:
1000000`` once passed ``validate`` and grew ``run`` to 3.4 GB, deaf to Ctrl-C for minutes
while it planned; ``repeat: 99999999999999999999999`` crashed it (OverflowError). Each bound
sits far above what a real suite uses (a pass@k sample is 3-20 runs; an agent boots in
seconds; a simulated caller takes a handful of turns) and far below what breaks the runner.
``validate`` and ``run`` read the file through the same loader, so both refuse alike.

The file's YAML is bounded too, before any reader expands it. A 462-byte alias bomb under
``userdata`` once grew lk-eval to 3.4 GB. ``yaml.compose`` keeps an alias as a second reference
to its anchor's node, so the composed tree stays small; every later reader (``to_plain``, the
agent's JSON) would expand it, so the expanded size is counted over unique nodes only, and a
bomb costs nothing to refuse.

The limits live here, in one place, and are enforced where each value is read: the scenario
loader (the keys), ``cli/options.py`` (the flags), ``llm/config.py`` (the LLM's),
:func:`lkeval.scenarios.yaml_nodes.check_bounds` (the YAML) and
:func:`lkeval.scenarios.model.runs_problem` (the runs of a plan).
"""

from __future__ import annotations

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


# Parsing is bounded, because a scenario file can come from a pull request: a 462-byte alias
# bomb once grew lk-eval to 3.4 GB. Real files (100 scenarios, long block scalars, userdata
# with SQL) are a few hundred KB, use a handful of anchors and nest about ten levels deep.
MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_ALIASES = 1_000  # references to anchors in one file
MAX_ALIAS_VALUES = 100_000  # values that aliases add once expanded
MAX_DEPTH = 100  # nesting of lists and mappings
