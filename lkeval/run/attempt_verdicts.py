"""The verdicts of one played attempt: its scripted expectations, a tool call the agent's LLM
wrote as text, and the evaluator's judges (whose failures are kept as faults, never a pass);
and how the agent's own check (``on_simulation_end``) is worded."""

from __future__ import annotations

from collections.abc import Sequence

from lkeval.results.model import ExpectationResult, TranscriptItem, Usage, Verdict
from lkeval.run.collaborators import CallerBrokeRole, Evaluator, JudgingFailed
from lkeval.run.conversation import Conversation
from lkeval.run.outcome import describe_failures, scripted_failures
from lkeval.run.spoken_calls import spoken_call_verdict
from lkeval.scenarios.model import Scenario


async def verdicts_of(
    evaluator: Evaluator | None,
    scenario: Scenario,
    transcript: list[TranscriptItem],
    expectations: list[ExpectationResult],
    usage: dict[str, Usage],
    conv: Conversation,
) -> tuple[list[Verdict], list[str]]:
    """(verdicts, faults): a judge that gave no verdict is a fault beside those that came."""
    verdicts: list[Verdict] = []
    faults: list[str] = []
    if expectations:
        failed = scripted_failures(expectations)
        verdicts.append(
            Verdict("scripted", "fail" if failed else "pass", describe_failures(failed))
        )
    if (spoken := spoken_call_verdict(transcript)) is not None:
        verdicts.append(spoken)  # its LLM wrote a tool call as text: judged or not, a fail
    if evaluator is not None:
        try:
            instructions = await conv.agent_instructions()  # for LiveKit's judges
            verdicts.extend(await evaluator.judge(scenario, transcript, usage, instructions))
        except CallerBrokeRole as exc:  # not the conversation the scenario asked for
            faults.append(str(exc))
        except JudgingFailed as exc:  # some judge gave no verdict: keep those that came
            verdicts.extend(exc.verdicts)
            faults.append(f"judge failed: {exc}")
        except Exception as exc:  # the judge is down: an error of the judge, not a pass
            faults.append(f"judge failed: {exc}")
    return verdicts, faults


def all_pass(verdicts: Sequence[Verdict]) -> tuple[bool, str]:
    """Without an evaluator: every verdict must pass; the reason names those that did not."""
    failed = [v for v in verdicts if v.verdict != "pass"]
    return not failed, "; ".join(f"{v.source}: {v.reason}" for v in failed)


def agent_check_text(verdict: Verdict | None, error: str) -> str:
    """How the agent's own ``on_simulation_end`` check went, for reports to state it."""
    if error:
        return f"not run: {error}" if "could not" in error else f"error: {error}"
    if verdict is None:
        return "passed (no veto)"
    if verdict.verdict == "fail":
        return f"vetoed: {verdict.reason}" if verdict.reason else "vetoed"
    return "passed" + (f": {verdict.reason}" if verdict.reason else "")


__all__ = ["agent_check_text", "all_pass", "verdicts_of"]
