"""Ask the judge about a scenario's passing transcript and its negative controls.

``lkeval calibrate`` measures, per scenario, how often the judge fails a transcript it passed
once (false fails) and passes known-bad variants of it (false passes,
:mod:`lkeval.results.controls`). The counts become the scenario's :class:`Calibration`, which
a later run's history carries to its stopping rule (:mod:`lkeval.results.calibration`). Every
control is asked ``votes`` times and the passing transcript as many times as all the controls
together, so both rates rest on the same number of votes. A vote that could not be had (the
judge down, an unusable answer) is not counted; a scenario with no vote on either side gets no
calibration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from lkeval.results.controls import negative_controls
from lkeval.results.model import Calibration, TranscriptItem, Usage, Verdict
from lkeval.scenarios.model import Scenario


class Judge(Protocol):
    """The conversation judge, asked once (:class:`lkeval.llm.evaluator.LLMEvaluator`)."""

    async def judge_again(
        self, scenario: Scenario, transcript: Sequence[TranscriptItem], usage: dict[str, Usage]
    ) -> Verdict | None:
        """One vote on ``transcript`` (None without a conversation judge)."""
        ...


async def calibrate_scenario(
    judge: Judge,
    scenario: Scenario,
    transcript: Sequence[TranscriptItem],
    votes: int,
    slots: asyncio.Semaphore,
    judge_model: str = "",
    measured_at: str = "",
) -> Calibration | None:
    """The judge's counts on ``transcript`` (which it passed) and its controls; None when no
    control can be built or no vote could be had on either side."""
    controls = negative_controls(transcript)
    if not controls:
        return None
    usage: dict[str, Usage] = {}

    async def ask(items: Sequence[TranscriptItem]) -> str | None:
        async with slots:
            try:
                verdict = await judge.judge_again(scenario, items, usage)
            except Exception:  # the judge is down or answered nonsense: no vote
                return None
        return verdict.verdict if verdict is not None else None

    bad = [ask(control) for _, control in controls for _ in range(votes)]
    good = [ask(transcript) for _ in range(votes * len(controls))]
    answers = await asyncio.gather(*bad, *good)
    on_bad = [a for a in answers[: len(bad)] if a is not None]
    on_good = [a for a in answers[len(bad) :] if a is not None]
    if not on_bad or not on_good:
        return None
    return Calibration(
        false_passes=sum(1 for a in on_bad if a == "pass"),
        control_votes=len(on_bad),
        false_fails=sum(1 for a in on_good if a != "pass"),  # a maybe is not a pass
        good_votes=len(on_good),
        controls=tuple(kind for kind, _ in controls),
        judge_model=judge_model,
        measured_at=measured_at,
    )


__all__ = ["Judge", "calibrate_scenario"]
