"""What ``lkeval report`` works out again from a results file, below each scenario's status.

``lkeval.results.consistency`` recomputes each scenario's status from its attempts' statuses;
this module recomputes what those rest on, so that editing one field (an attempt's status, a
judge's verdict, a scenario's ``quarantined`` flag) cannot turn a failure into a pass:

* each attempt's status from its verdicts, scripted checks and errors, with the rules the run
  decided it by (``lkeval.run.outcome``): a pass needs at least one verdict, every verdict a
  pass (a ``maybe`` only under a recorded ``--maybe-is-pass``) and every scripted check held;
  a failure needs a failing verdict or check; a skipped attempt ran nothing (no verdict, check
  or transcript, so it cannot hide a failure from the sequential test); a judge verdict asked
  more than once is the majority of its votes (``lkeval.run.revote``: a tie fails);
* each scenario's quarantine from the ``--quarantine`` tags the run recorded
  (``metadata.suite.options``) and the scenario's tags;
* each scenario's selection from the ``--tag``/``--match`` the run recorded: a scenario that
  ran must be selected by them, and one reported "not selected" must not be.

Each contradiction is named by scenario, attempt (1-based) and field; ``lkeval report`` refuses
the file (exit 2).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence

from lkeval.results.model import Attempt, RunResults, ScenarioResult, Verdict
from lkeval.text.untrusted import label

NOT_SELECTED = "not selected"
"""How the reason of a scenario the run's ``--tag``/``--match`` left out begins."""


def recorded_option(results: RunResults, flag: str) -> str | None:
    """The text the run recorded for ``flag`` (None: the file records no options)."""
    suite = results.metadata.suite
    return suite.options.get(flag) if suite is not None else None


def _pairs(text: str | None, flag: str) -> list[tuple[str, str]]:
    """``--tag``/``--quarantine`` as recorded: JSON ``[["k", "v"], ...]`` or ``(none)``."""
    values = _values(text, flag)
    pairs = [tuple(v) for v in values if isinstance(v, list) and len(v) == 2]
    if len(pairs) != len(values) or not all(isinstance(x, str) for p in pairs for x in p):
        raise ValueError(f"metadata.suite.options[{flag!r}] is not a list of KEY=VALUE pairs")
    return [(str(k), str(v)) for k, v in pairs]


def _values(text: str | None, flag: str) -> list[object]:
    if text is None or text in ("(none)", "(default)"):
        return []
    try:
        values = json.loads(text)
    except ValueError:
        raise ValueError(f"metadata.suite.options[{flag!r}] is not valid JSON") from None
    if not isinstance(values, list):
        raise ValueError(f"metadata.suite.options[{flag!r}] is not a list")
    return values


def attempt_problem(attempt: Attempt, maybe_is_pass: bool) -> str:
    """Why this attempt's recorded ``status`` (or a judge's ``verdict``) is not what its
    verdicts, checks and errors give ("" when it is); names the field."""
    for number, verdict in enumerate(attempt.verdicts, start=1):
        problem = _votes_problem(verdict)
        if problem:
            return f"verdicts[{number}].verdict is {verdict.verdict!r}, but {problem}"
    counts = [
        v.verdict == "pass" or (v.verdict == "maybe" and maybe_is_pass) for v in attempt.verdicts
    ]
    failed_checks = [e for e in attempt.expectations if not e.passed]
    status = attempt.status
    if status == "passed":
        if not attempt.verdicts:
            return "status is passed, but it has no verdict (nothing decided it)"
        if not all(counts):
            failing = next(v for v, ok in zip(attempt.verdicts, counts, strict=True) if not ok)
            return f"status is passed, but its {failing.source} verdict is {failing.verdict}"
        if failed_checks:
            return f"status is passed, but its check {failed_checks[0].description!r} failed"
    if status == "failed" and all(counts) and not failed_checks:
        return "status is failed, but no verdict or check of it failed"
    if status == "skipped" and (attempt.verdicts or attempt.expectations or attempt.transcript):
        return "status is skipped, but it ran (it has a transcript, verdicts or checks)"
    return ""


def _votes_problem(verdict: Verdict) -> str:
    votes = verdict.votes
    if not votes:
        return ""
    if len(votes) == 1:
        final = votes[0]
    else:
        passed = sum(1 for v in votes if v == "pass")
        final = "pass" if passed > len(votes) - passed else "fail"
    if final == verdict.verdict:
        return ""
    return f"its votes {', '.join(votes)} give {final!r}"


def _selects(scenario: ScenarioResult, tags: Sequence[tuple[str, str]], globs: list[str]) -> bool:
    """:meth:`lkeval.scenarios.model.Selection.selects` on a result (its id, label, tags)."""
    if not all(scenario.tags.get(k) == v for k, v in tags):
        return False
    names = (scenario.scenario_id.lower(), scenario.label.lower())
    return not globs or any(fnmatch.fnmatchcase(n, g.lower()) for g in globs for n in names)


def attempts_problem(results: RunResults) -> str:
    """The first attempt whose status (or judge verdict) its own record contradicts ("")."""
    maybe_is_pass = recorded_option(results, "--maybe-is-pass") == "true"
    for scenario in results.scenarios:
        for number, attempt in enumerate(scenario.attempts, start=1):
            problem = attempt_problem(attempt, maybe_is_pass)
            if problem:
                return f"scenario {label(scenario.label)}, attempt {number}: {problem}"
    return ""


def options_problem(results: RunResults) -> str:
    """The first scenario whose quarantine or selection the run's recorded options contradict
    ("" when none does; a recorded option that cannot be read is one too)."""
    try:
        quarantine = _pairs(recorded_option(results, "--quarantine"), "--quarantine")
        tags = _pairs(recorded_option(results, "--tag"), "--tag")
        globs = [str(g) for g in _values(recorded_option(results, "--match"), "--match")]
    except ValueError as exc:
        return str(exc)
    for scenario in results.scenarios:
        name = f"scenario {label(scenario.label)}"
        ran = any(a.status != "skipped" for a in scenario.attempts)
        expected = any(scenario.tags.get(k) == v for k, v in quarantine)
        if ran and scenario.quarantined != expected:
            given = ", ".join(f"{k}={v}" for k, v in quarantine) or "none"
            return (
                f"{name}: quarantined is {str(scenario.quarantined).lower()}, but the run's "
                f"--quarantine ({given}) and its tags give {str(expected).lower()}"
            )
        selected = _selects(scenario, tags, globs)
        if ran and not selected:
            return f"{name}: it ran, but the run's --tag/--match do not select it"
        if scenario.reason.startswith(NOT_SELECTED) and selected and results.metadata.suite:
            return f"{name}: reason says {NOT_SELECTED}, but the run's --tag/--match select it"
    return ""


__all__ = ["attempt_problem", "attempts_problem", "options_problem", "recorded_option"]
