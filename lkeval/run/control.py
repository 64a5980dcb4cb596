"""The judge measured on every run: a passing decision checked against a known-bad control.

A judge that passes everything turns a broken agent green (a 1.5B judge passed a conversation
in which the agent wrote its tool call as text and never captured the email). So every
scenario the conversation judge passed is checked once more: the judge is asked about its own
passing transcript with every agent reply a refusal and every tool call removed
(:func:`lkeval.results.controls.paired_control`), up to :data:`PAIRED_ASKS` times, stopping at
its first fail. One that passes it every time has said nothing about that scenario, which is an
``error``. Costs 1 call per passing decision for a judge that tells them apart (1.11 on average
for one flipping 10% of its verdicts), :data:`PAIRED_ASKS` for one that does not.

With cassettes the calls are the attempt's judge's next ones, as :mod:`lkeval.run.revote`'s.
"""

from __future__ import annotations

import dataclasses

from lkeval.replay.session import Cassettes, active
from lkeval.results.controls import PAIRED_ASKS, PairedVotes, paired_control
from lkeval.results.model import Attempt, Usage
from lkeval.run.collaborators import Rejudge
from lkeval.run.engine import CheckControl
from lkeval.scenarios.model import Scenario


def check_control_with(judge: Rejudge, cassettes: Cassettes | None = None) -> CheckControl:
    """The engine's ``check_control``: ``await check(scenario, attempt)`` → (the attempt with
    the calls' usage added, the judge's answers: none when it could not be asked), or None when
    the transcript has nothing a control could take away."""

    async def check(scenario: Scenario, attempt: Attempt) -> tuple[Attempt, PairedVotes] | None:
        control = paired_control(attempt.transcript)
        if control is None:
            return None
        tapes = cassettes.reopen(attempt.replay.cassette) if cassettes and attempt.replay else None
        usage: dict[str, Usage] = dict(attempt.usage)
        passes: list[bool] = []
        with active(tapes):
            while len(passes) < PAIRED_ASKS and all(passes):
                try:
                    vote = await judge.judge_again(scenario, control, usage)
                except Exception:  # the judge is down now: what it said so far stands
                    break
                if vote is None:
                    break
                passes.append(judge.passes((vote,))[0])
        asked = dataclasses.replace(attempt, usage=usage)
        if tapes is not None:
            asked = tapes.finish(asked)  # a replay miss makes the attempt an error
        return asked, PairedVotes(tuple(passes))

    return check


__all__ = ["check_control_with"]
