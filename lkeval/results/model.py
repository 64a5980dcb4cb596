"""The result model: what one run of lk-eval found, built to be kept.

A results file is the unit everything downstream reads: reporters render it, ``lkeval report``
posts it, ``lkeval merge`` joins shards of it, and a later run compares against it as its
baseline. So it carries a format version; :mod:`lkeval.results.results_json` writes it and
reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from lkeval.results.history_model import Calibration as Calibration
from lkeval.results.history_model import History as History
from lkeval.results.history_model import HistoryRun as HistoryRun
from lkeval.results.history_model import RunCount as RunCount
from lkeval.results.history_model import ScenarioHistory as ScenarioHistory
from lkeval.results.run_model import JudgeCheck as JudgeCheck
from lkeval.results.run_model import LLMInUse as LLMInUse
from lkeval.results.run_model import RunMetadata as RunMetadata
from lkeval.results.run_model import SuiteFingerprint as SuiteFingerprint
from lkeval.scenarios.model import Scenario

FORMAT_VERSION = 1

Status = Literal["passed", "failed", "error", "skipped"]

NOT_RUN_INTERRUPTED = "not run (interrupted)"
"""The reason of a scenario that was selected but never began: the run was interrupted."""
NOT_RUN_STOPPED = "not run (stopped early)"
"""How the reason of a scenario the error brake (``--max-errors``) did not boot begins."""
NOT_RUN_NO_LLM = "not run: needs a live LLM (no credentials)"
"""How the reason begins of a scenario that could not replay fully on a run without LLM
credentials (a fork's pull request with cassettes): it needs a live call, so it was not
evaluated; the gate never passes such a run."""
VerdictValue = Literal["pass", "fail", "maybe"]


@dataclass(frozen=True)
class TranscriptItem:
    """One item of the conversation, as the agent's session recorded it.

    ``kind`` is message / function_call / function_call_output / agent_handoff /
    agent_config_update. ``turn`` is 0 for what the agent did before the first user turn
    (its greeting), then 1, 2, ... ``spoken_call`` names the tool when an agent message is a
    tool call its LLM wrote as text (and so spoke to the caller instead of calling it).
    """

    kind: str
    turn: int
    role: str | None = None
    text: str = ""
    name: str | None = None
    arguments: str | None = None
    output: str | None = None
    is_error: bool | None = None
    call_id: str | None = None
    old_agent: str | None = None
    new_agent: str | None = None
    interrupted: bool = False
    # An audio turn's caller line as the caller said it; ``text`` is what the agent heard.
    said: str | None = None
    spoken_call: str | None = None


@dataclass(frozen=True)
class ExpectationResult:
    """The outcome of one scripted expectation."""

    turn: int
    index: int
    description: str
    passed: bool
    reason: str = ""
    line: int | None = None


@dataclass(frozen=True)
class Verdict:
    """A verdict from one source: ``scripted``, ``judge`` (or ``judge:<name>``), ``agent``."""

    source: str
    verdict: VerdictValue
    reason: str = ""
    votes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Usage:
    """Token counts of one party (agent, caller, judge), with the models that used them.

    ``cost_usd`` covers only priced tokens; ``unpriced`` names the models whose tokens had no
    price, so a report says "unpriced" instead of passing off a partial sum (or $0) as the cost.
    ``unreported`` counts the calls whose usage the server never sent (a stream closed before
    its usage chunk): their tokens are a lower bound (the output counted from the chunks read,
    the input unknown) and their cost is unknown, never 0.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    models: tuple[str, ...] = ()
    unpriced: tuple[str, ...] = ()
    unreported: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            _union(self.models, other.models),
            _union(self.unpriced, other.unpriced),
            self.unreported + other.unreported,
        )


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return first + tuple(name for name in second if name not in first)


@dataclass(frozen=True)
class AudioCallRecord:
    """One audio attempt's call on the wire (docs/audio.md): what the speaker played and the
    microphone sent. ``greeting_audio_s`` is the agent's audio before the caller's first line
    (None: it did not greet aloud); ``mic_stalls`` counts the times lk-eval's own event loop
    fell behind the microphone's 20 ms schedule by more than 0.2 s (a loaded machine: the
    figures of that call are suspect)."""

    agent_replies: int = 0
    agent_audio_s: float = 0.0
    interrupted_replies: int = 0
    greeting_audio_s: float | None = None
    caller_lines: int = 0
    caller_audio_s: float = 0.0
    mic_stalls: int = 0
    # ``--impair``: what was done to the caller's line (spec with its seed, loss and SNR made)
    line: str = ""
    # The call as a stereo WAV and its SVG timeline, beside the agent's log ("": not written)
    recording: str = ""
    timeline: str = ""


@dataclass(frozen=True)
class TurnMetrics:
    """How long one user turn took, named as LiveKit's simulation protos name turn metrics.

    ``latency_ms`` is lk-eval's own wall clock, from sending the user's text to receiving the
    turn's answer (its last event): the one figure every agent has. The others are what the
    agent reports itself (``ChatMessage.metrics`` of its first reply in the turn, converted to
    ms), None when it did not send them; ``e2e_latency_ms`` and ``tts_ttfb_ms`` only exist in
    voice sessions. ``tool_ms`` holds each tool call's execution time (call to output).
    """

    turn: int
    latency_ms: float
    llm_ttft_ms: float | None = None
    llm_ttfs_ms: float | None = None
    llm_tps: float | None = None
    tts_ttfb_ms: float | None = None
    e2e_latency_ms: float | None = None
    tool_ms: tuple[float, ...] = ()
    # Every LLM/HTTP call the agent made during this turn came from a cassette
    # (``--cassettes``): the figure measures lk-eval's replay, not the agent's models, so it is
    # kept for the record but never pooled into figures, budgets or a baseline comparison.
    replayed: bool = False
    # Audio turns (``--mode audio``, docs/audio.md); a text turn leaves them unset.
    mode: str = "text"
    first_audio_ms: float | None = None  # caller stopped speaking -> agent's first audio (wire)
    end_of_turn_ms: float | None = None  # the agent's end_of_turn_delay
    transcription_ms: float | None = None  # the agent's transcription_delay
    said: str | None = None  # the caller's line
    heard: str | None = None  # what the agent's STT heard (user_input_transcribed)
    agent_heard: str | None = None  # what a caller heard of the agent's reply (--listen)
    wer: float | None = None  # word error rate of heard against said
    agent_audio_s: float | None = None  # seconds of the agent's reply that played
    interrupted_agent: bool = False  # this line cut into the agent, which stopped
    agent_stopped_ms: float | None = None  # caller started -> agent stopped (its clear)
    false_interruptions: int = 0  # the agent stopped for the caller and resumed
    overlaps: int = 0  # both spoke at once (the agent's overlapping_speech)
    load: float | None = None  # the machine's 1-minute load average as the turn ended


ReplayMode = Literal["replayed", "partial", "recorded", "missed"]
"""How an attempt used its cassette (``--cassettes``): every call from the cassette
(``replayed``); from the cassette up to the first call that differed, live from there and the new
episode recorded (``partial``, ``--cassette-mode auto``); all live and recorded (``recorded``:
``--cassette-mode record``, no cassette yet, or one that could not be used); or a call with no
recorded match ended the attempt as an error (``missed``, ``--cassette-mode replay``)."""
REPLAY_MODES: tuple[ReplayMode, ...] = ("replayed", "partial", "recorded", "missed")


@dataclass(frozen=True)
class Replay:
    """One attempt's record/replay, kept in results.json beside its transcript (docs/replay.md).

    ``client`` and ``live_from_call`` name the first call that did not match (``agent``,
    ``caller``, ``judge``; 1-based within that client), ``reason`` says why in one line (the
    first differing field and a short diff, or why the cassette could not be used: another
    judge model, another format version, no cassette for this attempt). ``calls_replayed`` and
    ``calls_live`` count HTTP exchanges of every client; ``saved_usd`` is what the replayed
    calls cost when they were recorded (None when none was priced). ``cassette`` is the
    cassette's path relative to ``--cassettes``.
    """

    mode: ReplayMode
    cassette: str = ""
    live_from_call: int | None = None
    client: str | None = None
    reason: str = ""
    calls_replayed: int = 0
    calls_live: int = 0
    saved_usd: float | None = None

    @property
    def fully_replayed(self) -> bool:
        """Nothing went live: the attempt is main's conversation and verdict, replayed."""
        return self.mode == "replayed"


@dataclass(frozen=True)
class Attempt:
    """One run of a scenario against one agent process (a scenario may be repeated)."""

    status: Status
    reason: str = ""
    transcript: tuple[TranscriptItem, ...] = ()
    expectations: tuple[ExpectationResult, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    end_reason: str = ""
    boot_seconds: float | None = None
    turn_seconds: tuple[float, ...] = ()
    turns: tuple[TurnMetrics, ...] = ()
    # The agent's own on_simulation_end check: "passed (no veto)", "vetoed: ...", "error: ...",
    # "not run: ..."; empty when the attempt ended before it could be asked.
    agent_check: str = ""
    duration_seconds: float = 0.0
    log_path: str | None = None
    log_tail: tuple[str, ...] = ()
    usage: dict[str, Usage] = field(default_factory=dict)
    # How this attempt's agent started: "warm" (forked from the run's preloaded server) or
    # "cold", with ``cold_start_reason`` saying why ("--cold-start", "warm start failed: ...").
    # Empty when no agent was started, and in results files older than these fields.
    start_mode: str = ""
    cold_start_reason: str = ""
    # The LiveKit Inference class the agent's calls ran at, as its host reported: "low" (pinned,
    # as LiveKit's text simulation does since livekit-agents 1.6.10) or "agent" (the class
    # each model asks for: ``--inference-class agent``, or a livekit-agents that does not pin).
    inference_class: str = ""
    # Each speed patch of the agent's host, on or off and why ("on (verified ...)"), as the
    # host reported (docs/warm-starts.md, "Speed patches"); empty when no agent reported.
    speed_patches: dict[str, str] = field(default_factory=dict)
    # How this attempt used its cassette; None without ``--cassettes`` (and in older files).
    replay: Replay | None = None
    # The call as lk-eval's microphone and speaker saw it; None for a text attempt.
    call: AudioCallRecord | None = None


def run_start_mode(scenarios: Any) -> str:
    """The run's start mode from its attempts: "warm", "cold", "mixed", or "" (none booted)."""
    modes = {a.start_mode for s in scenarios for a in s.attempts if a.start_mode}
    if len(modes) > 1:
        return "mixed"
    return modes.pop() if modes else ""


def run_inference_class(scenarios: Any) -> str:
    """The run's inference class from its attempts: "low", "agent", "mixed", or "" (unknown)."""
    classes = {a.inference_class for s in scenarios for a in s.attempts if a.inference_class}
    if len(classes) > 1:
        return "mixed"
    return classes.pop() if classes else ""


@dataclass(frozen=True)
class Sampling:
    """How a scenario's verdict was reached, kept in results.json and shown in every report.

    ``mode`` is "sequential" or "fixed"; ``confidence`` the chance the decision is right for a
    scenario at the other hypothesis (1 - alpha for a fail, 1 - beta for a pass, exact);
    ``text`` the sentence reports show ("failed 4 of 5 — ...").
    """

    mode: str
    outcome: str
    passes: int
    attempts: int
    judge_votes: int = 0
    evidence: float = 0.0
    confidence: float | None = None
    text: str = ""
    # The judge error the scenario's rule assumed when a calibration set it (None: the rule's
    # default); lkeval report gates with the baseline's calibration, not with this record.
    judge_error: float | None = None


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario over all its attempts."""

    scenario_id: str
    label: str
    group_id: str
    group_name: str
    file: str
    line: int
    status: Status
    reason: str = ""
    id_derived: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    attempts: tuple[Attempt, ...] = ()
    min_pass: int = 1
    quarantined: bool = False
    duration_seconds: float = 0.0
    # The scenario's ``latency:`` budget in ms by statistic, kept so a later ``lkeval report``
    # checks it from the results file alone.
    latency_budget: dict[str, float] = field(default_factory=dict)
    # How its verdict was reached (lkeval.results.sampling); None in older results files.
    sampling: Sampling | None = None
    # The judge's error rates on this scenario, measured by ``lkeval calibrate`` on this run's
    # transcripts; a later run's history carries them (lkeval.results.history).
    calibration: Calibration | None = None

    @classmethod
    def of(cls, scenario: Scenario, status: Status, reason: str, **more: Any) -> ScenarioResult:
        """The result of ``scenario``, its identity and place copied from the scenario itself."""
        return cls(
            scenario_id=scenario.id,
            label=scenario.label,
            group_id=scenario.group_id,
            group_name=scenario.group_name,
            file=scenario.file,
            line=scenario.line,
            status=status,
            reason=reason,
            id_derived=scenario.id_derived,
            tags=dict(scenario.tags),
            **more,
        )

    @property
    def passes(self) -> int:
        """How many attempts passed."""
        return sum(1 for a in self.attempts if a.status == "passed")

    @property
    def pass_rate(self) -> float | None:
        """Passed attempts over attempts that ran (None when none ran)."""
        ran = [a for a in self.attempts if a.status != "skipped"]
        return (self.passes / len(ran)) if ran else None

    @property
    def usage(self) -> dict[str, Usage]:
        """Token usage summed over attempts, per party."""
        return sum_usage(a.usage for a in self.attempts)


@dataclass(frozen=True)
class RunResults:
    """The whole results file."""

    metadata: RunMetadata
    scenarios: tuple[ScenarioResult, ...]
    format_version: int = FORMAT_VERSION
    # The rolling history this run was compared with (its baseline's, with the baseline's own
    # run added); None without a baseline and in older files.
    history: History | None = None

    def count(self, status: Status) -> int:
        """Scenarios with this status."""
        return sum(1 for s in self.scenarios if s.status == status)

    @property
    def usage(self) -> dict[str, Usage]:
        """Token usage summed over the run, per party."""
        return sum_usage(s.usage for s in self.scenarios)


def sum_usage(parts: Any) -> dict[str, Usage]:
    """Add up ``{party: Usage}`` mappings."""
    total: dict[str, Usage] = {}
    for part in parts:
        for party, usage in part.items():
            total[party] = total.get(party, Usage()) + usage
    return total
