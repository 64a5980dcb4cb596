"""What an attempt is given to work with: the LLM side (simulated user, judges) and its place
in the run's concurrency. Small protocols, so the engine and tests can hand in their own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TextIO

from lkeval.results.controls import KnownBad
from lkeval.results.model import JudgeCheck, LLMInUse, TranscriptItem, Usage, Verdict
from lkeval.run.audio_turns import AudioSettings
from lkeval.run.expectations import IntentJudge
from lkeval.scenarios.model import Scenario


class CallerTurnLike(Protocol):
    """What a simulated caller answers with for one turn."""

    text: str | None
    ended: bool
    reason: str
    usage: Usage


class Caller(Protocol):
    """The simulated user of one attempt."""

    async def next_message(self, transcript: Sequence[TranscriptItem]) -> CallerTurnLike:
        """The caller's next message, or ``ended`` when it hangs up."""
        ...


class Evaluator(Protocol):
    """The LLM side of an attempt: the simulated user and the judges (may be absent)."""

    def caller_for(self, scenario: Scenario) -> Caller | None:
        """A fresh simulated caller for ``scenario``, or None when none is configured."""
        ...

    def intent_judge(self, usage: dict[str, Usage]) -> IntentJudge | None:
        """A judge for scripted ``intent:`` checks that adds its tokens to ``usage``."""
        ...

    async def judge(
        self,
        scenario: Scenario,
        transcript: Sequence[TranscriptItem],
        usage: dict[str, Usage],
        agent_instructions: str | None = None,
    ) -> list[Verdict]:
        """Judge the whole conversation (may be empty when no judge is configured);
        ``agent_instructions`` are the agent's own, which LiveKit's built-in judges need.
        Raises :class:`JudgingFailed` when some judge gave no verdict, and
        :class:`CallerBrokeRole` (no judge asked) when the simulated caller broke role."""
        ...

    def passes(self, verdicts: Sequence[Verdict]) -> tuple[bool, str]:
        """Combine verdicts into pass/fail and a reason."""
        ...


class Rejudge(Protocol):
    """The conversation judge asked once more (the sequential test's extra votes)."""

    async def judge_again(
        self, scenario: Scenario, transcript: Sequence[TranscriptItem], usage: dict[str, Usage]
    ) -> Verdict | None:
        """One more vote on ``transcript``, its tokens added to ``usage``; None without a judge."""
        ...

    def passes(self, verdicts: Sequence[Verdict]) -> tuple[bool, str]:
        """Combine verdicts into pass/fail and a reason."""
        ...


class JudgingFailed(Exception):
    """Some judge gave no verdict (an LLM error, an unusable answer): raised by
    :meth:`Evaluator.judge` with the verdicts that *were* had, which the result keeps."""

    def __init__(self, message: str, verdicts: Sequence[Verdict]) -> None:
        super().__init__(message)
        self.verdicts = tuple(verdicts)


class CallerBrokeRole(Exception):
    """The simulated caller did not play the scenario (it spoke as the agent, repeated itself,
    or ignored its instructions for the whole call): raised by :meth:`Evaluator.judge` before
    any judge is asked, and the attempt is an ``error`` with this reason, never a verdict."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the simulated caller broke role: {why}")


class Slot(Protocol):
    """The attempt's place in the run's concurrency (:class:`lkeval.run.engine.AgentSlots`)."""

    async def converse(self) -> None:
        """Wait for a conversation slot (the agent has booted)."""
        ...

    def release(self) -> None:
        """Give back what is held (the conversation is over)."""
        ...


class AudioRig(Protocol):
    """The run's speech in audio mode (``run/speech.py``): the caller's voice, and what each
    agent's environment needs to reach the speech models it is given."""

    conditions: str
    """What the audio figures were measured with (voice, speech server, recognition)."""

    def agent_env(self, attempt_key: str) -> dict[str, str]:
        """The attempt's additions to its agent's environment (its speech URLs)."""
        ...

    def audio_settings(self, attempt_key: str, impair: str | None = None) -> AudioSettings:
        """How the attempt speaks (its voice, the oracle told each line, and ``impair``: the
        scenario's own impairments, None for the run's)."""
        ...

    async def start(self) -> None:
        """Before the first audio attempt, in the run's event loop."""
        ...

    async def stop(self) -> None:
        """After the last."""
        ...


class RunEvaluator(Evaluator, Rejudge, Protocol):
    """The evaluator as the whole run sees it: checked before the first boot, named in the
    results, closed at the end (:class:`lkeval.llm.evaluator.LLMEvaluator`)."""

    judge_scripted: bool
    """Scripted scenarios are judged too (a judge model was configured explicitly)."""
    run_judges: tuple[str, ...]
    """``--judges``: LiveKit built-in judges run on every scenario."""
    allow_weak_judge: bool
    """``--allow-weak-judge``: a judge measured unfit still decides (every report says so)."""

    def preflight(self, out: TextIO, suite_controls: Sequence[KnownBad] = ()) -> JudgeCheck | None:
        """Name the models on ``out`` and check the judge; raises when it cannot judge."""
        ...

    def llms_in_use(self) -> tuple[LLMInUse, ...]:
        """The caller's and judge's model and host, for the results file."""
        ...

    def prompts_digest(self) -> str:
        """A digest of lk-eval's caller and judge prompts: part of a cassette's identity, so a
        cassette recorded with other prompts is not replayed (docs/replay.md)."""
        ...

    async def aclose(self) -> None:
        """Close the LLM clients made during the run."""
        ...
