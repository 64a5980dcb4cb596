"""How a run starts its agents: the agent's launch from the settings, the fork server's key,
and the launcher started without waiting (the one ``python -m lkeval`` started before its
imports when it is this run's, else a new one) with the run's private raw-log directory."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from lkeval.agents.launch import StartingLauncher
from lkeval.agents.process import AgentLaunch, agent_env
from lkeval.run.early_start import RAW_LOGS_PREFIX, EarlyStart, LaunchKey
from lkeval.run.plan import SuiteSettings
from lkeval.run.suite_parts import LauncherOpener


def agent_launch(settings: SuiteSettings) -> AgentLaunch:
    """How each agent of the run is started (before a launcher is known)."""
    return AgentLaunch(
        agent=Path(settings.agent).resolve(),
        python=settings.python,
        env=dict(settings.env),
        memory_limit_mib=settings.agent_memory,
        log_limit_mib=settings.agent_log_limit,
        inference_class=settings.inference_class,
    )


def run_launch_key(settings: SuiteSettings) -> LaunchKey:
    """What this run's fork server is started with (interpreter, environment, agent)."""
    launch = agent_launch(settings)
    return LaunchKey.of(launch.python, agent_env(launch), launch.agent, launch.cwd)


def begin_run_launcher(
    settings: SuiteSettings, early: EarlyStart, launcher: LauncherOpener
) -> tuple[Path, StartingLauncher]:
    """The run's raw-log directory and its launcher, started without waiting: the fork
    server ``python -m lkeval`` started before its imports when it is the one this run
    would start (same interpreter, environment and agent), else a new one."""
    key = run_launch_key(settings)
    env = dict(key.env)
    if settings.cold_start:
        early.discard()  # none was started; never one to keep
        claimed = None
    else:
        claimed = early.claim(key)
    if claimed is not None:
        return claimed.raw_logs, launcher(
            key.python, env, agent=key.agent, cwd=key.cwd, started=claimed.process
        )
    raw_logs = Path(tempfile.mkdtemp(prefix=RAW_LOGS_PREFIX))
    try:
        return raw_logs, launcher(
            key.python,
            env,
            agent=key.agent,
            cwd=key.cwd,
            cold_start=settings.cold_start,
            log_path=raw_logs / "fork-server.log",
            log_is_raw=True,
        )
    except BaseException:
        shutil.rmtree(raw_logs, ignore_errors=True)
        raise


__all__ = ["agent_launch", "begin_run_launcher", "run_launch_key"]
