"""The LLM side of a run: which scenarios need a simulated user or a judge, and both built once.

The engine sees only the :class:`~lkeval.run.attempt.Evaluator` protocol; this module
decides from the selected scenarios and the flags what must be configured, and checks the
credentials before any agent boots (a wrong key should cost seconds, not a suite).

Who gets judged: every scenario played by the simulated user (its ``agent_expectations`` are
the only criteria it has); scripted scenarios too when a judge model is configured explicitly;
``intent:`` checks and built-in judges always use the judge.

Replaying with no keys: in ``--cassette-mode replay`` every HTTP call of the agent, the caller
and the judge is answered from the cassettes, and a call they do not hold is answered locally
with an error (docs/replay.md): nothing reaches a provider. The clients still refuse to be
built without a key (lk-eval's credential check, the OpenAI SDK in the agent, LiveKit
Inference's token signing), so a key that is missing is filled with a :data:`PLACEHOLDER`, which
is no secret and never leaves the machine. A key that is set is left as it is. This is what
lets a CI failure be reproduced on a laptop with no keys, and a fork's pull request evaluate
what replays in full.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from lkeval.llm import preflight_cache
from lkeval.llm.config import (
    LLMConfigError,
    LLMOptions,
    LLMSpec,
    MissingCredentialsError,
    check_credentials,
    is_named,
    resolve_llm_spec,
)
from lkeval.llm.logs import route_livekit_logs
from lkeval.llm.placeholders import PLACEHOLDER
from lkeval.results.controls import KnownBad
from lkeval.results.model import JudgeCheck, LLMInUse, TranscriptItem, Usage, Verdict
from lkeval.run.collaborators import CallerBrokeRole, JudgingFailed
from lkeval.run.expectations import IntentJudge
from lkeval.scenarios.model import Scenario
from lkeval.text.untrusted import one_line


def _has_intent(scenario: Scenario) -> bool:
    return any(e.intent for t in scenario.turns for e in t.expect)


class LLMEvaluator:
    """Simulated callers and judges from configured models; LLM clients are made once per run
    (lazily, inside the run's event loop) and shared by all attempts."""

    def __init__(
        self,
        caller_spec: LLMSpec | None,
        judge_spec: LLMSpec | None,
        *,
        judge_scripted: bool,
        run_judges: Sequence[str] = (),
        rejudge: int = 0,
        maybe_is_pass: bool = False,
        allow_weak_judge: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.caller_spec = caller_spec
        self.judge_spec = judge_spec
        self.judge_scripted = judge_scripted
        self.run_judges = tuple(run_judges)
        self.rejudge = rejudge
        self.maybe_is_pass = maybe_is_pass
        self.allow_weak_judge = allow_weak_judge
        self._environ = environ
        self._llms: dict[str, Any] = {}
        #: ``lkeval dev``: keep the preflight's outcome between runs of the same judge
        #: (:mod:`lkeval.llm.preflight_cache`); ``lkeval run`` always asks.
        self.cache_preflight = False

    def _llm(self, spec: LLMSpec) -> Any:
        if spec.role not in self._llms:
            from lkeval.llm.client import build_llm

            self._llms[spec.role] = build_llm(spec, self._environ)
        return self._llms[spec.role]

    def llms_in_use(self) -> tuple[LLMInUse, ...]:
        """The caller's and the judge's model and host, for the results and the first lines."""
        specs = (s for s in (self.caller_spec, self.judge_spec) if s is not None)
        return tuple(LLMInUse(s.role, s.model, s.host) for s in specs)

    def prompts_digest(self) -> str:
        """A digest of the caller's and the judge's prompts: a cassette recorded with other
        prompts is not replayed (docs/replay.md)."""
        import hashlib

        from lkeval.llm import caller, judge_prompt

        texts = (caller._SYSTEM, *judge_prompt.prompt_texts())
        return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]

    def preflight(self, out: TextIO, suite_controls: Sequence[KnownBad] = ()) -> JudgeCheck | None:
        """Name the models in use on ``out``, then check the judge on its canaries.

        Runs before any agent boots. Raises
        :class:`lkeval.llm.preflight.JudgePreflightError` (exit 2) when the judge cannot
        produce a verdict or passes the known-bad canaries (unless ``--allow-weak-judge``); any
        other wrong canary verdict is printed as a warning and returned.
        """
        names = [f"{s.role} {s.model} at {s.host}" for s in self.llms_in_use()]
        print(one_line("LLMs: " + " · ".join(names)), file=out, flush=True)  # names from inputs
        if self.judge_spec is None:
            return None
        from lkeval.llm.preflight import preflight_judge, preflight_line

        key = self._preflight_key() if self.cache_preflight and not suite_controls else None
        check = preflight_cache.load_check(key) if key else None
        if check is not None:
            print("judge preflight: kept from an earlier run of this judge, which found:", file=out)
        else:
            check = preflight_judge(
                self.judge_spec,
                self._environ,
                maybe_is_pass=self.maybe_is_pass,
                allow_weak=self.allow_weak_judge,
                suite_controls=suite_controls,
            )
            if key:
                preflight_cache.save_check(key, check)
        print(preflight_line(check, self.maybe_is_pass), file=out, flush=True)
        if check.verdict_form == "json_schema":  # how this endpoint gives verdicts
            self.judge_spec = dataclasses.replace(self.judge_spec, verdict_form="json_schema")
        return check

    def _preflight_key(self) -> str:
        assert self.judge_spec is not None
        return preflight_cache.cache_key(
            self.judge_spec, self.prompts_digest(), self.maybe_is_pass, self.allow_weak_judge
        )

    def caller_for(self, scenario: Scenario) -> Any:
        """A fresh simulated caller, or None when this scenario has none to play."""
        if self.caller_spec is None or not scenario.plays_caller:
            return None
        from lkeval.llm.caller import SimulatedCaller

        return SimulatedCaller(self._llm(self.caller_spec), self.caller_spec, scenario.instructions)

    def intent_judge(self, usage: dict[str, Usage]) -> IntentJudge | None:
        """Judge scripted ``intent:`` checks, adding tokens to ``usage['judge']``."""
        spec = self.judge_spec
        if spec is None:
            return None

        async def judge(text: str, intent: str) -> tuple[bool, str]:
            from lkeval.llm.judge import judge_intent

            verdict, used = await judge_intent(self._llm(spec), spec, text, intent)
            usage["judge"] = usage.get("judge", Usage()) + used
            ok = verdict.verdict == "pass" or (verdict.verdict == "maybe" and self.maybe_is_pass)
            return ok, f"{verdict.verdict}: {verdict.reason}"

        return judge

    async def judge(
        self,
        scenario: Scenario,
        transcript: Sequence[TranscriptItem],
        usage: dict[str, Usage],
        agent_instructions: str | None = None,
    ) -> list[Verdict]:
        """The conversation judge (when it applies), the built-in judges asked for, and a
        ``caller`` flag when the simulated caller slipped (echoed the agent, sent JSON).

        A simulated caller that broke role (:mod:`lkeval.llm.caller_role`) raises
        :class:`~lkeval.run.collaborators.CallerBrokeRole` before any judge is asked.

        A judge that gives no verdict does not cost the others theirs: every judge is asked,
        and :class:`~lkeval.run.collaborators.JudgingFailed` carries the verdicts that were
        had (the attempt is an ``error`` that still shows them)."""
        flagged = self._caller_flags(scenario, transcript)
        spec = self.judge_spec
        if spec is None:
            return flagged
        from lkeval.llm.judge import judge_conversation

        def add(used: Usage) -> None:
            usage["judge"] = usage.get("judge", Usage()) + used

        verdicts: list[Verdict] = flagged
        failures: list[str] = []
        wants_main = scenario.plays_caller or self.judge_scripted
        if wants_main and scenario.agent_expectations.strip():
            try:
                verdict, used = await judge_conversation(
                    self._llm(spec),
                    spec,
                    transcript,
                    scenario.agent_expectations,
                    scenario.instructions,
                    rejudge=self.rejudge,
                )
            except Exception as exc:  # the built-in judges still get their say
                failures.append(str(exc))
            else:
                add(used)
                verdicts.append(verdict)
        names = list(dict.fromkeys((*self.run_judges, *scenario.judges)))
        more, failed = await self._builtin_verdicts(
            spec, names, transcript, agent_instructions, add
        )
        verdicts += more
        failures += failed
        if failures:
            raise JudgingFailed("; ".join(failures), verdicts)
        return verdicts

    def _caller_flags(
        self, scenario: Scenario, transcript: Sequence[TranscriptItem]
    ) -> list[Verdict]:
        """A ``caller`` flag when the simulated caller slipped; raises
        :class:`~lkeval.run.collaborators.CallerBrokeRole` when it broke role."""
        from lkeval.llm.caller_role import caller_flag, role_break

        if self.caller_spec is None or not scenario.plays_caller:
            return []
        first = 1 + scenario.scripted_turns
        if broke := role_break(transcript, first, scenario.instructions):
            raise CallerBrokeRole(broke)  # not the scenario's conversation: not judged
        return [f for f in [caller_flag(transcript, first)] if f is not None]

    async def _builtin_verdicts(
        self,
        spec: LLMSpec,
        names: list[str],
        transcript: Sequence[TranscriptItem],
        agent_instructions: str | None,
        add: Callable[[Usage], None],
    ) -> tuple[list[Verdict], list[str]]:
        """(verdicts, failures) of each built-in judge in ``names``. One call per judge, so
        one that fails does not take the others' verdicts with it."""
        from lkeval.llm.builtin_judges import run_builtin_judges

        outcomes = await asyncio.gather(
            *(
                run_builtin_judges(
                    [name],
                    self._llm(spec),
                    transcript,
                    spec=spec,
                    agent_instructions=agent_instructions,
                    on_usage=add,
                )
                for name in names
            ),
            return_exceptions=True,
        )
        verdicts: list[Verdict] = []
        failures: list[str] = []
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                failures.append(str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                verdicts.extend(outcome)
        return verdicts, failures

    async def judge_again(
        self, scenario: Scenario, transcript: Sequence[TranscriptItem], usage: dict[str, Usage]
    ) -> Verdict | None:
        """One more vote of the conversation judge on ``transcript`` (None when there is no
        such judge); the sequential test asks it where a vote would settle the scenario."""
        spec = self.judge_spec
        if spec is None or not scenario.agent_expectations.strip():
            return None
        from lkeval.llm.judge import judge_conversation

        verdict, used = await judge_conversation(
            self._llm(spec), spec, transcript, scenario.agent_expectations, scenario.instructions
        )
        usage["judge"] = usage.get("judge", Usage()) + used
        return verdict

    def passes(self, verdicts: Sequence[Verdict]) -> tuple[bool, str]:
        """AND of every verdict; ``maybe`` fails unless configured otherwise."""
        from lkeval.llm.judge import combine_verdicts

        return combine_verdicts(verdicts, self.maybe_is_pass)

    async def aclose(self) -> None:
        """Close the LLM clients made during the run."""
        for llm in self._llms.values():
            await llm.aclose()
        self._llms.clear()


def build_evaluator(
    options: LLMOptions,
    scenarios: Sequence[Scenario],
    environ: Mapping[str, str] | None = None,
) -> LLMEvaluator | None:
    """Configure what the selected scenarios need, checking credentials now.

    Raises :class:`lkeval.llm.config.LLMConfigError` (exit 2) before anything boots.
    """
    env = os.environ if environ is None else environ
    run_judges = options.judges
    judge_scripted = is_named("judge", options, env)
    want_caller = any(s.plays_caller for s in scenarios)
    want_judge = (
        want_caller
        or judge_scripted
        or bool(run_judges)
        or any(_has_intent(s) or s.judges for s in scenarios)
    )
    caller_spec = resolve_llm_spec("caller", options, env) if want_caller else None
    judge_spec = resolve_llm_spec("judge", options, env) if want_judge else None
    for spec in (caller_spec, judge_spec):
        if spec is not None:
            check_credentials(spec)
    if caller_spec is None and judge_spec is None:
        return None
    return LLMEvaluator(
        caller_spec,
        judge_spec,
        judge_scripted=judge_scripted,
        run_judges=run_judges,
        rejudge=options.rejudge,
        maybe_is_pass=options.maybe_is_pass,
        allow_weak_judge=options.allow_weak_judge,
        environ=environ,
    )


def missing_credentials(
    options: LLMOptions,
    scenarios: Sequence[Scenario],
    environ: Mapping[str, str] | None = None,
) -> MissingCredentialsError | None:
    """What keeps the caller or judge the selected scenarios need from running for want of a
    key (None: nothing); any other configuration error is left for the run to report."""
    try:
        build_evaluator(options, scenarios, environ)
    except MissingCredentialsError as exc:
        return exc
    except LLMConfigError:
        return None
    return None


def run_evaluator(
    options: LLMOptions, replaying: bool, selected: Sequence[Scenario], logs_dir: Path
) -> LLMEvaluator | None:
    """The run's evaluator for the selected scenarios (the suite's evaluator factory, with the
    options bound); credentials are checked now, before any boot. When ``replaying``, a key
    the caller or judge lacks is a placeholder; livekit's own log lines go to ``logs_dir``,
    not into the progress display."""
    environ = keyless_environ(options, selected) if replaying else None
    built = build_evaluator(options, selected, environ)
    if built is not None:
        route_livekit_logs(logs_dir / "livekit-in-lkeval.log")
    return built


def keyless_environ(
    options: LLMOptions,
    scenarios: Sequence[Scenario],
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``environ`` with a placeholder for each key the caller and judge lack.

    The models are resolved as without keys would resolve them, except that a spec asking for
    LiveKit Inference keeps it (its own variables are filled, not an OpenAI key): name the
    models as the recording run did (``--caller-model``, ``--judge-model``) and the cassettes
    match; a cassette recorded with other models is not replayed, and says so.
    """
    env = dict(os.environ if environ is None else environ)
    for _ in range(4):  # caller and judge, each at most a key and a secret
        try:
            build_evaluator(options, scenarios, env)
            return env
        except MissingCredentialsError as exc:
            wanted = [name for name in exc.variables if not env.get(name)]
            inference = [name for name in wanted if name.startswith("LIVEKIT_")]
            fill = inference or wanted[:1]
            if not fill:
                raise
            env.update(dict.fromkeys(fill, PLACEHOLDER))
    return env
