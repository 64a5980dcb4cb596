"""The scenario model: what a LiveKit ``scenarios.yaml`` holds, plus lk-eval's scripted turns,
and the rules written once on it: its runs, who plays the user, what it checks, its content
digest, and which scenarios a run plays (:class:`Selection`: ``--tag``, ``--match``; shards).

Loading and validation live in :mod:`lkeval.scenarios.loader`; the engine, the plan, the
reporters and the tests share this one vocabulary.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lkeval.errors import NothingToRunError, UsageError
from lkeval.scenarios.bounds import MAX_RUNS

BUILTIN_JUDGES = (
    "task_completion",
    "tool_use",
    "accuracy",
    "safety",
    "relevancy",
    "coherence",
    "conciseness",
    "handoff",
)
"""Names of livekit.agents.evals' built-in judges, as ``--judges`` and scenarios spell them.

Kept with the scenario model (not with the judges in :mod:`lkeval.llm`) because the loader
checks a scenario's ``judges:`` against them, and scenarios sit below llm in the layers.
"""

NOTHING_TO_CHECK = "nothing to check"
"""How the reason of a scenario that had nothing to check begins (results files keep it)."""

ConversationMode = Literal["text", "audio"]
CONVERSATION_MODES: tuple[ConversationMode, ...] = ("text", "audio")
"""How a scenario is played: text turns (``run_input``), or spoken into the agent's
microphone and heard from its speaker (``--mode audio``, a scenario's ``mode:``)."""

ExpectationKind = Literal[
    "message",
    "function_call",
    "function_call_output",
    "handoff",
    "skip",
    "no_more_events",
    "heard",
    "barge_in",
]


@dataclass(frozen=True)
class Expectation:
    """One check on the events of a turn, modelled on LiveKit's ``RunResult.expect`` API.

    Sequential by default: each expectation consumes the next event of the turn (user
    messages excluded). ``anywhere=True`` (written ``contains:`` in YAML) searches all events
    of the turn without moving the cursor.
    """

    kind: ExpectationKind
    line: int
    anywhere: bool = False
    # message
    role: str = "assistant"
    contains: tuple[str, ...] = ()
    matches: str | None = None
    intent: str | None = None
    # function_call / function_call_output
    name: str | None = None
    arguments: dict[str, Any] | None = None
    output: str | None = None
    output_contains: str | None = None
    is_error: bool | None = None
    # handoff
    to: str | None = None
    # skip
    count: int = 1
    # heard (audio: what the agent's STT heard of the caller's line; contains/matches too)
    max_wer: float | None = None
    # barge_in (audio: this line cut into the agent's reply): it stopped within the bound,
    # or (``yields: false``, a back-channel) it did not stop
    within_ms: float | None = None
    yields: bool | None = None

    def describe(self) -> str:
        """A short human description, used in results and reports."""
        prefix = "somewhere: " if self.anywhere else ""
        if self.kind == "message":
            parts = [f"{self.role} message"]
            if self.contains:
                parts.append("containing " + ", ".join(repr(c) for c in self.contains))
            if self.matches:
                parts.append(f"matching /{self.matches}/")
            if self.intent:
                parts.append(f"judged as: {self.intent}")
            return prefix + " ".join(parts)
        if self.kind == "function_call":
            args = f" with {self.arguments}" if self.arguments else ""
            return f"{prefix}call {self.name or 'any function'}{args}"
        if self.kind == "function_call_output":
            parts = [f"output of {self.name or 'a function'}"]
            if self.is_error is not None:
                parts.append("that is an error" if self.is_error else "that is not an error")
            if self.output is not None:
                parts.append(f"equal to {self.output!r}")
            if self.output_contains is not None:
                parts.append(f"containing {self.output_contains!r}")
            return prefix + " ".join(parts)
        if self.kind == "handoff":
            return f"{prefix}handoff to {self.to or 'any agent'}"
        if self.kind == "heard":
            parts = ["the agent heard the caller's line"]
            if self.contains:
                parts.append("containing " + ", ".join(repr(c) for c in self.contains))
            if self.matches:
                parts.append(f"matching /{self.matches}/")
            if self.max_wer is not None:
                parts.append(f"with a word error rate of at most {self.max_wer:g}")
            return " ".join(parts)
        if self.kind == "barge_in":
            if self.yields is False:
                return "the agent kept speaking through the caller's line (no false yield)"
            bound = f" within {self.within_ms / 1000:g}s" if self.within_ms is not None else ""
            return f"the agent stopped speaking{bound} when the caller cut in"
        if self.kind == "skip":
            return f"skip {self.count} event(s)"
        return "no more events"


@dataclass(frozen=True)
class Turn:
    """A scripted user turn. ``user`` is None only for turn 0: checks on the greeting."""

    user: str | None
    expect: tuple[Expectation, ...]
    line: int
    # lk-eval's audio mode (docs/audio.md): ``text`` or ``audio`` for this turn alone (None:
    # the scenario's mode), and a barge-in: start speaking this many seconds into the agent's
    # reply to the previous turn instead of after it.
    mode: ConversationMode | None = None
    interrupt_after: float | None = None


@dataclass(frozen=True)
class Limits:
    """Per-scenario limits in seconds / turns; None means "use the run's default"."""

    boot_timeout: float | None = None
    turn_timeout: float | None = None
    max_turns: int | None = None


@dataclass(frozen=True)
class MockCase:
    """One answer of a mocked tool: its ``output`` (any JSON value) or its ``error`` text, for
    calls whose arguments have the values ``when`` names (``None``: any call)."""

    when: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The case as the agent process receives it with ``go`` (``host/tool_mocks.py``)."""
        answer = {"error": self.error} if self.error is not None else {"output": self.output}
        return {"when": self.when, **answer}


@dataclass(frozen=True)
class ToolMock:
    """A scenario's ``mock_tools:`` entry: the agent's tool ``name`` answers from ``cases``
    (first match) instead of running, as LiveKit's ``mock_tools`` does in its tests."""

    name: str
    cases: tuple[MockCase, ...]
    line: int


def mock_tools_wire(mocks: Sequence[ToolMock]) -> dict[str, list[dict[str, Any]]]:
    """Tool name -> cases, as the agent process receives them with ``go``."""
    return {mock.name: [case.to_wire() for case in mock.cases] for mock in mocks}


@dataclass(frozen=True)
class Scenario:
    """One scenario of a LiveKit scenario group, with lk-eval's optional additions."""

    label: str
    instructions: str
    agent_expectations: str
    file: str
    line: int
    group_id: str
    group_name: str
    id: str
    id_derived: bool
    tags: dict[str, str] = field(default_factory=dict)
    userdata: dict[str, Any] | None = None
    turns: tuple[Turn, ...] = ()
    limits: Limits = Limits()
    repeat: int | None = None
    min_pass: int | None = None
    judges: tuple[str, ...] = ()
    # After the scripted turns, the simulated user carries on from ``instructions``.
    then_simulate: bool = False
    # Latency budget in ms by statistic (p95, ttft_p95, ...): lkeval.scenarios.latency.
    latency: dict[str, float] = field(default_factory=dict)
    # Tools that answer from the scenario instead of running (lkeval.scenarios.mock_tools).
    mock_tools: tuple[ToolMock, ...] = ()
    # ``mode:`` (an lk-eval extension): opts in or out of audio whatever ``--mode`` says.
    mode: ConversationMode | None = None
    # ``impair:`` (audio): the caller's line goes through this instead of the run's --impair.
    impair: str | None = None
    # ``caller_interrupt_after`` (audio): the simulated caller's lines after its first start
    # this many seconds into the agent's reply.
    caller_interrupt_after: float | None = None

    @property
    def digest(self) -> str:
        """A digest of everything the scenario says (its place in a file aside: a job that runs
        from another directory sees the same scenario). Shards, merges, the pass-rate history
        and judge calibrations know a scenario's content by it. The audio keys count only when
        written, so a scenario without them keeps the digest it had before they existed."""
        content = dataclasses.asdict(self)
        content.pop("file", None)
        for key in ("mode", "impair", "caller_interrupt_after"):
            if content.get(key) is None:
                content.pop(key, None)
        for turn in content["turns"]:
            for key in ("mode", "interrupt_after"):
                if turn.get(key) is None:
                    turn.pop(key, None)
        text = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @property
    def key(self) -> str:
        """The key results are matched on across runs (baselines, shards, merges)."""
        return self.id

    def runs(self, repeat: int | None, min_pass: int | None) -> tuple[int, int]:
        """(runs, passes needed), unclamped: the scenario's own ``repeat``/``min_pass``, else
        the run's flags, else one run and all runs needed."""
        runs = self.repeat or repeat or 1
        return runs, self.min_pass or min_pass or runs

    def plays_audio(self, run_mode: str) -> bool:
        """Whether the scenario plays in audio: its own ``mode:``, else a turn that asks for
        audio (or a caller who barges in), else the run's ``--mode``."""
        if self.mode is not None:
            return self.mode == "audio"
        spoken = (
            any(t.mode == "audio" for t in self.turns) or self.caller_interrupt_after is not None
        )
        return run_mode == "audio" or spoken

    def turn_mode(self, turn: Turn, run_mode: str) -> ConversationMode:
        """How ``turn`` is played: its own ``mode:``, else the scenario's."""
        if turn.mode is not None:
            return turn.mode
        return "audio" if self.plays_audio(run_mode) else "text"

    @property
    def scripted_turns(self) -> int:
        """How many turns the script plays as the user (turn 0, checks on the greeting, is
        not one); the simulated user, if any, carries on after them."""
        return sum(1 for turn in self.turns if turn.user is not None)

    @property
    def plays_caller(self) -> bool:
        """The simulated user plays it (all of it, or after its scripted turns)."""
        return not self.turns or self.then_simulate

    @property
    def checks_turns(self) -> bool:
        """Some scripted turn checks something: ``skip:`` only moves past events, so a turn
        whose only expectation is a skip checks nothing."""
        return any(e.kind != "skip" for turn in self.turns for e in turn.expect)

    def nothing_to_check(self, *, judge_scripted: bool, run_judges: Sequence[str]) -> str | None:
        """Why no check could decide this scenario's verdict, or None when one can.

        Decided before anything boots, so such a scenario is reported (and fails the gate
        unless allowed) instead of being played and passing on nothing. The checks are those
        of :mod:`lkeval.llm.evaluator`: scripted expectations; the main judge on
        ``agent_expectations`` for scenarios the simulated user plays, and for scripted ones
        when a judge model is named (``judge_scripted``); built-in judges. The agent's own
        ``on_simulation_end`` does not count: it can veto a run, never pass one.
        """
        if self.checks_turns or self.judges or run_judges:
            return None
        expectations = self.agent_expectations.strip()
        if expectations and (self.plays_caller or judge_scripted):
            return None
        skips = any(turn.expect for turn in self.turns)
        expect_nothing = "its turns expect nothing" + (" (skip: checks no event)" if skips else "")
        if expectations:
            why = (
                f"{expect_nothing}, and its agent_expectations are judged only when a "
                "judge model is named (--judge-model)"
            )
        elif self.turns:
            why = f"{expect_nothing} and it has no agent_expectations or judges"
        else:
            why = "it has no agent_expectations or judges for the simulated user's conversation"
        return f"{NOTHING_TO_CHECK}: {why}"


def min_pass_problem(
    scenarios: Sequence[Scenario], repeat: int | None, min_pass: int | None
) -> str | None:
    """Why the passes needed exceed the runs of some scenario (a usage error), or None.

    Checked before anything boots: clamping ``--min-pass 3`` to one run would quietly gate on
    less than the user asked for.
    """
    over = [s for s in scenarios if s.runs(repeat, min_pass)[1] > s.runs(repeat, min_pass)[0]]
    if not over:
        return None
    first = over[0]
    runs, needed = first.runs(repeat, min_pass)
    needs = f"min_pass: {needed} of" if first.min_pass else f"--min-pass {needed} for"
    source = "its repeat:" if first.repeat else (f"--repeat {repeat}" if repeat else "no --repeat")
    more = f" (and {len(over) - 1} more)" if len(over) > 1 else ""
    return (
        f"{needs} '{first.label}' ({first.file}:{first.line}){more} is above its "
        f"{runs} run{'s' if runs != 1 else ''} ({source}); give --repeat {needed} or more"
    )


def runs_problem(
    scenarios: Sequence[Scenario], repeat: int | None, min_pass: int | None
) -> str | None:
    """Why the selected scenarios, repeated, are too many runs for one ``lkeval run``."""
    total = sum(s.runs(repeat, min_pass)[0] for s in scenarios)
    if total <= MAX_RUNS:
        return None
    return (
        f"{total} runs ({len(scenarios)} scenarios with their repeats); at most {MAX_RUNS} "
        "fit one run: select fewer (--match, --tag), shard them (--shard), or repeat less"
    )


@dataclass(frozen=True)
class ScenarioGroup:
    """One scenarios.yaml file."""

    file: str
    id: str
    name: str
    scenarios: tuple[Scenario, ...]


def derive_id(group_name: str, label: str) -> str:
    """A stable id for a scenario written without one: slug of group name and label.

    Stable across runs and machines as long as the group name and label stay the same,
    which is what baselines and shards key on.
    """

    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")

    return f"{slug(group_name) or 'scenarios'}/{slug(label)}"


# Which scenarios run: tags and globs, and splitting across CI machines (``--shard I/N``).
# Shards are deterministic and stable: scenarios are ordered by their id (stable across runs:
# the written id, else group name + label), then dealt round-robin, so shards differ in size by
# at most one and the same scenario lands in the same shard on every machine of the matrix.


@dataclass(frozen=True)
class Selection:
    """Which scenarios run. Tag selectors are ``key=value`` (all must hold); patterns are
    case-insensitive globs on id or label (any may match)."""

    tags: tuple[tuple[str, str], ...] = ()
    patterns: tuple[str, ...] = ()

    def describe(self) -> str:
        """``tag k=v, match 'glob'``: why a scenario was not selected."""
        parts = [f"tag {k}={v}" for k, v in self.tags] + [f"match {p!r}" for p in self.patterns]
        return ", ".join(parts)

    def selects(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` runs."""
        if not self._tagged(scenario):
            return False
        return not self.patterns or any(_matches(p, scenario) for p in self.patterns)

    def pick(self, scenarios: Sequence[Scenario]) -> list[Scenario]:
        """The scenarios that run, in their order: the one place a run, its attempt cap, and a
        fork's PR without secrets decide it."""
        return [s for s in scenarios if self.selects(s)]

    @property
    def not_selected(self) -> str:
        """The reason every unselected scenario is reported skipped with, whichever path
        reports it (the engine, an empty shard, a fork's PR without secrets)."""
        return f"not selected ({self.describe()})"

    def _tagged(self, scenario: Scenario) -> bool:
        return all(scenario.tags.get(k) == v for k, v in self.tags)

    def unmatched(self, scenarios: Sequence[Scenario]) -> list[str]:
        """The ``--match`` patterns that select no scenario of ``scenarios`` (given the tag
        selectors): with several patterns, a typo in one would quietly run fewer scenarios."""
        tagged = [s for s in scenarios if self._tagged(s)]
        return [p for p in self.patterns if not any(_matches(p, s) for s in tagged)]


def _matches(pattern: str, scenario: Scenario) -> bool:
    return any(
        fnmatch.fnmatchcase(text.lower(), pattern.lower()) for text in (scenario.id, scenario.label)
    )


def check_selection(scenarios: Sequence[Scenario], selection: Selection) -> None:
    """Refuse a selection of the whole suite (before any shard split) that cannot be meant.

    A ``--match`` pattern that matches nothing is a usage error naming it (exit 2); a suite,
    or a selection, that leaves no scenario at all is :class:`NothingToRunError` (exit 3): a
    gate that passes on nothing would hide an empty file or a typo in ``--tag``.
    """
    unmatched = selection.unmatched(scenarios)
    if unmatched:
        names = ", ".join(repr(p) for p in unmatched)
        among = f" with {', '.join(f'tag {k}={v}' for k, v in selection.tags)}"
        raise UsageError(
            f"--match {names} matches no scenario's id or label"
            f"{among if selection.tags else ''} (of {len(scenarios)} in the suite)"
        )
    if not scenarios:
        raise NothingToRunError("nothing to run: the scenario file(s) hold no scenario")
    if not any(selection.selects(s) for s in scenarios):
        raise NothingToRunError(
            f"nothing to run: no scenario of {len(scenarios)} is selected ({selection.describe()})"
        )


def select_shard(scenarios: Sequence[Scenario], index: int, total: int) -> list[Scenario]:
    """The scenarios of shard ``index`` of ``total``, in their file order."""
    ordered = sorted(scenarios, key=lambda s: s.id)
    mine = {s.id for k, s in enumerate(ordered) if k % total == index - 1}
    return [s for s in scenarios if s.id in mine]


def shard_text(shard: tuple[int, int] | None) -> str | None:
    """``(2, 4)`` → ``"2/4"`` (as ``--shard`` is written and the results record it), or None."""
    return f"{shard[0]}/{shard[1]}" if shard else None
