"""A run's cassettes and one attempt's tapes: what the agent is handed, what lk-eval's own
clients use, and what the attempt becomes once its exchanges are in.

lk-eval's caller and judge calls are seen by the same recorder as the agent's
(:mod:`lkeval.host.tape`, installed once in this process): each request asks which attempt
it belongs to (:data:`ACTIVE`, a context variable the attempt's task sets) and which client
makes it (:data:`CLIENT`, set by :func:`lkeval.llm.client.call_llm` around each call), so one
run's concurrent attempts never share a tape. The agent gets its tape as a file in the run's
private directory, named in its environment (``LKEVAL_TAPE``), and appends what happened to
another (``LKEVAL_TAPE_OUT``); both are read here once the agent has stopped, masked, and
written as the attempt's one cassette.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lkeval.host.tape import (
    CLIENT_AGENT,
    TAPE_ENV,
    TAPE_OUT_ENV,
    Rules,
    RulesError,
    Tape,
    raise_flag,
    read_flag,
)
from lkeval.host.transports import install
from lkeval.replay.cassette import (
    CLIENTS,
    PREFLIGHT,
    Cassette,
    CassetteError,
    cassette_name,
    incompatibility,
    read_bounded,
    read_cassette,
    write_cassette,
    write_text_atomically,
)
from lkeval.replay.costs import recorded_cost, without_saved
from lkeval.replay.manifest import Entry, Trusted, digest, provenance, write_manifest
from lkeval.results.model import Attempt, Replay, ReplayMode
from lkeval.results.pricing import PriceTable

ACTIVE: contextvars.ContextVar[AttemptTapes | None] = contextvars.ContextVar(
    "lkeval_replay_active", default=None
)
CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar("lkeval_replay_client", default="")
RULES_IDENTITY = "cassette_rules"
"""The scrub rules' digest in a cassette's ``recorded_with`` (empty: no rules)."""


def _own_tape() -> Tape | None:
    tapes, client = ACTIVE.get(), CLIENT.get()
    if tapes is None or not client:
        return None
    return tapes.tape(client)


@contextlib.contextmanager
def calls_of(client: str) -> Iterator[None]:
    """Requests made inside belong to ``client`` (``caller`` or ``judge``) of the active
    attempt; outside any attempt with cassettes they pass through."""
    token = CLIENT.set(client)
    try:
        yield
    finally:
        CLIENT.reset(token)


@contextlib.contextmanager
def active(tapes: AttemptTapes | None) -> Iterator[None]:
    """Route lk-eval's own requests made inside (and in tasks started inside) to ``tapes``."""
    token = ACTIVE.set(tapes)
    try:
        yield
    finally:
        ACTIVE.reset(token)


class ReplayConfigError(ValueError):
    """A scrub-rules file that cannot be used: the message names the file and the field."""


def load_rules(path: Path | None) -> Rules:
    """The user's scrub rules (``--cassette-rules``), or none."""
    if path is None:
        return Rules()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReplayConfigError(f"--cassette-rules {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayConfigError(f"--cassette-rules {path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ReplayConfigError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    try:
        return Rules.from_json(data)
    except RulesError as exc:
        raise ReplayConfigError(f"{path}: {exc}") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Cassettes:
    """The run's ``--cassettes DIR``: opens each attempt's tapes, and the preflight's.

    Built once, before the judge preflight, with everything it needs (the agents' scratch
    directory too) and never changed after: only what the run vouches for and the attempts
    it opened grow as the run goes."""

    directory: Path
    mode: str
    rules: Rules
    identity: Mapping[str, str]
    """What a cassette must have been recorded with to be replayed (docs/replay.md): the
    caller's and judge's models, lk-eval's prompts; the scrub rules' digest is added."""
    scratch: Path
    """The run's private directory (0700), where the agents' tape files go."""
    prices: PriceTable = dataclasses.field(default_factory=PriceTable)
    restored: tuple[Path, Trusted] | None = None
    """``--cassettes-from``: the fresh directory the artifact was unpacked into, and what of
    it its manifest lets be replayed."""
    vouched: dict[str, Entry] = dataclasses.field(default_factory=dict, init=False)
    """What this run vouches for in ``DIR/_manifest.json``: each cassette it wrote or
    replayed in full."""
    _open: dict[str, AttemptTapes] = dataclasses.field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        identity = {**self.identity, RULES_IDENTITY: self.rules.digest()}
        object.__setattr__(self, "identity", identity)  # frozen: set once, here
        install(_own_tape)

    @property
    def source(self) -> Path:
        """Where cassettes are read from: ``--cassettes DIR`` itself, or (``--cassettes-from``)
        the restored artifact's directory; new episodes are written to ``directory``."""
        return self.restored[0] if self.restored else self.directory

    @property
    def trusted(self) -> Trusted | None:
        """What of ``source`` may be replayed (None: all of ``--cassettes DIR``)."""
        return self.restored[1] if self.restored else None

    def open(self, scenario_id: str, attempt_no: int, live_because: str = "") -> AttemptTapes:
        """The tapes of one attempt: its cassette read and checked (unless recording);
        ``live_because``: every call live and recorded, for that reason (an attempt run again
        live because its replay diverged after the recording had decided)."""
        name = cassette_name(scenario_id, attempt_no)
        tapes = AttemptTapes(self, name, scenario_id, attempt_no, live_because)
        self._open[name] = tapes
        return tapes

    def preflight(self) -> AttemptTapes:
        """The judge preflight's tapes (one cassette for the run)."""
        return self.open(PREFLIGHT, 1)

    def vouch(self, name: str, sha256: str, entry: Entry | None = None) -> None:
        """List cassette ``name`` in the manifest: recorded by this run, or as ``entry`` says."""
        run, commit = provenance()
        self.vouched[name] = entry or Entry(sha256, run, commit)

    def write_manifest(self) -> str:
        """Write ``DIR/_manifest.json`` (not in ``replay``, which writes nothing); the problem
        when it cannot be written ("" when it was)."""
        if self.mode == "replay":
            return ""
        try:
            write_manifest(self.directory, self.vouched)
        except CassetteError as exc:
            return str(exc)
        return ""

    def reopen(self, name: str) -> AttemptTapes | None:
        """An attempt's tapes again, for the judge's later votes on it (the sequential test)."""
        return self._open.get(name)


class AttemptTapes:
    """One attempt's record/replay: a tape per client, the agent's files, the outcome."""

    def __init__(
        self,
        owner: Cassettes,
        name: str,
        scenario_id: str,
        attempt_no: int,
        live_because: str = "",
    ) -> None:
        self.owner = owner
        self.name = name
        self.scenario_id = scenario_id
        self.attempt_no = attempt_no
        self.path = owner.directory / name
        self.mode = "record" if live_because else owner.mode
        self.refused = live_because  # why the cassette is not replayed ("" when it is)
        #: Why the attempt must run again live ("" when its outcome stands): set by finish.
        self.rerun = ""
        self.cassette = Cassette(scenario_id, attempt_no, owner.identity)
        self._events: dict[str, list[dict[str, Any]]] = {c: [] for c in CLIENTS}
        self._tapes: dict[str, Tape] = {}
        self._agent_read = 0
        self._saved: dict[str, float] = {}
        self._handed = False
        self._stem = name.removesuffix(".json")
        with contextlib.suppress(OSError):
            self.live_flag.unlink()
        if self.mode != "record":
            found = read_cassette(owner.source / name, owner.trusted)
            if isinstance(found, str):
                self.refused = found
            else:
                self.refused = incompatibility(found, owner.identity) or ""
                if not self.refused:
                    self.cassette = found

    @property
    def client_mode(self) -> str:
        """How each client's tape treats a request: record when there is nothing to replay."""
        if self.mode == "replay":
            return "replay"
        return "record" if self.refused or self.mode == "record" else "auto"

    def tape(self, client: str) -> Tape:
        """lk-eval's own tape for ``client`` (``caller``, ``judge``), made on first use."""
        if client not in self._tapes:
            self._tapes[client] = Tape(
                client,
                self.client_mode,
                [] if self.refused else self.cassette.of(client),
                self.owner.rules,
                self._events.setdefault(client, []).append,
                self.refused,
                diverged=lambda: read_flag(str(self.live_flag)),
                on_diverge=lambda reason: raise_flag(str(self.live_flag), reason),
            )
        return self._tapes[client]

    @property
    def live_flag(self) -> Path:
        """Raised by the first client of the attempt to leave the recording (any process)."""
        return self.owner.scratch / f"{self._stem}.live"

    @property
    def agent_in(self) -> Path:
        return self.owner.scratch / f"{self._stem}.tape.json"

    @property
    def agent_out(self) -> Path:
        return self.owner.scratch / f"{self._stem}.tape-out.jsonl"

    def agent_env(self) -> dict[str, str]:
        """The agent's environment additions: where its tape is and where it reports."""
        self.agent_in.parent.mkdir(parents=True, exist_ok=True)
        spec = {
            "mode": self.client_mode,
            "rules": self.owner.rules.to_json(),
            "exchanges": [] if self.refused else self.cassette.of(CLIENT_AGENT),
            "live_flag": str(self.live_flag.resolve()),
        }
        self.agent_in.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
        self._handed = True
        self.agent_out.write_text("", encoding="utf-8")
        return {TAPE_ENV: str(self.agent_in.resolve()), TAPE_OUT_ENV: str(self.agent_out.resolve())}

    def _read_agent(self) -> list[dict[str, Any]]:
        """The agent's events so far (a torn last line, from a killed agent, is left)."""
        events = self._events[CLIENT_AGENT]
        try:
            with self.agent_out.open(encoding="utf-8") as fh:
                fh.seek(self._agent_read)
                for line in fh:
                    if not line.endswith("\n"):
                        break
                    self._agent_read += len(line.encode("utf-8"))
                    with contextlib.suppress(ValueError):
                        events.append(json.loads(line))
        except OSError:
            pass
        return events

    def agent_replaying(self) -> bool:
        """Every call the agent made so far came from the cassette (a turn measured now is
        the replay's time, not the agent's models')."""
        if self.client_mode == "record":
            return False
        return not any("live" in e or "miss" in e for e in self._read_agent())

    def finish(self, attempt: Attempt) -> Attempt:
        """The attempt with its ``replay`` record, made an error by a replay miss (never a
        pass), its replayed calls' cost taken off; the cassette written when it is new."""
        self._read_agent()
        exchanges = {c: [e["exchange"] for e in self._of(c) if "exchange" in e] for c in CLIENTS}
        mode, client, call, reason = self._outcome(exchanges)
        self.rerun = self._rerun(mode, reason, exchanges)
        usage = without_saved(attempt.usage, self._take_saved(exchanges, self.owner.prices))
        status, why = attempt.status, attempt.reason
        unstarted = self._handed and not any("installed" in e for e in self._of(CLIENT_AGENT))
        if mode == "missed":
            status, why = "error", reason or "replay miss"
        elif unstarted and status in ("passed", "failed"):
            status, why = "error", "the agent's HTTP recorder did not start (lkeval/replay/)"
        elif mode in ("recorded", "partial") and status != "skipped" and not self.rerun:
            overflow = [c for c in CLIENTS if any("overflow" in e for e in self._of(c))]
            problem = self._write(exchanges, overflow)
            if problem:
                status, why = "error", "; ".join(x for x in (why, problem) if x)
        elif mode == "replayed":
            problem = self._keep_replayed()
            if problem:
                status, why = "error", "; ".join(x for x in (why, problem) if x)
        record = Replay(
            mode=mode,
            cassette=self.name,
            live_from_call=call,
            client=client,
            reason=reason,
            calls_replayed=sum(1 for c in CLIENTS for x in exchanges[c] if x.get("replayed")),
            calls_live=sum(1 for c in CLIENTS for x in exchanges[c] if not x.get("replayed")),
            saved_usd=round(sum(self._saved.values()), 6) if self._saved else None,
        )
        return dataclasses.replace(attempt, status=status, reason=why, usage=usage, replay=record)

    def _of(self, client: str) -> list[dict[str, Any]]:
        return self._events.get(client, [])

    def _first(self, kind: str) -> tuple[str, int, str] | None:
        """(client, call, reason) of the first ``miss`` or ``live`` event, agent first."""
        for client in CLIENTS:
            for event in self._of(client):
                if kind in event:
                    return client, int(event[kind]["call"]), str(event[kind]["reason"])
        return None

    def _outcome(
        self, exchanges: Mapping[str, list[dict[str, Any]]]
    ) -> tuple[ReplayMode, str | None, int | None, str]:
        """(mode, client, call, reason) of the attempt's record/replay."""
        miss, live = self._first("miss"), self._first("live")
        if miss is not None:
            return "missed", *miss
        if self.mode == "replay" and self.refused:
            return "missed", None, None, self.refused
        if self.client_mode == "record":
            return "recorded", None, None, self.refused
        if live is not None:
            return "partial", *live
        leftover = self._leftover(exchanges)
        if leftover:
            return ("missed" if self.mode == "replay" else "partial"), None, None, leftover
        return "replayed", None, None, ""

    def _rerun(
        self, mode: ReplayMode, reason: str, exchanges: Mapping[str, list[dict[str, Any]]]
    ) -> str:
        """Why ``auto`` must run the attempt again, all live ("": its outcome stands). A
        replay that diverged keeps nothing the recording decided: a divergence found only at
        the end (the recording has calls this run never made), or one that came after the
        judge's verdict was replayed (a changed ``on_simulation_end`` or ``on_session_end``
        call), would leave a recorded verdict on a conversation that is not the recording's."""
        if self.mode != "auto" or self.client_mode != "auto" or mode != "partial":
            return ""
        if self._first("live") is None:
            return f"{reason}; run again live"
        judged = any(x.get("replayed") for x in exchanges.get("judge", ()))
        return (
            f"{reason}, after the recorded verdict was replayed; run again live" if judged else ""
        )

    def _leftover(self, exchanges: Mapping[str, list[dict[str, Any]]]) -> str:
        """A replay that made fewer calls than the recording: the agent's or the caller's
        conversation ended elsewhere (the judge's later votes come after the attempt)."""
        for client in (CLIENT_AGENT, "caller"):
            recorded = len(self.cassette.of(client))
            used = sum(1 for x in exchanges[client] if x.get("replayed"))
            if used < recorded:
                return (
                    f"replay miss at {client}'s call {used + 1}: the recording has "
                    f"{recorded - used} more call(s) than this run made"
                )
        return ""

    def _take_saved(
        self, exchanges: Mapping[str, list[dict[str, Any]]], prices: PriceTable
    ) -> dict[str, float]:
        """What the replayed calls cost when recorded, per party, not yet taken off."""
        total: dict[str, float] = {}
        for client in CLIENTS:
            cost = 0.0
            for exchange in exchanges[client]:
                if exchange.get("replayed"):
                    cost += recorded_cost(exchange, prices)
            if cost:
                total[client] = cost
        delta = {c: v - self._saved.get(c, 0.0) for c, v in total.items()}
        self._saved = total
        return {c: v for c, v in delta.items() if v > 0}

    def _write(self, exchanges: Mapping[str, list[dict[str, Any]]], overflow: list[str]) -> str:
        """Write the new episode; the problem when it cannot be ("" when written)."""
        if overflow:
            return (
                f"cassette {self.name} not recorded: the {overflow[0]}'s exchanges outgrew the "
                "recording bound"
            )
        cassette = Cassette(
            self.scenario_id,
            self.attempt_no,
            self.owner.identity,
            {c: _overlaps_kept(v) for c, v in exchanges.items()},
        )
        try:
            self.owner.vouch(self.name, write_cassette(self.path, cassette))
        except CassetteError as exc:
            return str(exc)
        self.cassette = cassette
        return ""

    def _keep_replayed(self) -> str:
        """A cassette replayed in full stays as it is: listed in the manifest (as its own
        manifest listed it, when restored), and copied into ``DIR`` when it was read from a
        restored artifact, so that ``DIR`` holds every episode of the run."""
        source = self.owner.source / self.name
        data = read_bounded(source)
        if isinstance(data, str):
            return data
        trusted = self.owner.trusted
        self.owner.vouch(
            self.name, digest(data), trusted.entries.get(self.name) if trusted else None
        )
        if source == self.path:
            return ""
        try:
            write_text_atomically(self.path, data.decode("utf-8"))
        except (CassetteError, UnicodeDecodeError) as exc:
            return str(exc)
        return ""

    def discard(self) -> None:
        """Remove the agent's tape files from the private directory."""
        for path in (self.agent_in, self.agent_out, self.live_flag):
            with contextlib.suppress(OSError):
                path.unlink()


def _overlaps_kept(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges with ``concurrent`` naming only calls that are in the episode (a call that
    failed before it completed was in flight for ever, and is no exchange)."""
    calls = {x.get("call") for x in exchanges}
    out = []
    for exchange in exchanges:
        overlapped = [c for c in exchange.get("concurrent") or () if c in calls]
        rest = {k: v for k, v in exchange.items() if k != "concurrent"}
        out.append({**rest, "concurrent": overlapped} if overlapped else rest)
    return out


__all__ = [
    "ACTIVE",
    "CLIENT",
    "AttemptTapes",
    "Cassettes",
    "ReplayConfigError",
    "active",
    "calls_of",
    "load_rules",
]
