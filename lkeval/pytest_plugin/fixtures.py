"""Fixtures for tests that build their own ``AgentSession``, as LiveKit's testing guide does.

A test marked ``@pytest.mark.lkeval_scenario("SCN_id")`` gets that scenario of the run's
scenarios file. ``lkeval_simulation`` installs a fake LiveKit job carrying the scenario's
``SimulationDispatch`` (so ``get_job_context().simulation_context()`` answers inside the test, as
under ``lk agent simulate``) and the agent's own ``on_simulation_end``; ``lkeval_caller`` is
lk-eval's simulated caller for the scenario's instructions; ``lkeval_judges`` is lk-eval's judges
with the run's settings. ``await lkeval_simulation.verdict(session)`` judges the session's
conversation, runs the agent's veto exactly once, and gives the scenario's verdict beside the
test's own ``RunResult.expect`` assertions (docs/pytest.md).

This module imports only pytest at the top: it is loaded by every pytest run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from lkeval.pytest_plugin.simulation import ScenarioSimulation
    from lkeval.scenarios.model import Scenario


def _scenario(request: pytest.FixtureRequest) -> Scenario:
    from lkeval.pytest_plugin.simulation import scenario_for

    return scenario_for(request)


@pytest.fixture
def lkeval_scenario(request: pytest.FixtureRequest) -> Scenario:
    """The scenario named by the test's ``lkeval_scenario`` marker."""
    return _scenario(request)


@pytest.fixture
def lkeval_judges(request: pytest.FixtureRequest) -> Any:
    """lk-eval's caller and judges (an ``LLMEvaluator``) for the test's scenario, with the
    run's settings (``lkeval_run_args``, ``[tool.lkeval]``, the environment); None when the
    scenario needs neither."""
    from lkeval.pytest_plugin.simulation import evaluator_for

    return evaluator_for(request, _scenario(request))


@pytest.fixture
def lkeval_caller(lkeval_simulation: ScenarioSimulation) -> Any:
    """The simulated caller for the scenario's instructions: ``await
    lkeval_caller.next_line(session)`` is its next line, or None once it hangs up."""
    return lkeval_simulation.caller()


@pytest.fixture
def lkeval_simulation(
    request: pytest.FixtureRequest, lkeval_judges: Any
) -> Iterator[ScenarioSimulation]:
    """The scenario's simulation around the session the test builds (a fake job context)."""
    from lkeval.pytest_plugin.simulation import ScenarioSimulation, agent_server

    simulation = ScenarioSimulation(_scenario(request), agent_server(request), lkeval_judges)
    with simulation:
        yield simulation
