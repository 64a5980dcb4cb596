"""lk-eval's pytest plugin: each scenario of a ``scenarios.yaml`` is a test item, played
in-process (docs/pytest.md).

Installed with lk-eval (the ``pytest11`` entry point ``lkeval``), so it is loaded by every
pytest run of every project whose environment has lk-eval. It is therefore inert until a run
names a scenarios file (``--lkeval-scenarios`` or the ini key ``lkeval_scenarios``): until then
it only adds its options, its markers' help and its fixtures (which fail with a clear message
when asked for), and imports nothing of livekit or of lk-eval's pipeline, so another project's
collection and run are unchanged. ``-p no:lkeval`` switches it off altogether.

The scenarios file is collected like any test file: named on the command line, or reached by
pytest's walk of its folders. ``--lkeval-scenarios FILE`` on the command line adds it to the
run's paths too, whatever else they name: a CI line ``pytest tests --lkeval-scenarios
scenarios.yaml`` must not go green having played none of them. The ini key adds it only to a
run that names no paths (pytest's own ``testpaths`` or the working directory), so ``pytest
tests/unit`` stays a unit run in a project whose ini enables the scenarios.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lkeval.pytest_plugin.fixtures import (
    lkeval_caller,
    lkeval_judges,
    lkeval_scenario,
    lkeval_simulation,
)
from lkeval.pytest_plugin.settings import enabled_settings

if TYPE_CHECKING:
    from lkeval.pytest_plugin.collect import ScenarioFile

HELP = "lk-eval: scenarios as tests, played in-process (docs/pytest.md)"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The options and ini keys; they change nothing until a scenarios file is named."""
    group = parser.getgroup("lkeval", HELP)
    group.addoption(
        "--lkeval-scenarios",
        metavar="FILE",
        help="play each scenario of this scenarios.yaml as a test item (ini: lkeval_scenarios)",
    )
    group.addoption(
        "--lkeval-agent",
        metavar="FILE",
        help="the agent's entry file (ini: lkeval_agent; default: `agent` of [tool.lkeval])",
    )
    group.addoption(
        "--lkeval-run-args",
        metavar="FLAGS",
        help="`lkeval run` flags for the caller and judge, quoted as one value: "
        "--lkeval-run-args='--judge-model judge' (ini: lkeval_run_args)",
    )
    parser.addini("lkeval_scenarios", "scenarios.yaml whose scenarios are test items", "string")
    parser.addini("lkeval_agent", "the agent's entry file for lk-eval's scenarios", "string")
    parser.addini("lkeval_run_args", "`lkeval run` flags for the caller and judge", "args")


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; add the scenarios file to a run that named no paths."""
    config.addinivalue_line(
        "markers", "lkeval: a scenario of lk-eval's scenarios file (tags as keyword arguments)"
    )
    config.addinivalue_line(
        "markers",
        "lkeval_scenario(id): the scenario of lk-eval's scenarios file that the fixtures "
        "lkeval_simulation, lkeval_caller and lkeval_judges give this test",
    )
    settings = enabled_settings(config)
    if settings is None:
        return
    asked = config.getoption("lkeval_scenarios") is not None  # on this command line
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    if (asked or not named) and not _covered(settings.scenarios, config.args):
        config.args.append(str(settings.scenarios))


def _covered(scenarios: Path, args: list[str]) -> bool:
    """Whether one of the run's paths is the scenarios file or a folder holding it."""
    for arg in args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == scenarios or path in scenarios.parents:
            return True
    return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    """The scenarios file, when the run enabled the plugin; nothing else."""
    settings = enabled_settings(parent.config)
    if settings is None or file_path.resolve() != settings.scenarios:
        return None
    from lkeval.pytest_plugin.collect import ScenarioFile

    return ScenarioFile.from_parent(parent, path=file_path)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mask secrets in the log lines pytest shows (once its logging plugin is configured)."""
    if enabled_settings(session.config) is None:
        return
    from lkeval.pytest_plugin.logs import mask_pytest_logs

    mask_pytest_logs(session.config)


@pytest.hookimpl(hookwrapper=True)  # the old-style wrapper: any pytest a project has
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Mask secrets in a test's captured output, as shown under its failure."""
    outcome = yield
    report = outcome.get_result()
    if enabled_settings(item.config) is not None and report.sections:
        from lkeval.text.masking import mask

        report.sections = [(title, mask(content)) for title, content in report.sections]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Tell the session's player which scenarios were selected."""
    if enabled_settings(session.config) is None:
        return
    from lkeval.pytest_plugin.collect import ScenarioItem
    from lkeval.pytest_plugin.player import PLAYER_KEY

    if PLAYER_KEY in session.config.stash:
        session.config.stash[PLAYER_KEY].selected = [
            item.scenario for item in session.items if isinstance(item, ScenarioItem)
        ]


__all__ = [
    "lkeval_caller",
    "lkeval_judges",
    "lkeval_scenario",
    "lkeval_simulation",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_sessionstart",
]
