"""One more judge vote on a finished attempt: what the sequential test asks for where a vote
would settle its scenario (``lkeval.results.sampling``), in either direction.

The attempt's judge verdict keeps every vote; its value is the majority, a tie failing (as
``--rejudge`` does), and the attempt's status follows. Only attempts whose outcome hangs on the
judge alone are asked again (``sampling.judge_votes``): a scripted failure, a veto or an error
stays what it was. A judge that cannot be reached now leaves the attempt as it was.
"""

from __future__ import annotations

import dataclasses

from lkeval.replay.session import AttemptTapes, Cassettes, active
from lkeval.results.model import Attempt, Usage, Verdict, VerdictValue
from lkeval.results.sampling import JUDGE_SOURCE, judge_votes
from lkeval.run.collaborators import Rejudge
from lkeval.run.engine import AskAgain
from lkeval.scenarios.model import Scenario


def ask_again_with(judge: Rejudge, cassettes: Cassettes | None = None) -> AskAgain:
    """The engine's ``ask_again``: ``await ask(scenario, attempt)`` → the attempt, one vote more.

    With cassettes the vote is the attempt's judge's next call: replayed from its cassette when
    recorded there, else live and added to it."""

    async def ask(scenario: Scenario, attempt: Attempt) -> Attempt:
        tapes = cassettes.reopen(attempt.replay.cassette) if cassettes and attempt.replay else None
        voted = await _vote(scenario, attempt, tapes)
        return tapes.finish(voted) if tapes is not None and voted is not attempt else voted

    async def _vote(scenario: Scenario, attempt: Attempt, tapes: AttemptTapes | None) -> Attempt:
        if judge_votes(attempt) is None:
            return attempt
        usage: dict[str, Usage] = dict(attempt.usage)
        try:
            with active(tapes):
                vote = await judge.judge_again(scenario, attempt.transcript, usage)
        except Exception:  # the judge is down now: the votes so far stand
            return attempt
        if vote is None:
            return attempt
        verdicts = tuple(
            with_vote(v, vote) if v.source == JUDGE_SOURCE else v for v in attempt.verdicts
        )
        ok, reason = judge.passes(verdicts)
        return dataclasses.replace(
            attempt,
            status="passed" if ok else "failed",
            reason="" if ok else reason,
            verdicts=verdicts,
            usage=usage,
        )

    return ask


def with_vote(verdict: Verdict, vote: Verdict) -> Verdict:
    """``verdict`` with ``vote`` added: every vote kept, the majority stands (a tie fails)."""
    votes = (*(verdict.votes or (verdict.verdict,)), vote.verdict)
    passed = sum(1 for v in votes if v == "pass")
    final: VerdictValue = "pass" if passed > len(votes) - passed else "fail"
    why = vote.reason if vote.verdict == final else verdict.reason
    why = why.split(" (asked ", 1)[0]
    tally = f"asked {len(votes)} times: {votes.count(final)} of {len(votes)} votes {final}"
    return Verdict(verdict.source, final, f"{why} ({tally})", votes)
