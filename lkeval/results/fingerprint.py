"""What a results file was run on: the suite, the lk-eval and the options that change verdicts.

``lkeval merge`` joins shard files that separate CI jobs wrote. Comparing their ``I/N`` labels
alone let shard 1/2 of one scenario file and shard 2/2 of another merge and pass. So each file
carries a fingerprint of the whole suite it was cut from (a digest per scenario, over its
content, so a merge names which scenario differs) and of the options that change a verdict;
together with the lk-eval version and the commit in the metadata, a merge refuses files that
disagree (:func:`merge_problem`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence

from lkeval.results.model import RunMetadata, SuiteFingerprint
from lkeval.scenarios.model import Scenario


def scenario_digest(scenario: Scenario) -> str:
    """A digest of everything the scenario says (its place in a file aside: a job that runs
    from another directory sees the same scenario)."""
    content = dataclasses.asdict(scenario)
    content.pop("file", None)
    text = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def suite_fingerprint(
    suite: Sequence[Scenario], options: Iterable[tuple[str, object]]
) -> SuiteFingerprint:
    """The fingerprint of the whole suite (before ``--shard`` cut it) and of the run's options
    that change a verdict, each recorded as text, sorted by flag (stable across jobs)."""
    return SuiteFingerprint(
        scenarios={s.id: scenario_digest(s) for s in suite},
        options={flag: _text(value) for flag, value in sorted(options, key=lambda o: o[0])},
    )


def _name(source: str, meta: RunMetadata) -> str:
    return f"shard {meta.shard} ({source})" if meta.shard else source


def _suite_difference(first: SuiteFingerprint, other: SuiteFingerprint) -> str:
    """Which scenario makes two suites differ ("" when they are the same)."""
    for sid, digest in other.scenarios.items():
        if sid not in first.scenarios:
            return f"scenario {sid!r} is not in the other's suite"
        if first.scenarios[sid] != digest:
            return f"scenario {sid!r} differs"
    for sid in first.scenarios:
        if sid not in other.scenarios:
            return f"scenario {sid!r} is missing from its suite"
    return ""


def _option_difference(first: SuiteFingerprint, other: SuiteFingerprint) -> str:
    for key in sorted(set(first.options) | set(other.options)):
        a, b = first.options.get(key, "(not recorded)"), other.options.get(key, "(not recorded)")
        if a != b:
            return f"{key} {a} → {b}"
    return ""


def _models(meta: RunMetadata) -> dict[str, str]:
    """The caller's and judge's model by role (the host's port changes from job to job)."""
    return {llm.role: llm.model for llm in meta.llms}


def merge_problem(parts: Sequence[tuple[str, RunMetadata]]) -> str:
    """Why these results files are not parts of one run ("" when they are): a file without a
    fingerprint, another lk-eval, another commit, another suite, other options or models."""
    for source, meta in parts:
        if meta.suite is None and meta.interrupted:
            return f"{source} was interrupted before its scenarios were loaded: re-run that shard"
        if meta.suite is None:
            return (
                f"{source} has no suite fingerprint (written by lk-eval "
                f"{meta.lkeval_version or 'unknown'}, before merge checked what shards ran): "
                "re-run every shard with this lk-eval, or `lkeval report` each file on its own"
            )
    first_source, first = parts[0]
    assert first.suite is not None
    head = _name(first_source, first)
    for source, meta in parts[1:]:
        assert meta.suite is not None
        name = _name(source, meta)
        if meta.lkeval_version != first.lkeval_version:
            return (
                f"shards ran different lk-eval versions {first.lkeval_version} → "
                f"{meta.lkeval_version} ({head}, {name})"
            )
        if meta.git_sha != first.git_sha:
            return (
                f"shards ran different commits {first.git_sha or '(none)'} → "
                f"{meta.git_sha or '(none)'} ({head}, {name})"
            )
        suite = _suite_difference(first.suite, meta.suite)
        if suite:
            return f"{name} ran another suite than {head}: {suite}"
        option = _option_difference(first.suite, meta.suite)
        if option:
            return f"{name} ran with other options than {head}: {option}"
        mine, theirs = _models(first), _models(meta)
        for role in sorted(set(mine) & set(theirs)):  # an empty shard starts no LLM
            if mine[role] != theirs[role]:
                return f"{name} ran another {role} model than {head}: {mine[role]} → {theirs[role]}"
    return ""


def uncovered(meta: RunMetadata, scenario_ids: Iterable[str]) -> list[str]:
    """The scenarios of the fingerprinted suite that no merged file holds."""
    held = set(scenario_ids)
    return [sid for sid in (meta.suite.scenarios if meta.suite else {}) if sid not in held]


def _text(value: object) -> str:
    if value is None:
        return "(default)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return json.dumps(value, default=str) if value else "(none)"
    return str(value)


__all__ = [
    "merge_problem",
    "scenario_digest",
    "suite_fingerprint",
    "uncovered",
]
