"""A pull request from a fork gets no secrets: the eval cannot run, and says so as a result.

GitHub runs a fork's ``pull_request`` workflows without the repository's secrets, so the LLM
keys the caller and the judge need are empty. Stopping with exit 2 and no results file would
leave the fork-safe comment workflow (``workflow_run``) failing on a missing artifact, and the
PR with no word on why. Instead ``lkeval run`` writes a results file in which every selected
scenario is an ``error`` saying it was not run for want of credentials; the gate reads that as
"nothing could run" (exit 3, never a pass), the comment workflow posts it, and one ``::error``
names the empty secret and the recipe for evaluating a fork's PR.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence

from lkeval import __version__
from lkeval.results.model import RunMetadata, RunResults, ScenarioResult
from lkeval.scenarios.model import Scenario, Selection
from lkeval.text.masking import redact_argv
from lkeval.text.untrusted import command

#: Where the docs explain how to evaluate a fork's PR.
FORK_RECIPE = "docs/action.md#pull-requests-from-forks"
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD", re.IGNORECASE)


def empty_secrets(environ: Mapping[str, str], wanted: Iterable[str] = ()) -> list[str]:
    """Secret-like variables the workflow set but that arrived empty (``${{ secrets.X }}`` on a
    fork), the wanted ones first: these are the secrets GitHub withheld."""
    empty = [n for n, v in environ.items() if not v and _SECRET_NAME.search(n)]
    wanted = [n for n in wanted if n in empty]
    return wanted + sorted(n for n in empty if n not in wanted)


def missing_secret_words(environ: Mapping[str, str], wanted: Sequence[str]) -> str:
    """``OPENAI_API_KEY is empty``, or which variables would do when none was even set."""
    empty = empty_secrets(environ, wanted)
    if empty:
        return f"{' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty"
    return f"none of {', '.join(wanted)} is set" if wanted else "no LLM credentials are set"


def not_run_reason(environ: Mapping[str, str], wanted: Sequence[str]) -> str:
    """Each scenario's reason: short, since a report repeats it per scenario."""
    return (
        "not run: no LLM credentials on a pull request from a fork "
        f"({missing_secret_words(environ, wanted)})"
    )


def fork_error(detail: str, environ: Mapping[str, str], wanted: Sequence[str]) -> str:
    """The one ``::error`` of a fork PR's run: the missing secret, why, and what to do."""
    return command(
        "error",
        f"lk-eval could not run: {missing_secret_words(environ, wanted)}. GitHub gives no "
        f"secrets to workflows of pull requests from forks ({detail}). The results file says "
        "so, and the workflow_run comment workflow posts it. To evaluate this PR, push its "
        f"commits to a branch of this repository (see {FORK_RECIPE})",
        title="lk-eval: no credentials on a fork's pull request",
    )


def fork_replay_notice(detail: str) -> str:
    """The ``::notice`` of a fork PR's run with cassettes: evaluated from them alone."""
    return command(
        "notice",
        f"no LLM credentials on a pull request from a fork ({detail}): evaluating from the "
        "cassettes alone (--cassette-mode replay). Scenarios that replay in full are "
        "evaluated; the others are not run, and the gate cannot pass while one is left "
        f"(see {FORK_RECIPE})",
        title="lk-eval: replaying a fork's pull request",
    )


def not_run_results(
    scenarios: Sequence[Scenario],
    selection: Selection,
    reason: str,
    *,
    agent: str,
    scenario_files: Sequence[str],
    commit: tuple[str | None, str | None],
    shard: str | None,
    argv: Sequence[str],
) -> RunResults:
    """Results of a run that could not start: each selected scenario an ``error`` with
    ``reason``, the others skipped with the reason a normal run gives them."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    metadata = RunMetadata(
        lkeval_version=__version__,
        livekit_agents_version=None,
        agent=agent,
        scenario_files=tuple(scenario_files),
        started_at=now,
        finished_at=now,
        git_sha=commit[0],
        git_branch=commit[1],
        shard=shard,
        argv=redact_argv(argv),
    )
    results = tuple(
        ScenarioResult.of(s, "error", reason)
        if selection.selects(s)
        else ScenarioResult.of(s, "skipped", selection.not_selected)
        for s in scenarios
    )
    return RunResults(metadata=metadata, scenarios=results)
