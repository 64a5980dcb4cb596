"""What pytest shows for a scenario that did not pass: the outcome, the failed checks with the
judge's and the agent's reasons, and the transcript, in the words every report of lk-eval uses.

No traceback: the failure is the agent's, and lk-eval's own frames would only hide it. The text
is masked (a transcript can quote a key the agent was given) and made inert (a transcript is
text the agent chose: no terminal escapes, no workflow command when pytest runs in Actions).
"""

from __future__ import annotations

from lkeval.results.model import ScenarioResult
from lkeval.results.wording import (
    attempt_to_show,
    failure_reasons,
    format_transcript,
    outcome_line,
)
from lkeval.text.masking import mask
from lkeval.text.untrusted import inert_lines, visible


class ScenarioFailed(Exception):
    """A scenario's result that is not a pass, raised by its test item for pytest to report."""

    def __init__(self, result: ScenarioResult) -> None:
        super().__init__(outcome_line(result))
        self.result = result


def failure_text(result: ScenarioResult) -> str:
    """The failure as pytest prints it under the item's name."""
    where = f"{result.file}:{result.line}" if result.line else result.file
    lines = [f"scenario {result.scenario_id} ({where}) {result.status}: {outcome_line(result)}"]
    reasons = failure_reasons(result)  # in full: the first line may have been cut
    if reasons:
        lines += ["", "why:"] + ["  " + reason for reason in reasons]
    attempt = attempt_to_show(result)
    if attempt is not None and attempt.transcript:
        lines += ["", "transcript:"] + [
            "  " + line for line in format_transcript(attempt.transcript)
        ]
    if attempt is not None and attempt.log_tail:
        lines += ["", "the agent's last log lines:"] + ["  " + line for line in attempt.log_tail]
    return inert_lines(visible(mask("\n".join(lines)), lines=True))
