"""The scenarios file as a pytest collector, and each scenario as a test item.

An item is named by the scenario's id (``scenarios.yaml::SCN_checkDouble01``), so ``-k``, node
ids, ``--lf`` and JUnit name the scenario as every report of lk-eval does. Selection by tag:
every item has the ``lkeval`` marker with its tags as keyword arguments (``-m
"lkeval(feature='availability')"``), a marker ``lkeval_<key>`` per tag (``-m lkeval_flaky``),
and its tag values and label words as ``-k`` keywords (``-k availability``). The markers are
lk-eval's own names: a tag called ``skip`` or ``flaky`` must never become pytest's ``skip`` or
a rerun plugin's ``flaky`` marker, which would turn a scenario's failure into a skip or a retry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lkeval.errors import LkevalError
from lkeval.pytest_plugin.failure import ScenarioFailed, failure_text
from lkeval.pytest_plugin.player import session_player
from lkeval.pytest_plugin.settings import enabled_settings, run_options
from lkeval.results.model import ScenarioResult
from lkeval.scenarios.model import NOTHING_TO_CHECK, Scenario
from lkeval.text.masking import mask


class ScenarioFile(pytest.File):
    """A scenarios.yaml: one item per scenario, in the file's order."""

    def collect(self) -> Iterator[pytest.Item]:
        """Load the file as ``lkeval validate`` does; its errors are a collection error."""
        from lkeval.scenarios.loader import load_or_raise

        settings = enabled_settings(self.config)
        assert settings is not None  # only collected when the plugin is on
        try:
            options = run_options(settings)
            groups, _ = load_or_raise([self.path])
        except LkevalError as exc:
            raise self.CollectError(mask(f"lk-eval: {exc}")) from None
        session_player(self.config, options)  # checked once, before any scenario plays
        for group in groups:
            for scenario in group.scenarios:
                yield ScenarioItem.from_parent(self, name=scenario.id, scenario=scenario)


class ScenarioItem(pytest.Item):
    """One scenario, played in-process when the item runs."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker(pytest.mark.lkeval(**scenario.tags))
        for key, value in scenario.tags.items():
            marker = _tag_marker(key)
            if marker is not None:
                _register(self.config, marker, key)
                self.add_marker(getattr(pytest.mark, marker)(value))
        self.extra_keyword_matches.update(
            [*scenario.tags.values(), *scenario.tags, *scenario.label.split()]
        )

    def runtest(self) -> None:
        """Play the scenario; anything but a pass is this test's failure.

        A scenario lk-eval did not play (``skipped``) fails too, as it fails ``lkeval run``'s
        gate: a green run must not hide a scenario that checked nothing. The one skip is a
        scenario with nothing to check under ``--allow-nothing-to-check``.
        """
        player = session_player(self.config)
        result = player.play(self.scenario)
        self.user_properties.append(("lkeval_status", result.status))
        if result.status == "passed":
            return
        if result.status == "skipped" and _allowed_skip(result, player.allow_nothing_to_check):
            pytest.skip(mask(result.reason))
        raise ScenarioFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The scenario's own failure, or lk-eval's one-line error, without lk-eval's frames."""
        if isinstance(excinfo.value, ScenarioFailed):
            return failure_text(excinfo.value.result)
        if isinstance(excinfo.value, LkevalError):
            return mask(f"lk-eval: {excinfo.value}")
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where the scenario is written, for pytest's header of its failure."""
        return self.path, self.scenario.line - 1, f"scenario {self.scenario.id}"


def _allowed_skip(result: ScenarioResult, allow_nothing_to_check: bool) -> bool:
    return allow_nothing_to_check and result.reason.startswith(NOTHING_TO_CHECK)


def _register(config: pytest.Config, marker: str, key: str) -> None:
    """Register a tag's marker once (``--strict-markers`` accepts it, ``--markers`` lists it)."""
    if not any(line.split(":", 1)[0] == marker for line in config.getini("markers")):
        config.addinivalue_line("markers", f"{marker}: lk-eval's scenario tag {key}")


def _tag_marker(key: str) -> str | None:
    """``lkeval_<key>`` when that is a name ``-m`` can select by, else None."""
    name = f"lkeval_{key}"
    return name if name.isidentifier() else None
