"""The judge preflight: canary verdicts before any agent boots.

A judge that cannot produce a verdict (wrong URL, a model that never calls the tool, a server
that ignores ``tool_choice``) would otherwise turn every scenario into an error one agent boot
at a time; a judge that passes a known-bad conversation would turn a broken agent into a green
gate. Both are cheap to detect up front with two tiny transcripts whose verdicts are not in
doubt. The first ask also learns how this endpoint gives a verdict
(:func:`lkeval.llm.judge.learn_verdict_form`): the run then asks in that form. Both cases stop
the run (exit 2, naming the endpoint) before any agent boots; the second can
be overridden with ``--allow-weak-judge``, and the run then says in every report that its
judge failed the canaries. A wrong verdict on the known-good canary is a warning (expect false
failures), never a stop: it cannot make a broken agent pass.

How many times each canary is asked
-----------------------------------
The known-bad side is six distinct canaries (:data:`lkeval.llm.canaries.KNOWN_FAILS`), asked in
rounds of one ask each and read by a sequential test (:mod:`lkeval.llm.canaries`): a judge that
passes known-bad conversations 30% of the time and is right otherwise is stopped in 95.08% of
preflights, one flipping 10% of its verdicts in 0.91%, at 12 asks for a judge that fails them
all. The known-good canary is asked up to :data:`CANARY_ASKS` = 5 times and decided by the
first side to reach :data:`CANARY_MAJORITY` = 3 answers (3 asks when the judge is consistent):
a wrong verdict there is a warning only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from livekit.agents.llm import LLM

from lkeval.llm.canaries import KNOWN_FAILS, MAX_ASKS
from lkeval.llm.canaries import verdict as canary_verdict
from lkeval.llm.client import LLMError, build_llm
from lkeval.llm.config import LLMConfigError, LLMSpec
from lkeval.llm.judge import JudgeError, judge_conversation, learn_verdict_form
from lkeval.results.controls import KnownBad
from lkeval.results.model import JudgeCheck, TranscriptItem, VerdictValue

__all__ = [
    "CANARY_ASKS",
    "CANARY_MAJORITY",
    "JudgePreflightError",
    "WeakJudgeError",
    "check_judge",
    "preflight_judge",
    "preflight_line",
]

T = TypeVar("T")

CANARY_ASKS = 5
CANARY_MAJORITY = 3
CANARY_INSTRUCTIONS = "You want to know what time the shop opens tomorrow."
CANARY_EXPECTATIONS = "The agent tells the caller that the shop opens at 9 am."
_OPENING = (
    TranscriptItem("message", 0, role="assistant", text="Corner Shop, how can I help?"),
    TranscriptItem("message", 1, role="user", text="Hi, what time do you open tomorrow?"),
)
KNOWN_PASS = (
    *_OPENING,
    TranscriptItem("message", 1, role="assistant", text="We open at 9 am tomorrow."),
    TranscriptItem("message", 2, role="user", text="Great, thanks. Bye!"),
)
KNOWN_FAIL = (
    *_OPENING,
    TranscriptItem(
        "message", 1, role="assistant", text="I can't help with that. Please call another shop."
    ),
    TranscriptItem("message", 2, role="user", text="Oh. Okay, bye."),
)


class JudgePreflightError(LLMConfigError):
    """The judge could not produce a verdict on a canary: the run cannot be judged (exit 2)."""


class WeakJudgeError(JudgePreflightError):
    """The judge counted the known-bad canary as a pass: the gate could pass broken agents."""


def counts_as_pass(verdict: str, maybe_is_pass: bool) -> bool:
    """The gate's own rule (:func:`lkeval.llm.judge.combine_verdicts`) for one verdict."""
    return verdict == "pass" or (verdict == "maybe" and maybe_is_pass)


@dataclass(frozen=True)
class _Canary:
    """One canary's answers: every verdict given, and whether they counted as passes."""

    votes: tuple[VerdictValue, ...]
    passed: bool

    @property
    def verdict(self) -> str:
        """The most given verdict, for the results' ``known_fail``/``known_pass``."""
        return max(self.votes, key=self.votes.count)


async def _ask_known_fails(
    asks: Sequence[Callable[[], Awaitable[VerdictValue]]], maybe_is_pass: bool
) -> _Canary:
    """Ask every known-bad canary once a round until the sequential test decides
    (:func:`lkeval.llm.canaries.verdict`); ``passed``: the judge is weak."""
    votes: list[VerdictValue] = []
    while True:
        size = min(len(asks), MAX_ASKS - len(votes))
        votes += await _all([ask() for ask in asks[:size]])
        passes = sum(counts_as_pass(v, maybe_is_pass) for v in votes)
        decided = canary_verdict(passes, len(votes))
        if decided:
            return _Canary(tuple(votes), decided == "weak")


async def _ask_canary(ask: Callable[[], Awaitable[VerdictValue]], maybe_is_pass: bool) -> _Canary:
    """Ask until one side (counted as pass, or not) has :data:`CANARY_MAJORITY` answers.

    The first :data:`CANARY_MAJORITY` asks go out at once (a consistent judge is decided by
    them); then one at a time, since each further answer may decide it.
    """
    votes: list[VerdictValue] = await _all([ask() for _ in range(CANARY_MAJORITY)])
    while True:
        passes = sum(counts_as_pass(v, maybe_is_pass) for v in votes)
        if passes >= CANARY_MAJORITY or len(votes) - passes >= CANARY_MAJORITY:
            return _Canary(tuple(votes), passes >= CANARY_MAJORITY)
        votes.append(await ask())


async def check_judge(
    llm: LLM,
    spec: LLMSpec,
    maybe_is_pass: bool = False,
    allow_weak: bool = False,
    suite_controls: Sequence[KnownBad] = (),
) -> JudgeCheck:
    """Judge both canaries; raise :class:`JudgePreflightError` if either has no verdict and
    :class:`WeakJudgeError` if the known-bad one counts as a pass (unless ``allow_weak``).

    ``suite_controls`` (known-bad versions of the suite's own conversations, where a
    calibration is in force) take half the places of each round of known-bad canaries (cycled
    when there are fewer), the built-in ones the rest: a judge cannot pass the preflight by
    knowing its canaries.
    """

    def asker(
        transcript: Sequence[TranscriptItem],
        expectations: str = CANARY_EXPECTATIONS,
        instructions: str = CANARY_INSTRUCTIONS,
    ) -> Callable[[], Awaitable[VerdictValue]]:
        async def one() -> VerdictValue:
            verdict, _ = await judge_conversation(llm, spec, transcript, expectations, instructions)
            return verdict.verdict

        return one

    # half of each round is the suite's own (cycled when it has fewer): a judge that passes
    # them all then passes half of what it is asked, which the test stops whatever the rest
    half = len(KNOWN_FAILS) // 2 if suite_controls else 0
    ours = [suite_controls[i % len(suite_controls)] for i in range(half)]
    known_fails = (*ours, *KNOWN_FAILS)[: len(KNOWN_FAILS)]
    try:
        spec = replace(
            spec,
            verdict_form=await learn_verdict_form(
                llm, spec, KNOWN_PASS, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS
            ),
        )
        bad, good = await _all(
            [
                _ask_known_fails([asker(*canary) for canary in known_fails], maybe_is_pass),
                _ask_canary(asker(KNOWN_PASS), maybe_is_pass),
            ]
        )
    except (LLMError, JudgeError) as exc:
        detail = str(exc)
        if not detail.startswith(spec.label):
            detail = f"{spec.label}: {detail}"
        raise JudgePreflightError(
            f"judge preflight: no verdict on a canary transcript, so nothing would be judged "
            f"(no agent was started): {detail}"
        ) from None
    return _judge_check(spec, bad, good, maybe_is_pass, allow_weak)


def _judge_check(
    spec: LLMSpec, bad: _Canary, good: _Canary, maybe_is_pass: bool, allow_weak: bool
) -> JudgeCheck:
    """What the canaries say of the judge; raises :class:`WeakJudgeError` when it passed the
    known-bad ones (unless ``allow_weak``)."""
    judge = f"the judge ({spec.model} at {spec.host})"
    if bad.passed and not allow_weak:
        raise WeakJudgeError(
            f"judge preflight: {judge} passed the known-bad canary transcripts "
            f"({_answered(bad, maybe_is_pass)}), so the gate would pass broken agents; no agent "
            "was started. Use a stronger judge model, or --allow-weak-judge to run anyway "
            "(every report then says the judge failed its canary)"
        )
    warnings = []
    if bad.passed:
        warnings.append(
            f"{judge} passed the known-bad canary transcripts ({_answered(bad, maybe_is_pass)}) "
            "and the run went on only because of --allow-weak-judge: this gate can pass "
            "broken agents"
        )
    if not good.passed:
        warnings.append(
            f"{judge} did not pass the known-good canary transcript "
            f"({_answered(good, maybe_is_pass)}): expect false failures"
        )
    return JudgeCheck(
        known_fail=bad.verdict,
        known_pass=good.verdict,
        warning="; ".join(warnings),
        known_fail_votes=bad.votes,
        known_pass_votes=good.votes,
        weak=bad.passed,
        verdict_form=spec.verdict_form,
    )


async def _all(work: Sequence[Awaitable[T]]) -> list[T]:
    """Every result, in order; when one fails, the others are cancelled and awaited here.

    (``asyncio.gather`` leaves the others running: a failed canary's other asks went on
    retrying while the run exited, and the cancelled half of a failed preflight, left to
    ``asyncio.run``'s clean-up, printed a page of asyncio traceback before the one-line error.)
    """
    tasks = [asyncio.ensure_future(one) for one in work]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _answered(canary: _Canary, maybe_is_pass: bool) -> str:
    """``it answered maybe, maybe, pass; maybe counts as a pass with --maybe-is-pass``."""
    text = f"it answered {_votes(canary.votes)}"
    if "maybe" in canary.votes:
        rule = "counts as a pass with" if maybe_is_pass else "counts as a fail without"
        text += f"; maybe {rule} --maybe-is-pass"
    return text


def _votes(votes: Sequence[str]) -> str:
    """``pass, fail, fail``; past five, counted: ``fail 11, pass 1 of 12``."""
    if len(votes) <= CANARY_ASKS:
        return ", ".join(votes)
    counts = ", ".join(f"{v} {votes.count(v)}" for v in sorted(set(votes), key=votes.index))
    return f"{counts} of {len(votes)}"


def preflight_line(check: JudgeCheck, maybe_is_pass: bool = False) -> str:
    """The line a run prints: what the judge answered on each canary, and what that means."""
    bad = _votes(check.known_fail_votes) or check.known_fail
    good = ", ".join(check.known_pass_votes) or check.known_pass
    verdicts = f"known-bad canaries {bad}; known-good canary {good}"
    if check.warning:
        return f"WARNING: judge preflight ({verdicts}): {check.warning}"
    line = f"judge preflight: {verdicts}: the judge tells them apart"
    if "maybe" in (*check.known_fail_votes, *check.known_pass_votes):
        rule = "counts as a pass with" if maybe_is_pass else "counts as a fail without"
        line += f" (maybe {rule} --maybe-is-pass)"
    return line


def preflight_judge(
    spec: LLMSpec,
    environ: Mapping[str, str] | None = None,
    *,
    maybe_is_pass: bool = False,
    allow_weak: bool = False,
    suite_controls: Sequence[KnownBad] = (),
) -> JudgeCheck:
    """Run :func:`check_judge` in its own event loop with its own client, closed after.

    Called by ``lkeval run`` before the first agent boots; the run's own clients are made
    later, inside the run's loop.
    """

    async def main() -> JudgeCheck:
        llm = build_llm(spec, environ)
        try:
            return await check_judge(llm, spec, maybe_is_pass, allow_weak, suite_controls)
        finally:
            await llm.aclose()

    return asyncio.run(main())
