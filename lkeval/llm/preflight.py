"""The judge preflight: canary verdicts before any agent boots.

A judge that cannot produce a verdict (wrong URL, a model that never calls the tool, a server
that ignores ``tool_choice``) would otherwise turn every scenario into an error one agent boot
at a time; a judge that passes a known-bad conversation would turn a broken agent into a green
gate. Both are cheap to detect up front with two tiny transcripts whose verdicts are not in
doubt. The first ask also learns how this endpoint gives a verdict
(:func:`lkeval.llm.judge.learn_verdict_form`): the run then asks in that form. Both cases stop
the run (exit 2, naming the endpoint) before any agent boots; the second can
be overridden with ``--allow-weak-judge``, and the run then says in every report that its
judge failed the canary. A wrong verdict on the known-good canary is a warning (expect false
failures), never a stop: it cannot make a broken agent pass.

How many times each canary is asked
-----------------------------------
Each canary is asked up to :data:`CANARY_ASKS` = 5 times and decided by the first side to
reach :data:`CANARY_MAJORITY` = 3 answers (so 3 asks when the judge is consistent, at most 5):
the known-bad canary is *passed* when 3 answers count as a pass under the gate's rule (``pass``,
or ``maybe`` with ``--maybe-is-pass``). Stopping early does not change the outcome, which is
that of the majority of all 5. With a judge that gets each answer wrong independently with
probability ``p``, the run is stopped with probability ``P(Binomial(5, p) >= 3)``:

* ``p = 0.1`` (a decent judge flipping 10% of its verdicts):
  ``10·p³·(1-p)² + 5·p⁴·(1-p) + p⁵ = 0.0081 + 0.00045 + 0.00001 = 0.00856``, stopped in 0.86%
  of runs (at most 1%, as required);
* ``p = 1`` (a judge that passes everything): stopped in every run (3 of 3 passes);
* ``p = 0.3``: 16.3%; ``p = 0.5``: 50%.

The alternatives are worse: asking once stops a 10% flipper in 10% of runs; two asks that must
agree stop it in exactly 1% but a 50% judge in only 25%; three that must agree, 0.1% and 12.5%.
``tests/llm/test_judge_preflight.py`` checks these numbers exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from livekit.agents.llm import LLM

from lkeval.llm.client import LLMError, build_llm
from lkeval.llm.config import LLMConfigError, LLMSpec
from lkeval.llm.judge import JudgeError, judge_conversation, learn_verdict_form
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
    llm: LLM, spec: LLMSpec, maybe_is_pass: bool = False, allow_weak: bool = False
) -> JudgeCheck:
    """Judge both canaries; raise :class:`JudgePreflightError` if either has no verdict and
    :class:`WeakJudgeError` if the known-bad one counts as a pass (unless ``allow_weak``)."""

    def asker(transcript: Sequence[TranscriptItem]) -> Callable[[], Awaitable[VerdictValue]]:
        async def one() -> VerdictValue:
            verdict, _ = await judge_conversation(
                llm, spec, transcript, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS
            )
            return verdict.verdict

        return one

    try:
        spec = replace(
            spec,
            verdict_form=await learn_verdict_form(
                llm, spec, KNOWN_PASS, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS
            ),
        )
        bad, good = await _all(
            [
                _ask_canary(asker(KNOWN_FAIL), maybe_is_pass),
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
    judge = f"the judge ({spec.model} at {spec.host})"
    if bad.passed and not allow_weak:
        raise WeakJudgeError(
            f"judge preflight: {judge} passed the known-bad canary transcript "
            f"({_answered(bad, maybe_is_pass)}), so the gate would pass broken agents; no agent "
            "was started. Use a stronger judge model, or --allow-weak-judge to run anyway "
            "(every report then says the judge failed its canary)"
        )
    warnings = []
    if bad.passed:
        warnings.append(
            f"{judge} passed the known-bad canary transcript ({_answered(bad, maybe_is_pass)}) "
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
    text = f"it answered {', '.join(canary.votes)}"
    if "maybe" in canary.votes:
        rule = "counts as a pass with" if maybe_is_pass else "counts as a fail without"
        text += f"; maybe {rule} --maybe-is-pass"
    return text


def preflight_line(check: JudgeCheck, maybe_is_pass: bool = False) -> str:
    """The line a run prints: what the judge answered on each canary, and what that means."""
    bad = ", ".join(check.known_fail_votes) or check.known_fail
    good = ", ".join(check.known_pass_votes) or check.known_pass
    verdicts = f"known-bad canary {bad}; known-good canary {good}"
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
) -> JudgeCheck:
    """Run :func:`check_judge` in its own event loop with its own client, closed after.

    Called by ``lkeval run`` before the first agent boots; the run's own clients are made
    later, inside the run's loop.
    """

    async def main() -> JudgeCheck:
        llm = build_llm(spec, environ)
        try:
            return await check_judge(llm, spec, maybe_is_pass, allow_weak)
        finally:
            await llm.aclose()

    return asyncio.run(main())
