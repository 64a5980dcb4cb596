"""Scenarios played in lk-eval's own interpreter: ``lkeval dev`` and the pytest plugin.

The public API is :func:`play_scenario` (and :func:`aplay_scenario`, :class:`ScenarioPlayer`)
with :class:`PlayOptions`; docs/dev.md says what differs from ``lkeval run``.
"""

from __future__ import annotations

from lkeval.inproc.play import PlayOptions, ScenarioPlayer, aplay_scenario, play_scenario

__all__ = ["PlayOptions", "ScenarioPlayer", "aplay_scenario", "play_scenario"]
