"""The judge preflight: two canary verdicts before any agent boots.

A judge that cannot produce a verdict (wrong URL, a model that never calls the tool, a server
that ignores ``tool_choice``) would otherwise turn every scenario into an error one agent boot
at a time; a judge that passes a known-bad conversation would turn a broken agent into a green
gate. Both are cheap to detect up front with two tiny transcripts whose verdicts are not in
doubt: the first case stops the run (exit 2, naming the endpoint), the second is recorded in
the results and warned about in every report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from livekit.agents.llm import LLM

from lkeval.llm.backends import build_llm
from lkeval.llm.client import LLMError
from lkeval.llm.config import LLMConfigError, LLMSpec
from lkeval.llm.judge import JudgeError, judge_conversation
from lkeval.results.model import JudgeCheck, TranscriptItem

__all__ = ["JudgePreflightError", "check_judge", "preflight_judge"]

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


async def check_judge(llm: LLM, spec: LLMSpec) -> JudgeCheck:
    """Judge both canaries; raise :class:`JudgePreflightError` if either has no verdict."""
    try:
        (bad, _), (good, _) = await asyncio.gather(
            judge_conversation(llm, spec, KNOWN_FAIL, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS),
            judge_conversation(llm, spec, KNOWN_PASS, CANARY_EXPECTATIONS, CANARY_INSTRUCTIONS),
        )
    except (LLMError, JudgeError) as exc:
        detail = str(exc)
        if not detail.startswith(spec.label):
            detail = f"{spec.label}: {detail}"
        raise JudgePreflightError(
            f"judge preflight: no verdict on a canary transcript, so nothing would be judged "
            f"(no agent was started): {detail}"
        ) from None
    warnings = []
    if bad.verdict == "pass":
        warnings.append(
            f"the judge ({spec.model} at {spec.host}) passed a known-bad canary transcript: "
            "with this judge the gate can pass broken agents"
        )
    if good.verdict != "pass":
        warnings.append(
            f"the judge ({spec.model} at {spec.host}) said {good.verdict} on a known-good "
            "canary transcript: expect false failures"
        )
    return JudgeCheck(known_fail=bad.verdict, known_pass=good.verdict, warning="; ".join(warnings))


def preflight_judge(spec: LLMSpec, environ: Mapping[str, str] | None = None) -> JudgeCheck:
    """Run :func:`check_judge` in its own event loop with its own client, closed after.

    Called by ``lkeval run`` before the first agent boots; the run's own clients are made
    later, inside the run's loop.
    """

    async def main() -> JudgeCheck:
        llm = build_llm(spec, environ)
        try:
            return await check_judge(llm, spec)
        finally:
            await llm.aclose()

    return asyncio.run(main())
