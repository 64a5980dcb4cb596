"""The records of a results file about the run as a whole: where and with what it happened
(:class:`RunMetadata`), the LLMs it used, the judge preflight, and the fingerprint of the suite
it was cut from. Part of the result model (:mod:`lkeval.results.model` re-exports them)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lkeval.scenarios.model import Scenario


@dataclass(frozen=True)
class LLMInUse:
    """The caller's or the judge's model and endpoint host (never a key), as the run used it."""

    role: str
    model: str
    host: str


@dataclass(frozen=True)
class JudgeCheck:
    """The judge preflight: its verdicts on a known-fail and a known-pass canary transcript.

    ``warning`` is set when it got one wrong: a judge that passes a known-bad transcript is a
    gate that passes bad agents, and every report says so.
    """

    known_fail: str
    known_pass: str
    warning: str = ""
    # Every verdict the judge gave on each canary (asked up to 5 times, see
    # lkeval.llm.preflight); older files have none recorded.
    known_fail_votes: tuple[str, ...] = ()
    known_pass_votes: tuple[str, ...] = ()
    # The judge counted the known-bad canary as a pass and the run went on only because of
    # --allow-weak-judge: every report says so.
    weak: bool = False
    # How the judge was asked for its verdict: "tool" (a forced tool call) or "json_schema"
    # (a structured-output response_format), learned per endpoint by the preflight.
    verdict_form: str = ""


@dataclass(frozen=True)
class SuiteFingerprint:
    """What a run was cut from: a digest of each scenario of the whole suite by id, and the
    options that change verdicts, as text. ``lkeval merge`` joins shard files that separate CI
    jobs wrote; comparing their ``I/N`` labels alone let shard 1/2 of one scenario file and
    shard 2/2 of another merge and pass, so it refuses shards whose fingerprints (or lk-eval
    versions, or commits) disagree, naming the scenario or option (:mod:`lkeval.cli.merge`)."""

    scenarios: dict[str, str] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, suite: Sequence[Scenario], options: Iterable[tuple[str, object]]
    ) -> SuiteFingerprint:
        """The fingerprint of the whole suite (before ``--shard`` cut it) and of the run's
        options that change a verdict, each recorded as text, sorted by flag (stable across
        jobs)."""
        return cls(
            scenarios={s.id: s.digest for s in suite},
            options={flag: _option_text(value) for flag, value in sorted(options, key=_flag)},
        )


def _flag(option: tuple[str, object]) -> str:
    return option[0]


def _option_text(value: object) -> str:
    """An option as the fingerprint records it: ``(default)``, ``true``, JSON for a list."""
    if value is None:
        return "(default)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return json.dumps(value, default=str) if value else "(none)"
    return str(value)


@dataclass(frozen=True)
class RunMetadata:
    """Where and with what a run happened."""

    lkeval_version: str
    livekit_agents_version: str | None
    agent: str
    scenario_files: tuple[str, ...]
    started_at: str
    finished_at: str = ""
    duration_seconds: float = 0.0
    git_sha: str | None = None
    git_branch: str | None = None
    shard: str | None = None
    # ``--shard I/N`` with no selected scenario in shard I (more shards than scenarios): the
    # file says so, and its own gate passes; the merge of every shard is what is gated.
    empty_shard: bool = False
    interrupted: bool = False
    # A merge of shard results that lacks some shards (``lkeval merge --allow-partial``):
    # the missing ones as "I/N". The gate never passes such a file.
    missing_shards: tuple[str, ...] = ()
    # Run without LLM credentials from cassettes (a fork's pull request): only scenarios that
    # replayed fully were evaluated; the others are NOT_RUN_NO_LLM and the gate fails.
    no_credentials: bool = False
    argv: tuple[str, ...] = ()
    # "warm", "cold", or "mixed" (some agents fell back to cold starts): from the attempts,
    # which each say how their agent started and, when cold, why.
    start_mode: str = ""
    # Older results files have neither: they load with none recorded.
    llms: tuple[LLMInUse, ...] = ()
    judge_check: JudgeCheck | None = None
    # The sequential test's parameters (lkeval.results.sampling.SequentialRule), so that
    # ``lkeval report`` recomputes every decision; empty when every scenario ran a fixed plan.
    sampling_rule: dict[str, float] = field(default_factory=dict)
    # The conditions latency was measured under (docs/results.md): the conversation mode
    # ("text": lk-eval plays text turns) and the LiveKit Inference class of the agent's calls
    # (:func:`run_inference_class`); empty in older results files.
    conversation_mode: str = ""
    inference_class: str = ""
    # Audio mode ("audio", or "mixed" with text scenarios): the caller's voice and the agent's
    # speech models (an oracle STT says recognition was not tested); empty in text runs.
    speech: str = ""
    # How busy the machine was while audio turns were timed: the highest 1-minute load
    # average any turn ended with, the cores, and the conversations allowed at once.
    max_load: float | None = None
    cores: int = 0
    concurrency: int = 0
    # The suite and options the run was cut from; None in older results files (which
    # ``lkeval merge`` refuses) and in a run interrupted before its scenarios were loaded.
    suite: SuiteFingerprint | None = None


__all__ = ["JudgeCheck", "LLMInUse", "RunMetadata", "SuiteFingerprint"]
