"""What the pytest plugin plays: the scenarios file, the agent, and ``lkeval run``'s flags.

The caller's and the judge's settings come from the places ``lkeval run`` takes them, in its
order: ``[tool.lkeval]`` (or lkeval.toml) first, then the ini key ``lkeval_run_args``, then
``--lkeval-run-args``; the environment as always (keys, base URLs). They are parsed by ``run``'s
own flags, so a flag means the same thing under pytest, a bad one is the same clear error, and
no second list of settings can drift from the first. This module imports nothing of lk-eval's
pipeline until a run enables the plugin (:func:`run_options`).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from lkeval.cli.options import RunOptions

SETTINGS_KEY = pytest.StashKey["PluginSettings | None"]()


@dataclass(frozen=True)
class PluginSettings:
    """The run's scenarios file (resolved), its agent and the ``lkeval run`` flags it adds."""

    scenarios: Path
    agent: str | None
    run_args: tuple[str, ...]


def enabled_settings(config: pytest.Config) -> PluginSettings | None:
    """The plugin's settings, or None when the run named no scenarios file (it stays inert)."""
    if SETTINGS_KEY not in config.stash:
        config.stash[SETTINGS_KEY] = _read(config)
    return config.stash[SETTINGS_KEY]


def _read(config: pytest.Config) -> PluginSettings | None:
    scenarios = _path(config, "lkeval_scenarios")
    if scenarios is None:
        if config.getoption("lkeval_agent") or config.getoption("lkeval_run_args"):
            raise pytest.UsageError(
                "lk-eval: --lkeval-agent and --lkeval-run-args need a scenarios file: "
                "give --lkeval-scenarios FILE or the ini key lkeval_scenarios"
            )
        return None
    if not scenarios.is_file():
        raise pytest.UsageError(f"lk-eval: scenarios file {scenarios}: no such file")
    agent = _path(config, "lkeval_agent")
    quoted = config.getoption("lkeval_run_args") or ""
    try:
        flags = shlex.split(quoted)
    except ValueError as exc:
        raise pytest.UsageError(f"lk-eval: --lkeval-run-args: {exc}") from None
    run_args = (*config.getini("lkeval_run_args"), *flags)
    return PluginSettings(scenarios.resolve(), str(agent) if agent else None, run_args)


def _path(config: pytest.Config, name: str) -> Path | None:
    """An option's path from the working directory, or the ini key's from the ini file's."""
    given = config.getoption(name)
    if given:
        return config.invocation_params.dir / given
    value = config.getini(name)
    if not value:
        return None
    base = config.inipath.parent if config.inipath else config.rootpath
    return base / str(value)


class _RunFlags(argparse.ArgumentParser):
    """``run``'s flags, whose mistakes are usage errors instead of an exit."""

    def error(self, message: str) -> NoReturn:
        from lkeval.errors import UsageError

        raise UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        from lkeval.errors import UsageError

        raise UsageError(f"{self.prog}: {message or 'cannot be used under pytest'}")


def run_options(settings: PluginSettings) -> RunOptions:
    """The run's options as ``lkeval run`` would build them from the same flags and file.

    Raises ``UsageError`` (a bad flag, a settings file's unknown key, no agent) with the
    message ``lkeval run`` would print.
    """
    from lkeval.cli.flags import add_llm_arguments, add_report_arguments, add_run_arguments
    from lkeval.cli.options import run_options as options_from
    from lkeval.cli.settings_file import load_settings
    from lkeval.errors import UsageError
    from lkeval.text.masking import register_argv

    parser = _RunFlags(prog="lkeval run (pytest's lkeval_run_args)", allow_abbrev=False)
    add_run_arguments(parser)
    add_llm_arguments(parser)
    add_report_arguments(parser)
    argv = list(settings.run_args)
    if "--no-settings" not in argv:
        found = load_settings(parser, Path.cwd())
        argv = [*(found.flags if found else ()), *argv]
    argv += ["--scenarios", str(settings.scenarios)]
    if settings.agent:
        argv += ["--agent", settings.agent]
    elif "--agent" not in argv:
        raise UsageError(
            "no agent: give --lkeval-agent FILE, the ini key lkeval_agent, or `agent` in "
            "[tool.lkeval]"
        )
    register_argv(argv)  # a key given as a flag is masked in every failure shown
    return options_from(parser.parse_args(argv))
