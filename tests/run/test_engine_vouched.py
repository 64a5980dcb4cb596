"""A pass the conversation judge gave must be one the judge can vouch for (fake attempts and a
fake judge, nothing boots): a calibration that says it cannot tell, or a paired known-bad
control it passes too, makes the scenario an ``error``; ``--allow-weak-judge`` lets the first
through, named."""

from __future__ import annotations

import asyncio

from test_engine import Quiet, scenario
from test_engine_sampling import Votes

from lkeval.results.calibration import JUDGE_UNFIT, WEAK_JUDGE_ALLOWED
from lkeval.results.controls import PAIRED_ASKS, REFUSAL, PairedVotes, paired_control
from lkeval.results.model import Attempt, ScenarioResult, TranscriptItem
from lkeval.run.engine import Engine, EngineOptions
from lkeval.scenarios.model import Scenario

UNFIT = "the judge passed 20 of 20 known-bad controls of this scenario (lkeval calibrate)"


class Control:
    """``check_control``: the judge's answers on the paired control, scripted per scenario."""

    def __init__(self, answers: dict[str, list[bool]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, s: Scenario, attempt: Attempt) -> tuple[Attempt, PairedVotes]:
        self.asked.append(s.id)
        passes: list[bool] = []
        for answer in self.answers[s.id]:
            passes.append(answer)
            if not answer or len(passes) == PAIRED_ASKS:
                break
        return attempt, PairedVotes(tuple(passes))


def run(
    scenarios: list[Scenario], make: Votes, control: Control | None, **options: object
) -> list[ScenarioResult]:
    engine = Engine(make, Quiet(), EngineOptions(**options), check_control=control)  # type: ignore[arg-type]
    return asyncio.run(engine.run(scenarios))


def test_a_judge_that_passes_the_paired_control_too_has_said_nothing() -> None:
    make = Votes({"s-1": ["pass"] * 3, "s-2": ["pass"] * 3, "s-3": ["fail"] * 9})
    control = Control({"s-1": [True] * 4, "s-2": [True, False], "s-3": [True] * 4})
    blind, seeing, failing = run([scenario(f"s-{n}") for n in (1, 2, 3)], make, control)
    assert blind.status == "error"
    assert blind.reason.startswith(JUDGE_UNFIT)
    assert "the judge also passed a known-bad version of this conversation" in blind.reason
    assert seeing.status == "passed" and seeing.sampling is not None
    assert "the judge failed a known-bad version of this conversation" in seeing.sampling.text
    assert "2 calls" in seeing.sampling.text
    # only a passing decision is checked: a failure costs no control call
    assert failing.status == "failed" and control.asked == ["s-1", "s-2"]


def test_a_pass_not_given_by_the_conversation_judge_is_not_checked() -> None:
    make = Votes({"s-1": ["passed"] * 3})  # a scripted check decided, no judge verdict
    control = Control({"s-1": [True] * 4})
    (result,) = run([scenario("s-1")], make, control)
    assert result.status == "passed" and control.asked == []


def test_a_calibration_that_says_the_judge_cannot_tell_keeps_its_passes_from_the_gate() -> None:
    s = scenario("s-1")
    make = Votes({"s-1": ["pass"] * 3})
    (result,) = run([s], make, None, unfit_judges={"s-1": (s.digest, UNFIT)})
    assert result.status == "error" and result.reason.startswith(JUDGE_UNFIT)
    assert UNFIT in result.reason and "--allow-weak-judge" in result.reason
    # allowed: a pass that says so
    (allowed,) = run(
        [s], make, None, unfit_judges={"s-1": (s.digest, UNFIT)}, allow_weak_judge=True
    )
    assert allowed.status == "passed" and allowed.reason.startswith(WEAK_JUDGE_ALLOWED)
    # a calibration of other content is not this scenario's
    (edited,) = run([s], make, None, unfit_judges={"s-1": ("other", UNFIT)})
    assert edited.status == "passed" and edited.reason == ""


def test_the_paired_control_is_the_conversation_with_the_agent_doing_nothing() -> None:
    items = (
        TranscriptItem("message", 0, role="assistant", text="Hi, how can I help?"),
        TranscriptItem("message", 1, role="user", text="My email is maya@example.com"),
        TranscriptItem("function_call", 1, name="record_email", arguments="{}", call_id="c1"),
        TranscriptItem("function_call_output", 1, output="ok", call_id="c1"),
        TranscriptItem("message", 1, role="assistant", text="Recorded maya@example.com."),
    )
    control = paired_control(items)
    assert control is not None
    assert [i.kind for i in control] == ["message"] * 3
    assert [i.text for i in control if i.role == "assistant"] == [REFUSAL, REFUSAL]
    assert [i.text for i in control if i.role == "user"] == ["My email is maya@example.com"]
    assert paired_control(control) is None  # nothing left to take away
