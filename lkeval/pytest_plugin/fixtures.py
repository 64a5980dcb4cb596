"""Fixtures for tests that build their own ``AgentSession``, as LiveKit's testing guide does."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def lkeval_scenario() -> Any:
    """Not yet available."""
    pytest.fail("lk-eval: lkeval_scenario is not available yet", pytrace=False)


lkeval_simulation = lkeval_caller = lkeval_judges = lkeval_scenario
