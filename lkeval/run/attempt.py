"""One attempt of one scenario: boot its agent, converse, check, judge, finalize, stop.

Every way an attempt can go wrong ends as an :class:`~lkeval.results.model.Attempt` with a
status and a reason (the rules are in :mod:`lkeval.run.outcome`); nothing here raises to the
engine except cancellation (Ctrl-C), and even then the agent process is stopped on the way out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lkeval.agents.process import AgentFailure
from lkeval.agents.protocol import ProtocolError, SessionConnection
from lkeval.agents.session_agent import SessionAgent
from lkeval.audio import SpeechError
from lkeval.replay.session import AttemptTapes, active
from lkeval.results.model import (
    NOT_RUN_INTERRUPTED,
    Attempt,
    AudioCallRecord,
    ExpectationResult,
    TranscriptItem,
    TurnMetrics,
    Usage,
    Verdict,
)
from lkeval.run.attempt_inputs import CONVERSATION_MODE, RunSettings, dispatch_json
from lkeval.run.attempt_verdicts import agent_check_text, all_pass, verdicts_of
from lkeval.run.audio_turns import AudioCall
from lkeval.run.call_files import write_call
from lkeval.run.collaborators import (
    Caller,
    CallerTurnLike,
    Evaluator,
    Slot,
)
from lkeval.run.conversation import AgentEndedSession, Conversation, TurnFailed
from lkeval.run.expectations import check_turn
from lkeval.run.outcome import (
    agent_error_text,
    caller_turns,
    decide,
    has_assistant_message,
    no_conversation,
    with_agent_text,
)
from lkeval.scenarios.model import Scenario, Turn, mock_tools_wire
from lkeval.text.file_names import attempt_stem


class AttemptError(Exception):
    """An infrastructure fault that makes the attempt an ``error`` result."""


@dataclass
class _AttemptState:
    transcript: list[TranscriptItem] = field(default_factory=list)
    expectations: list[ExpectationResult] = field(default_factory=list)
    turn_seconds: list[float] = field(default_factory=list)
    turns: list[TurnMetrics] = field(default_factory=list)
    usage: dict[str, Usage] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    end_reason: str = ""
    agent_check: str = ""


class ScenarioAttempt:
    """Runs one attempt; construct, then ``await run()``."""

    def __init__(
        self,
        scenario: Scenario,
        settings: RunSettings,
        evaluator: Evaluator | None,
        run_id: str,
        attempt_no: int,
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.evaluator = evaluator
        self.run_id = run_id
        self.attempt_no = attempt_no
        self.job_id = f"{scenario.id}#{attempt_no}"
        self.log_path = settings.logs_dir / f"{attempt_stem(scenario.id, attempt_no)}.log"
        self.p = _AttemptState()
        self.interrupted: Attempt | None = None
        # The agent's own failure, when the attempt ended in one (for --max-errors), and who
        # is told of it as soon as the attempt is decided, before its slot is given back, so
        # a systemic failure stops the next boot (lkeval.run.systemic.ErrorBrake.record).
        self.agent_cause: str | None = None
        self.on_decided: Callable[[str | None], None] | None = None
        self.caller: Caller | None = None
        self.tapes: AttemptTapes | None = None
        self.audio = scenario.plays_audio(settings.mode)
        self.call: AudioCall | None = None  # the microphone and speaker of an audio attempt

    async def run(self, slot: Slot | None = None) -> Attempt:
        """Run the attempt to a result; with cassettes, replayed or recorded (docs/replay.md).

        A replay miss makes the attempt an error whatever its conversation did (an agent that
        swallowed the refused call cannot pass), and a cassette that cannot be replayed in
        ``--cassette-mode replay`` is one before any agent boots.
        """
        cassettes = self.settings.cassettes
        if cassettes is None:
            return await self._run(slot)
        tapes = self.tapes = cassettes.open(self.scenario.id, self.attempt_no)
        decided, self.on_decided = self.on_decided, None  # told once, after a re-run
        try:
            if tapes.refused and tapes.mode == "replay":
                return tapes.finish(Attempt(status="error"))
            held = _HeldSlot(slot) if slot is not None else None
            attempt = await self._taped(tapes, held)
            if tapes.rerun:  # diverged after the recording decided: nothing of it is kept
                tapes.discard()
                self.p, self.agent_cause = _AttemptState(), None
                tapes = self.tapes = cassettes.open(self.scenario.id, self.attempt_no, tapes.rerun)
                attempt = await self._taped(tapes, held)
            if decided is not None:
                decided(self.agent_cause)
            return attempt
        except asyncio.CancelledError:
            if self.interrupted is not None and self.interrupted.status in ("passed", "failed"):
                # decided, then cancelled while its agent stopped: its replay was not checked
                # (a miss makes an error), so the verdict is not kept as it stands
                why = "interrupted while its agent stopped: its replay was not checked"
                self.interrupted = dataclasses.replace(self.interrupted, status="error", reason=why)
            raise
        finally:
            tapes.discard()
            if slot is not None:
                slot.release()

    async def _taped(self, tapes: AttemptTapes, slot: Slot | None) -> Attempt:
        with active(tapes):
            attempt = await self._run(slot, tapes.agent_env())
        return tapes.finish(attempt)

    @property
    def turn_timeout(self) -> float:
        return self.scenario.limits.turn_timeout or self.settings.turn_timeout

    async def _run(self, slot: Slot | None, agent_env: dict[str, str] | None = None) -> Attempt:
        """Run the attempt to a result; cancellation still stops the agent.

        With a ``slot``, the agent boots first and the conversation waits for its turn, so a
        boot overlaps other scenarios' conversations instead of queueing behind them.
        """
        started = time.monotonic()
        agent = self._agent_process(agent_env)
        if isinstance(agent, Attempt):  # it cannot run: skipped, or an error saying why
            return agent
        rig = self.settings.audio if self.audio else None
        conn: SessionConnection | None = None
        conversing = cancelled = False
        opened: list[float] = []  # when the conversation slot opened
        decided: Attempt | None = None  # the result, once there is one

        async def converse() -> None:
            if slot is not None:
                await slot.converse()
            opened.append(time.monotonic())

        try:
            boot_timeout = self.scenario.limits.boot_timeout or self.settings.boot_timeout
            try:
                # The agent is prepared now; its session starts only once the slot opens.
                conn = await agent.start(boot_timeout, converse if slot else None)
            except AgentFailure as exc:
                self.agent_cause = exc.reason
                # the wait for the conversation slot is not the scenario's time
                began = opened[0] if opened else started
                decided = self._attempt("error", exc.reason, began, agent, exc.log_tail)
                return decided
            conv = Conversation(conn, agent, self.turn_timeout)
            if rig is not None:  # the microphone is live from the first moment of the call
                self.call = AudioCall(conv, rig.audio_settings(self.job_id, self.scenario.impair))
            if slot is not None:
                started = time.monotonic()  # the wait for a slot is not the scenario's time
            conversing = True
            decided = await self._converse(conv, agent, started)
            return decided
        except asyncio.CancelledError:
            # Ctrl-C / SIGTERM: keep what this attempt saw so far for the partial results
            self._keep_interrupted(conv if conversing else None, agent, started)
            cancelled = True
            raise
        finally:
            if not cancelled and self.on_decided is not None:
                self.on_decided(self.agent_cause)
            if slot is not None:
                slot.release()
            try:
                await self._hang_up(agent, conn)
            except asyncio.CancelledError:
                # Ctrl-C / SIGTERM while the agent stopped: a result decided before it is kept
                # for the partial results, not lost to the cancellation
                if decided is not None and self.interrupted is None:
                    self.interrupted = decided
                raise

    async def _hang_up(self, agent: SessionAgent, conn: SessionConnection | None) -> None:
        """The call, the session and the agent closed, in that order."""
        if self.call is not None:
            await self.call.close()
        if conn is not None:
            await conn.close()
        await agent.stop(self.settings.stop_grace)  # finishes even if cancelled again

    def _agent_process(self, agent_env: dict[str, str] | None) -> SessionAgent | Attempt:
        """The attempt's agent, not started yet; the attempt itself when it cannot run (no
        simulated user for a scenario that needs one, audio without the run's speech)."""
        self.caller = self.evaluator.caller_for(self.scenario) if self.evaluator else None
        if not self.scenario.turns and self.caller is None:
            reason = "needs a simulated user: set --caller-model (and --judge-model)"
            return Attempt(status="skipped", reason=reason)
        dispatch = dispatch_json(self.scenario, self.run_id, self.job_id, self.audio)
        mocks = mock_tools_wire(self.scenario.mock_tools)
        rig = self.settings.audio if self.audio else None
        if self.audio and rig is None:
            return Attempt(status="error", reason="audio mode needs the run's speech (--speech)")
        if rig is not None:
            agent_env = {**rig.agent_env(self.job_id), **(agent_env or {})}
        return self.settings.agents(self.settings.launch, dispatch, self.log_path, mocks, agent_env)

    def _keep_interrupted(
        self, conv: Conversation | None, agent: SessionAgent, started: float
    ) -> None:
        """What an interrupted attempt saw so far, for the partial results; one whose
        conversation never began (``conv`` None) did not run: its agent only booted."""
        if conv is not None:
            self.p.transcript.extend(conv.take_partial())
            self.interrupted = self._attempt(
                "error", "interrupted", started, agent, agent.log_tail()
            )
        else:
            self.interrupted = Attempt(status="skipped", reason=NOT_RUN_INTERRUPTED)

    async def _converse(self, conv: Conversation, agent: SessionAgent, started: float) -> Attempt:
        p = self.p
        try:
            greeting, note = await conv.wait_for_greeting(self.turn_timeout)
            p.transcript.extend(greeting)
            if note:
                p.notes.append(note)
            await self._scripted_turns(conv)
            await self._simulated_turns(conv)
        except AgentEndedSession as exc:
            p.transcript.extend(conv.take_partial())
            p.end_reason = str(exc)
            return self._ended_early(conv, agent, started, str(exc))
        except AgentFailure as exc:
            p.transcript.extend(conv.take_partial())
            reason = self.agent_cause = self._agent_reason(exc.reason, conv, agent)
            return self._attempt("error", reason, started, agent, exc.log_tail)
        except (ProtocolError, AttemptError) as exc:
            if isinstance(exc, TurnFailed):
                p.transcript.extend(exc.items)
            reason = self._agent_reason(str(exc), conv, agent)
            if isinstance(exc, ProtocolError):
                self.agent_cause = reason
            await self._finalize(conv, False, reason)  # lets the agent clean up; not a verdict
            return self._decided([], False, "", [reason], started, agent, agent.log_tail())
        silent = no_conversation(p.transcript, p.expectations, self._unplayed_turns(), p.end_reason)
        if silent:
            reason = self.agent_cause = self._agent_reason(silent, conv, agent)
            await self._finalize(conv, False, reason)
            return self._attempt("error", reason, started, agent, agent.log_tail())
        if self.call is not None:  # --listen: what a caller heard, once the call is over
            try:
                p.turns = await self.call.listened(p.turns)
            except SpeechError as exc:
                await self._finalize(conv, False, str(exc))
                return self._attempt("error", str(exc), started, agent, agent.log_tail())
        return await self._judge_and_finalize(conv, agent, started)

    def _agent_reason(self, reason: str, conv: Conversation, agent: SessionAgent) -> str:
        return with_agent_text(reason, agent_error_text(conv.errors, agent.log_tail(400)))

    def _ended_early(
        self, conv: Conversation, agent: SessionAgent, started: float, ended: str
    ) -> Attempt:
        """The agent hung up or its session closed: its own verdict can no longer be asked,
        so the attempt cannot pass; before the caller's first turn it is no conversation."""
        p = self.p
        if not caller_turns(p.transcript):
            reason = f"{ended} before the caller's first turn"
        else:
            reason = self._unasked(ended)
            remaining = self._unplayed_turns()
            if remaining:
                reason += f"; {remaining} scripted turn(s) never played"
        reason = self.agent_cause = self._agent_reason(reason, conv, agent)
        return self._decided([], False, "", [reason], started, agent, agent.log_tail())

    def _unplayed_turns(self) -> int:
        played = {i.turn for i in self.p.transcript if i.kind == "message" and i.role == "user"}
        return max(0, self.scenario.scripted_turns - len(played))

    async def _scripted_turns(self, conv: Conversation) -> None:
        p = self.p
        intent_judge = self.evaluator.intent_judge(p.usage) if self.evaluator else None
        turn_no = 0
        turns = self.scenario.turns
        for index, turn in enumerate(turns):
            if turn.user is None:  # checks on the greeting
                items = [i for i in p.transcript if i.turn == 0]
            else:
                turn_no += 1
                following = turns[index + 1] if index + 1 < len(turns) else None
                items, seconds = await self._play(conv, turn_no, turn, following)
                p.transcript.extend(items)
                p.turn_seconds.append(seconds)
                self._measured(conv.last_metrics)
            metrics = conv.last_metrics if turn.user is not None else None
            try:
                p.expectations.extend(await check_turn(turn_no, turn, items, intent_judge, metrics))
            except Exception as exc:  # an intent judge whose LLM failed
                raise AttemptError(f"turn {turn_no}: intent check failed: {exc}") from exc
        if self.scenario.turns:
            p.end_reason = "scripted turns done"

    async def _play(
        self, conv: Conversation, turn_no: int, turn: Turn, following: Turn | None
    ) -> tuple[list[TranscriptItem], float]:
        """One scripted turn, typed or spoken (``mode:``); a spoken one whose next turn
        interrupts ends that far into the agent's reply, and the next one cuts in."""
        assert turn.user is not None
        if self.call is None or self.scenario.turn_mode(turn, self.settings.mode) == "text":
            return await conv.turn(turn_no, turn.user)
        leave = following.interrupt_after if following is not None else None
        cut_in = turn.interrupt_after is not None
        return await self.call.turn(turn_no, turn.user, cut_in=cut_in, leave_after=leave)

    def _measured(self, metrics: TurnMetrics | None) -> None:
        """Keep a turn's metrics, marked replayed when every agent call so far came from the
        cassette (then they time the replay, not the agent's models)."""
        if metrics is None:
            return
        if self.tapes is not None and self.tapes.agent_replaying():
            metrics = dataclasses.replace(metrics, replayed=True)
        self.p.turns.append(metrics)

    async def _simulated_turns(self, conv: Conversation) -> None:
        p = self.p
        if not self.scenario.plays_caller:
            return
        caller = self.caller
        if caller is None:
            return
        max_turns = self.scenario.limits.max_turns or self.settings.max_turns
        turn_no = self.scenario.scripted_turns
        silent = 0
        cut_in = False  # the caller's line cuts into the agent's reply (caller_interrupt_after)
        while True:
            if turn_no >= max_turns:
                p.end_reason = f"max turns reached ({max_turns})"
                return
            try:
                said = await caller.next_message(caller_view(p.transcript))
            except Exception as exc:
                raise AttemptError(f"simulated user failed: {exc}") from exc
            _add_usage(p.usage, "caller", said.usage)
            if said.text:
                turn_no += 1
                if self.call is not None:
                    items, seconds = await self._speak(turn_no, said.text, said.ended, cut_in)
                    cut_in = self.scenario.caller_interrupt_after is not None and not said.ended
                else:
                    items, seconds = await conv.turn(turn_no, said.text)
                p.transcript.extend(items)
                p.turn_seconds.append(seconds)
                self._measured(conv.last_metrics)
                silent = 0 if self._answered(items, conv) else silent + 1
                if silent >= self.settings.max_silent_turns:
                    p.end_reason = f"the agent stayed silent for {silent} turn(s) in a row"
                    return
            if said.ended or not said.text:
                p.end_reason = f"the simulated user ended the call: {said.reason}".rstrip(": ")
                return

    async def _speak(
        self, turn_no: int, text: str, last: bool, cut_in: bool
    ) -> tuple[list[TranscriptItem], float]:
        """A simulated caller's spoken line; with ``caller_interrupt_after``, the turn ends
        that far into the agent's reply (unless the caller is hanging up), and the next line
        is spoken as soon as the caller has it, cutting in."""
        assert self.call is not None
        after = self.scenario.caller_interrupt_after
        leave = None if last else after
        return await self.call.turn(turn_no, text, cut_in=cut_in, leave_after=leave)

    def _answered(self, items: list[TranscriptItem], conv: Conversation) -> bool:
        """The agent answered the turn: a message, or (a turn left mid-reply, whose message
        comes with the next) its audio."""
        if has_assistant_message(items):
            return True
        metrics = conv.last_metrics
        return self.call is not None and metrics is not None and metrics.first_audio_ms is not None

    async def _judge_and_finalize(
        self, conv: Conversation, agent: SessionAgent, started: float
    ) -> Attempt:
        p = self.p
        verdicts, faults = await verdicts_of(
            self.evaluator, self.scenario, p.transcript, p.expectations, p.usage, conv
        )
        ok, reason = self.evaluator.passes(verdicts) if self.evaluator else all_pass(verdicts)
        ok = ok and not faults
        agent_verdict, final_error = await self._finalize(conv, ok, reason or "; ".join(faults))
        if final_error:
            faults.append(final_error)
        usage = await conv.usage(self.settings.prices)
        if usage is not None:
            _add_usage(p.usage, "agent", usage)
        if agent_verdict is not None:
            verdicts.append(agent_verdict)
            if agent_verdict.verdict == "fail":
                ok = False
                reason = "; ".join(x for x in (reason, f"agent veto: {agent_verdict.reason}") if x)
        return self._decided(verdicts, ok, reason, faults, started, agent, ())

    async def _finalize(
        self, conv: Conversation, ok: bool, reason: str
    ) -> tuple[Verdict | None, str]:
        """Ask the agent for its own verdict: (its veto or None, why it could not be had)."""
        verdict, error = (None, "")
        if conv.conn.closed_reason is None:
            verdict, error = await conv.finalize(ok, reason)
        if conv.conn.closed_reason is not None:  # before or while asking: the same outcome
            ended = f"the agent ended the session ({conv.conn.closed_reason})"
            unasked = self._unasked(ended)
            self.p.agent_check = f"not run: {unasked}"
            return None, unasked
        self.p.agent_check = agent_check_text(verdict, error)
        return verdict, error

    def _unasked(self, ended: str) -> str:
        played = caller_turns(self.p.transcript)
        return (
            f"{ended} after {played} caller turn(s); its own verdict "
            "(finalize_simulation / on_simulation_end) could not be asked"
        )

    def _decided(
        self,
        verdicts: Sequence[Verdict],
        ok: bool,
        reason: str,
        faults: Sequence[str],
        started: float,
        agent: SessionAgent,
        log_tail: Sequence[str],
    ) -> Attempt:
        decision = decide(verdicts, ok, reason, self.p.expectations, faults)
        tail = log_tail if decision.status == "error" else ()
        return self._attempt(decision.status, decision.reason, started, agent, tail, verdicts)

    def _attempt(
        self,
        status: str,
        reason: str,
        started: float,
        agent: SessionAgent,
        log_tail: Sequence[str],
        verdicts: Sequence[Verdict] = (),
    ) -> Attempt:
        p = self.p
        call = self._call_record()
        if p.notes:
            reason = "; ".join(x for x in (reason, *p.notes) if x)
        return Attempt(
            status=status,  # type: ignore[arg-type]
            reason=reason,
            transcript=tuple(p.transcript),
            expectations=tuple(p.expectations),
            verdicts=tuple(verdicts),
            end_reason=p.end_reason,
            boot_seconds=agent.boot_seconds,
            turn_seconds=tuple(p.turn_seconds),
            turns=tuple(p.turns),
            agent_check=p.agent_check,
            duration_seconds=time.monotonic() - started,
            log_path=str(self.log_path),
            log_tail=tuple(log_tail),
            usage=dict(p.usage),
            start_mode=agent.started.mode if agent.started else "",
            cold_start_reason=agent.started.why if agent.started else "",
            inference_class=agent.inference_class,
            speed_patches=dict(agent.speed_patches),
            call=call,
        )

    def _call_record(self) -> AudioCallRecord | None:
        """An audio attempt's call, its WAV and SVG written beside its log."""
        if self.call is None:
            return None
        p = self.p
        record, note = write_call(
            self.call,
            self.call.record(),
            self.settings.logs_dir,
            self.scenario.id,
            self.attempt_no,
            p.transcript,
            p.turns,
        )
        if note:
            p.notes.append(note)
        return record


def caller_view(transcript: Sequence[TranscriptItem]) -> list[TranscriptItem]:
    """The conversation as the simulated caller lived it: its own lines as it said them (the
    transcript keeps what the agent heard of them)."""
    return [dataclasses.replace(i, text=i.said) if i.said is not None else i for i in transcript]


class _HeldSlot:
    """The attempt's slot, held across a re-run: given back once, by the attempt itself."""

    def __init__(self, slot: Slot) -> None:
        self._slot = slot

    async def converse(self) -> None:
        await self._slot.converse()

    def release(self) -> None:
        pass


def _add_usage(usage: dict[str, Usage], party: str, more: Usage) -> None:
    usage[party] = usage.get(party, Usage()) + more


__all__ = [  # the collaborators are re-exported: the engine and tests import them from here
    "CONVERSATION_MODE",
    "NOT_RUN_INTERRUPTED",
    "AttemptError",
    "Caller",
    "CallerTurnLike",
    "Evaluator",
    "RunSettings",
    "ScenarioAttempt",
    "Slot",
    "agent_check_text",
    "dispatch_json",
]
