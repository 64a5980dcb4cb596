"""What a run is told and what it will do: its frozen settings and its plan.

:class:`SuiteSettings` is everything the command line said, built once (``cli/run.py``
``suite_settings``) and never changed. :func:`build_plan` loads the scenario files and decides
what runs (``--tag``/``--match`` by :class:`~lkeval.scenarios.model.Selection`, then
``--shard``), refusing a selection that cannot be meant, an interpreter that cannot host the
agent, and figures (repeat, min-pass, attempts) the selected scenarios cannot meet, before
anything boots; :func:`cassette_rules` and :func:`open_cassettes` do the same for
``--cassettes``. Apart from :mod:`lkeval.run.suite`, which carries the plan out (agents, engine,
signals, results), so a plan is built and read without starting anything.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lkeval import defaults
from lkeval.agents.cold import python_problem
from lkeval.errors import UsageError
from lkeval.host.tape import Rules
from lkeval.replay.manifest import Trusted
from lkeval.replay.session import Cassettes, ReplayConfigError, load_rules
from lkeval.results.pricing import PriceTable
from lkeval.run.collaborators import RunEvaluator
from lkeval.run.engine import EngineOptions, attempts_problem
from lkeval.scenarios.loader import load_or_raise
from lkeval.scenarios.model import (
    Scenario,
    check_selection,
    min_pass_problem,
    runs_problem,
    select_shard,
)
from lkeval.text.untrusted import inert_line


@dataclass(frozen=True)
class SuiteSettings:
    """Everything a run was told, built once from the command line's options and frozen."""

    agent: str
    """``--agent`` as given (the results record it so)."""
    scenario_files: tuple[str, ...]
    """As given, relative to the working directory when inside it (annotations want that)."""
    results_path: Path
    logs_dir: Path
    report_paths: tuple[str, ...] = ()
    """Every report file asked for: checked writable before anything boots."""
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = ()
    cold_start: bool = False
    concurrency_given: bool = False
    """``--concurrency`` was given; else the warm default is lowered to the cold one when
    warm starts turn out to be unavailable (cold agents boot CPU-bound, ~2.5 CPU-s each)."""
    inference_class: str = defaults.INFERENCE_CLASS
    """``--inference-class``: the LiveKit Inference class of the agent's own calls."""
    mode: str = defaults.MODE
    """``--mode``: text or audio, for scenarios without their own ``mode:``."""
    speech: str = defaults.SPEECH
    """``--speech``: the agent's own speech models, or lk-eval's local speech server."""
    voice: str = defaults.VOICE
    """``--voice``: the caller's text-to-speech in audio mode."""
    impair: str = ""
    """``--impair``: what the caller's line goes through in audio mode."""
    listen: str = ""
    """``--listen``: a speech-to-text for the agent's audio (what a caller heard)."""
    agent_memory: int = defaults.AGENT_MEMORY_MIB
    """MiB of resident memory one agent may use (0: no bound)."""
    agent_log_limit: int = defaults.AGENT_LOG_MIB
    """MiB of log one agent may write."""
    shard: tuple[int, int] | None = None
    engine: EngineOptions = field(default_factory=EngineOptions)
    boot_timeout: float = defaults.BOOT_TIMEOUT
    turn_timeout: float = defaults.TURN_TIMEOUT
    max_turns: int = defaults.MAX_TURNS
    prices: tuple[tuple[str, tuple[float, float]], ...] = ()
    argv: tuple[str, ...] = ()
    """The command line, recorded with its secrets redacted."""
    verdict_options: tuple[tuple[str, object], ...] = ()
    """The options that change verdicts, by flag; the results' suite fingerprint records them
    as text (:meth:`lkeval.results.model.SuiteFingerprint.of`)."""
    cassettes: Path | None = None
    """``--cassettes DIR``: one cassette per scenario attempt (None: record/replay is off)."""
    cassette_mode: str = defaults.CASSETTE_MODE
    """``--cassette-mode``: auto, replay or record."""
    cassette_rules: Path | None = None
    """``--cassette-rules FILE``: the user's scrub rules for matching requests."""
    cassettes_restored: tuple[Path, Trusted] | None = None
    """``--cassettes-from``: the fresh directory the artifact was unpacked into, and what of it
    may be replayed (its manifest); None: cassettes are read from ``cassettes``."""
    no_credentials: bool = False
    """A fork's pull request without LLM credentials, replaying its cassettes: what did not
    replay in full is "not run: needs a live LLM" (lkeval.results.wording.without_credentials)."""


@dataclass(frozen=True)
class Plan:
    """What a run will do, all of it checked before anything boots."""

    scenarios: list[Scenario]
    selected: list[Scenario]
    engine_options: EngineOptions
    suite: tuple[Scenario, ...] = ()
    """Every scenario loaded, before ``--shard`` cut it: the results' suite fingerprint."""


def build_plan(
    agent: str,
    scenario_files: Sequence[str],
    options: EngineOptions,
    shard: tuple[int, int] | None = None,
) -> Plan:
    """Load, select and check the scenarios; raises on bad input (exit 2) or on a selection
    that leaves nothing to run (exit 3).

    Given only what it decides from (not the whole settings): the agent, the files, the
    engine's options and the shard. Reads files only (bounded, lkeval.scenarios), so the run
    builds it with signals deferred: a signal this early still finds the scenarios known and
    reports each "not run". The agent's interpreter is checked after (:func:`check_python`).
    """
    if not Path(agent).is_file():
        raise UsageError(f"--agent {agent}: no such file")
    groups, warnings = load_or_raise(list(scenario_files))
    for warning in warnings:
        print(inert_line(str(warning)), file=sys.stderr)  # may quote the scenario file
    scenarios = suite = [s for g in groups for s in g.scenarios]
    selection = options.selection
    check_selection(scenarios, selection)  # the whole suite: exit 2 or 3 before anything boots
    if shard is not None:
        scenarios = select_shard(scenarios, *shard)
    selected = selection.pick(scenarios)
    if not selected:  # an empty shard boots nothing: it has nothing to check
        return Plan(scenarios, selected, options, tuple(suite))
    problem = (
        min_pass_problem(selected, options.repeat, options.min_pass)
        or runs_problem(selected, options.repeat, options.min_pass)
        or attempts_problem(selected, options)
    )
    if problem is not None:
        raise UsageError(problem)
    return Plan(scenarios, selected, options, tuple(suite))


def check_python(plan: Plan, python: str) -> None:
    """Exit 2 when ``python`` cannot run agents: one line, not one per agent. Runs the
    interpreter (up to seconds), so it comes after the plan is known: a signal meanwhile
    ends the run with every scenario "not run"."""
    if not plan.selected:  # an empty shard boots nothing
        return
    problem = python_problem(python)
    if problem is not None:
        raise UsageError(f"--python: {problem}")


def cassette_rules(cassettes: Path | None, rules: Path | None) -> Rules | None:
    """The run's scrub rules when it has cassettes (``--cassettes``, ``--cassette-rules``);
    exit 2 when the rules file is bad."""
    if cassettes is None:
        return None
    try:
        return load_rules(rules)
    except ReplayConfigError as exc:
        raise UsageError(str(exc)) from None


def open_cassettes(
    settings: SuiteSettings, rules: Rules, evaluator: RunEvaluator | None, scratch: Path
) -> Cassettes | None:
    """The run's cassettes, knowing what they must have been recorded with (docs/replay.md);
    the agents' tape files go to ``scratch`` (the run's private directory)."""
    if settings.cassettes is None:
        return None
    llms = {llm.role: llm.model for llm in evaluator.llms_in_use()} if evaluator else {}
    identity = {
        "caller_model": llms.get("caller", ""),
        "judge_model": llms.get("judge", ""),
        "judge_prompt": evaluator.prompts_digest() if evaluator else "",
    }
    return Cassettes(
        settings.cassettes,
        settings.cassette_mode,
        rules,
        identity,
        scratch,
        prices=PriceTable(dict(settings.prices)),
        restored=settings.cassettes_restored,
    )


__all__ = ["Plan", "SuiteSettings", "build_plan", "cassette_rules", "open_cassettes"]
