"""One ``lkeval run`` end to end: plan, checks, preflight, agents, engine, signals, results.

Everything that can be checked is checked before the first agent boots: the agent file, the
scenario files, ``--python``, the output paths (writable, and no other run writing into the
same results directory), the LLM credentials and the judge. The results file is then written
whatever happens after the first scenario starts: on success, on a gate failure, and on
SIGINT/SIGTERM (then with ``interrupted: true`` and the attempts that finished), so no result
is ever lost.

What it runs comes from :mod:`lkeval.run.plan` (the frozen settings and the plan built from
them). The suite owns the run's lifetime (the agent launcher, the raw-log directory, the signal
handlers, the orphan sweep) and receives what it does not decide as collaborators
(:class:`Collaborators`): the evaluator (LLMs), the progress display, the writers (results
file, reports, gate) and the launcher. The command line (:mod:`lkeval.cli.run`) parses the
flags, builds them and calls :meth:`Suite.run`; tests hand in their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from lkeval.agents.interface import Launcher
from lkeval.agents.launch import StartingLauncher
from lkeval.agents.orphans import adopt_orphans, kill_all_now
from lkeval.agents.process import AgentLaunch, publish_pending_logs
from lkeval.errors import ExitCode, LkevalError, OutputError, UsageError, is_internal
from lkeval.host.agent_host import SUPPORTED_RANGE
from lkeval.host.tape import Rules
from lkeval.replay.manifest import MANIFEST
from lkeval.replay.session import Cassettes, active
from lkeval.results.calibration import judge_error, unfit_reason
from lkeval.results.controls import KnownBad
from lkeval.results.model import (
    Attempt,
    JudgeCheck,
    RunMetadata,
    RunResults,
    ScenarioResult,
)
from lkeval.results.pricing import warm_price_table
from lkeval.results.wording import without_credentials
from lkeval.run.attempt import CONVERSATION_MODE
from lkeval.run.collaborators import RunEvaluator
from lkeval.run.early_start import LaunchKey
from lkeval.run.engine import (
    AttemptRunner,
    Engine,
)
from lkeval.run.interrupt import Interrupted, RunSignals
from lkeval.run.patches_line import PatchesLine
from lkeval.run.plan import (
    Plan,
    SuiteSettings,
    build_plan,
    cassette_rules,
    check_python,
    open_cassettes,
)
from lkeval.run.play import (
    attempt_settings,
    build_engine,
    for_launcher,
    memory_plan,
    play,
    write_start_lines,
)
from lkeval.run.run_metadata import RunFacts, run_metadata
from lkeval.run.speech import RunSpeech
from lkeval.run.suite_launch import agent_launch, begin_run_launcher, run_launch_key
from lkeval.run.suite_parts import Collaborators, LauncherOpener, Writers
from lkeval.scenarios.model import Scenario
from lkeval.startup import paused_collections
from lkeval.text.masking import mask_results
from lkeval.text.untrusted import inert_line, one_line

SUPPORTED_LIVEKIT_AGENTS = SUPPORTED_RANGE
"""The livekit-agents versions an agent may use (checked by the agent host at boot)."""


class Suite:
    """One run; construct with its settings and collaborators, then :meth:`run`."""

    def __init__(self, settings: SuiteSettings, collaborators: Collaborators, out: TextIO) -> None:
        self.settings = settings
        self.parts = collaborators
        self.out = out
        self.plan: Plan | None = None
        """Set once the scenarios are loaded (an interrupted run reports from it)."""
        self._signals = RunSignals(on_second=kill_all_now)
        self._clock = (dt.datetime.now(dt.timezone.utc), time.monotonic())
        self._evaluator: RunEvaluator | None = None
        self._judge_check: JudgeCheck | None = None
        self._cassettes: Cassettes | None = None
        self._conversation_mode = CONVERSATION_MODE
        self._speech_conditions = ""
        self._engine: Engine | None = None  # the one playing, for what it has after a bug
        self._writing = False  # the results are being (or were) written

    def run(self) -> int:
        """The whole run; returns the exit code (errors go to the CLI boundary).

        SIGINT and SIGTERM are the run's from its first line to its last
        (:class:`~lkeval.run.interrupt.RunSignals`): whatever phase they come in, every
        scenario not played is reported "not run (interrupted)" and the exit is 130/143.
        """
        with RunSignals(on_second=kill_all_now) as signals:
            self._signals = signals
            # one that came while lk-eval was importing: acted on once the scenarios are known
            signals.received = self.parts.early.take_signal()
            self._clock = (dt.datetime.now(dt.timezone.utc), time.monotonic())
            try:
                return self._run()
            except Interrupted as exc:
                return self._interrupted(exc.signal)
            except Exception as exc:
                if is_internal(exc):  # a bug: what the run has is written all the same
                    self._write_what_it_has()
                raise
            finally:
                with signals.deferred():
                    self.parts.early.discard()  # a fork server this run did not take

    def _run(self) -> int:
        settings, parts = self.settings, self.parts
        with self._signals.deferred():  # files only: a signal finds the scenarios known
            plan = self.plan = self._load_plan()
        self._signals.check()  # a signal while lk-eval imported: every scenario "not run"
        if self.parts.agents is None:  # in-process: the agent already imported here
            check_python(plan, settings.python)
        parts.writers.check_writable(
            [
                settings.results_path,
                settings.logs_dir / "fork-server.log",
                *map(Path, settings.report_paths),
                *_cassettes_written(settings),
            ]
        )
        # one run per results directory, held before anything costs (the judge preflight)
        with parts.writers.lock(settings.results_path.parent):
            return self._run_held(plan)

    def _load_plan(self) -> Plan:
        settings = self.settings
        return build_plan(settings.agent, settings.scenario_files, settings.engine, settings.shard)

    def _run_held(self, plan: Plan) -> int:
        """The run once its results directory is held: an empty shard, or the agents."""
        settings = self.settings
        if not plan.selected:  # check_selection: the suite has some, so this shard has none
            return self._empty_shard(plan)
        adopt_orphans()  # what a crashed agent leaves behind comes to us, stopped at the end
        # a bad rules file is exit 2 before anything runs; None: record/replay is off
        rules = cassette_rules(settings.cassettes, settings.cassette_rules)
        # Agents (and the fork server) write their raw logs in a private (0700) directory,
        # never into the results dir: logs/ only gets masked copies. A SIGKILL of lk-eval
        # leaves it behind.
        raw_logs: Path | None = None
        starting: StartingLauncher | None = None
        try:
            # the fork server preloads while the checks below and the judge preflight run;
            # whatever stops the run before its first agent kills it (nothing boots)
            with self._signals.deferred():  # both are ours to remove, whatever comes
                raw_logs, starting = self._begin_launcher()
            self._signals.check()
            return self._check_and_execute(plan, rules, starting, raw_logs)
        finally:
            with self._signals.deferred():
                if starting is not None:
                    starting.cancel()  # nothing to do once the engine took the launcher
                if raw_logs is not None:
                    shutil.rmtree(raw_logs, ignore_errors=True)

    def _check_and_execute(
        self, plan: Plan, rules: Rules | None, starting: StartingLauncher, raw_logs: Path
    ) -> int:
        """The checks that need the network (baseline, credentials, the judge preflight),
        then the engine and the results."""
        settings, parts = self.settings, self.parts
        options = settings.engine
        # a bad baseline is exit 2 now, not after the run; its judge calibrations go to the
        # stopping rule (lkeval.results.calibration)
        calibrated = parts.writers.check_baseline()
        with paused_collections():  # the LLM stack's import, ~15% faster (lkeval.startup)
            evaluator = self._evaluator = parts.evaluator(plan.selected, settings.logs_dir)
            if rules is not None:
                # the agents' tapes: private, like raw logs
                self._cassettes = open_cassettes(settings, rules, evaluator, raw_logs)
            # the first lines name the caller and judge; one that cannot give a verdict stops
            controls = parts.writers.known_bad_controls(plan.selected, calibrated)
            judge_check = self._preflight(evaluator, controls)
        self._signals.check()  # a signal the preflight's code absorbed still ends the run
        self._judge_check = judge_check
        unchecked = nothing_to_check(plan.selected, evaluator)
        plan = dataclasses.replace(
            plan,
            engine_options=dataclasses.replace(
                options,
                nothing_to_check=unchecked,
                judge_errors={sid: (d, judge_error(c)) for sid, (d, c) in calibrated.items()},
                unfit_judges={
                    sid: (d, why)
                    for sid, (d, c) in calibrated.items()
                    if (why := unfit_reason(c)) is not None
                },
                allow_weak_judge=evaluator is not None and evaluator.allow_weak_judge,
            ),
        )
        self._clock = (dt.datetime.now(dt.timezone.utc), time.monotonic())
        scenario_results, stopped_by = self.execute(plan, evaluator, starting, raw_logs)
        return self._write_and_finish(self._results(scenario_results, stopped_by), stopped_by)

    def _preflight(
        self, evaluator: RunEvaluator | None, controls: Sequence[KnownBad] = ()
    ) -> JudgeCheck | None:
        """The judge preflight (the suite's own known-bad controls first, where a calibration
        is in force); with cassettes, from (or into) the run's preflight cassette."""
        if evaluator is None:
            return None
        if self._cassettes is None:
            return evaluator.preflight(self.out, controls)
        tapes = self._cassettes.preflight()
        with active(tapes):
            check = evaluator.preflight(self.out, controls)
        done = tapes.finish(Attempt(status="passed"))  # writes it when it was recorded
        if done.status == "error":  # a cassette that could not be written, said
            self.out.write(f"lk-eval: judge preflight: {inert_line(done.reason)}\n")
        return check

    def _results(
        self, scenario_results: list[ScenarioResult], stopped_by: signal.Signals | None
    ) -> RunResults:
        """The results file's content, masked once."""
        evaluator = self._evaluator
        metadata = dataclasses.replace(
            self.metadata(scenario_results, stopped_by),
            llms=evaluator.llms_in_use() if evaluator is not None else (),
            judge_check=self._judge_check,
        )
        results = RunResults(metadata, tuple(scenario_results))
        if self.settings.no_credentials:
            results = without_credentials(results)
        return mask_results(results)

    def _interrupted(self, sig: signal.Signals) -> int:
        """A signal before the engine ran (loading, preflight, the fork server's start): every
        scenario "not run (interrupted)", the results and reports written all the same."""
        # A fork server cut short inside Popen, before its pid was known, is still our child:
        # the sweep stops it now, not when its own start times out.
        kill_all_now()
        with self._signals.deferred():
            self.parts.early.discard()  # started before the imports, not taken: stopped now
        if self.plan is None:  # came in the few lines before the plan: load it now
            with contextlib.suppress(LkevalError), self._signals.deferred():
                self.plan = self._load_plan()
        if self.plan is None:  # the scenarios are bad as well: nothing to report on
            print(f"lk-eval: interrupted by {sig.name} before the scenarios were loaded")
            return ExitCode.for_signal(sig)
        engine = Engine(_no_attempts, _Silent(), self.plan.engine_options)
        scenario_results = engine.not_run(self.plan.scenarios)
        with self.parts.writers.lock(self.settings.results_path.parent):
            return self._write_and_finish(self._results(scenario_results, sig), sig)

    def _write_what_it_has(self) -> None:
        """An exception that is a bug in lk-eval stopped the run: the results, reports and
        gate line are still written, with what finished and every other scenario "not run
        (interrupted)", marked interrupted so they can never pass. The boundary then says it
        is a bug (exit 4). Nothing when the scenarios were not loaded, or when the writing
        itself is what failed; a second failure here is dropped for the first one."""
        if self.plan is None or self._writing:
            return
        with self._signals.deferred():
            kill_all_now()  # whatever the failing phase left running
        engine = self._engine
        if engine is not None:
            scenario_results = engine.results(interrupted=True)
        else:
            engine = Engine(_no_attempts, _Silent(), self.plan.engine_options)
            scenario_results = engine.not_run(self.plan.scenarios)
        with contextlib.suppress(Exception), self._signals.deferred():
            results = self._results(scenario_results, None)
            results = dataclasses.replace(
                results, metadata=dataclasses.replace(results.metadata, interrupted=True)
            )
            with self.parts.writers.lock(self.settings.results_path.parent):
                self._write_and_finish(results, None)
            self.out.flush()

    def _empty_shard(self, plan: Plan) -> int:
        """More shards than scenarios: this shard writes results that say it is empty, boots
        nothing, and passes; the merge of every shard's results is what is gated."""
        why = plan.engine_options.selection.not_selected
        scenarios = [ScenarioResult.of(s, "skipped", why) for s in plan.scenarios]
        metadata = dataclasses.replace(self.metadata(scenarios, None), empty_shard=True)
        results = RunResults(metadata, tuple(scenarios))
        return self._write_and_finish(mask_results(results), None)

    def _write_and_finish(self, results: RunResults, stopped_by: signal.Signals | None) -> int:
        """Write the results file, then the reports and the gate; a write error is raised
        last."""
        path = self.settings.results_path
        self._writing = True
        failure: OutputError | None = None
        try:
            with self._signals.deferred():  # a results file is written whole or not at all
                self.parts.writers.write_results(path, results)  # masked by the caller
            self.out.write(one_line(f"results: {path}") + "\n")
        except OutputError as exc:  # the reports below are still written
            failure = exc
        self.out.write(one_line(f"logs: {self.settings.logs_dir}") + "\n")
        stopped_by = stopped_by or self._signals.received
        exit_code: int = ExitCode.USAGE
        try:
            exit_code = self.parts.writers.finish(results, path, stopped_by is not None)
        except OutputError as exc:  # a full disk is exit 2 naming each file, never exit 4
            if failure is None:
                raise
            print(one_line(f"lk-eval: {exc}"), file=sys.stderr)
        except Interrupted as exc:  # publishing cut short: the files above are written
            stopped_by = exc.signal
        if failure is not None:
            raise failure
        if stopped_by is not None:
            print(
                f"lk-eval: interrupted by {stopped_by.name}; partial results written",
                file=sys.stderr,
            )
            return ExitCode.for_signal(stopped_by)
        return exit_code

    def _begin_launcher(self) -> tuple[Path, StartingLauncher]:
        """The run's raw-log directory and its launcher, started without waiting."""
        return begin_run_launcher(self.settings, self.parts.early, self.parts.launcher)

    def launch_key(self) -> LaunchKey:
        """What this run's fork server is started with (interpreter, environment, agent)."""
        return run_launch_key(self.settings)

    def execute(
        self,
        plan: Plan,
        evaluator: RunEvaluator | None,
        starting: StartingLauncher,
        raw_logs: Path,
    ) -> tuple[list[ScenarioResult], signal.Signals | None]:
        """Take the launcher once it is ready, run the engine until done or a signal;
        (results, signal). The launcher is closed and the agents' logs published (masked)
        before this returns."""
        launcher: Launcher | None = None
        try:
            if starting.pending():  # this core idles until the fork server has preloaded:
                warm_price_table()  # the table's import then holds no conversation up
            launcher, start_line = starting.result()
            launch = agent_launch(self.settings)
            return self._run_engine(plan, evaluator, launch, launcher, start_line, raw_logs)
        finally:
            with self._signals.deferred():  # the clean-up runs to its end whatever comes
                if launcher is not None:
                    launcher.close()
                # Agents killed on an interrupt: their logs are masked here, or never
                # reach logs/ (the fork server's too).
                publish_pending_logs(raw_logs, self.settings.logs_dir)

    def _run_engine(
        self,
        plan: Plan,
        evaluator: RunEvaluator | None,
        launch: AgentLaunch,
        launcher: Launcher,
        start_line: str,
        raw_logs: Path,
    ) -> tuple[list[ScenarioResult], signal.Signals | None]:
        """Show the start mode, then run the engine with the run's launcher (or the agents
        the run was handed: ``lkeval dev``'s in-process ones, no agent process to bound)."""
        agents = self.parts.agents
        memory = memory_plan() if agents is None else None
        start_line = str(getattr(agents, "start_line", start_line))
        write_start_lines(self.out, start_line, memory, plan)
        launch = dataclasses.replace(launch, launcher=launcher)
        speech = self._speech(plan)
        settings = attempt_settings(self.settings, launch, raw_logs, self._cassettes, speech)
        if agents is not None:
            settings = dataclasses.replace(settings, agents=agents)
        plan = for_launcher(plan, launcher, self.settings.concurrency_given)
        progress = PatchesLine(self.parts.progress(len(plan.selected)), self.out)
        engine = self._engine = build_engine(plan, settings, evaluator, progress, memory)
        # a signal cancels the play: what finished is kept, every agent stopped
        played = self._signals.run_until_signal(
            lambda: play(engine, plan.scenarios, speech, evaluator),
            lambda: engine.results(interrupted=True),
        )
        if self._cassettes is not None:  # what this run vouches for (lkeval.replay.manifest)
            problem = self._cassettes.write_manifest()
            if problem:
                self.out.write(f"lk-eval: {inert_line(problem)}\n")
        if memory is not None and memory.summary():
            self.out.write(memory.summary() + "\n")
        return played, self._signals.received

    def _speech(self, plan: Plan) -> RunSpeech | None:
        """The run's speech (voice, local speech server) when a selected scenario plays audio."""
        settings = self.settings
        if not any(s.plays_audio(settings.mode) for s in plan.selected):
            return None
        audio = all(s.plays_audio(settings.mode) for s in plan.selected)
        self._conversation_mode = "audio" if audio else "mixed"
        env = {**os.environ, **dict(settings.env)}
        speech = RunSpeech(settings.speech, settings.voice, env, settings.impair, settings.listen)
        self._speech_conditions = speech.conditions
        return speech

    def metadata(
        self, scenario_results: list[ScenarioResult], stopped_by: signal.Signals | None
    ) -> RunMetadata:
        """The run's facts for the results file (argv with secrets redacted)."""
        started_at, started = self._clock
        facts = RunFacts(
            started_at,
            started,
            self.parts.commit(),
            self._conversation_mode,
            self._speech_conditions,
            self.plan,
        )
        return run_metadata(self.settings, facts, scenario_results, stopped_by)


def _no_attempts(scenario: Scenario, attempt_no: int) -> AttemptRunner:
    raise AssertionError("an interrupted run starts no attempt")


class _Silent:
    """No progress lines: a run interrupted before its first boot has none to show."""

    def scenario_started(self, scenario_id: str, label: str) -> None:
        pass

    def scenario_finished(self, result: ScenarioResult) -> None:
        pass


def _cassettes_written(settings: SuiteSettings) -> list[Path]:
    """``--cassettes DIR``'s manifest when the run may write there (``auto``, ``record``): a
    ``DIR`` that is a regular file, or cannot be written, is exit 2 before any agent boots."""
    if settings.cassettes is None:
        return []
    if settings.cassettes.exists() and not settings.cassettes.is_dir():
        raise UsageError(f"--cassettes {settings.cassettes}: is not a directory")
    return [] if settings.cassette_mode == "replay" else [settings.cassettes / MANIFEST]


def nothing_to_check(selected: list[Scenario], evaluator: RunEvaluator | None) -> dict[str, str]:
    """Scenario id -> why it has nothing to check, with the judges this run configured (such
    a scenario is skipped before anything plays, never passed; ``lkeval dev`` and the
    in-process player decide it the same way)."""
    judge_scripted = evaluator is not None and evaluator.judge_scripted
    run_judges = evaluator.run_judges if evaluator is not None else ()
    found = {}
    for scenario in selected:
        why = scenario.nothing_to_check(judge_scripted=judge_scripted, run_judges=run_judges)
        if why is not None:
            found[scenario.id] = why
    return found


__all__ = [
    "SUPPORTED_LIVEKIT_AGENTS",
    "Collaborators",
    "LauncherOpener",
    "Suite",
    "Writers",
    "nothing_to_check",
]
