"""The fork server started in ``lkeval run``'s first lines, before lk-eval's own imports.

The fork server's preload (the framework's import, ~2.9 s of its own CPU) is the longest
thing a run waits for before its first agent. Started by the suite, it began only after
lk-eval had imported its command line (~0.5 s) and loaded the scenarios; started here, from
``python -m lkeval``'s first lines (:mod:`lkeval.__main__`), it preloads on one core while
lk-eval imports and checks on the other. What it needs is read from argv without the
command line's parser (which imports everything): the agent, ``--python``, ``--env`` and
``--inference-class``, and the environment is built by the same function the run uses
(:func:`~lkeval.agents.environment.agent_environment`).

It is a guess, and only ever used when it is right: the suite claims it
(:meth:`EarlyStart.claim`) with the launch it would start itself (interpreter, environment,
agent, directory), and anything else (a flag this reading took differently, a changed
environment) kills it and the suite starts its own. Nothing starts when the guess cannot be
made or the run may not want a server: not ``run``, ``--help``, ``--cold-start``, ``--shard``
(an empty shard boots nothing, and only the scenarios say whether it is empty),
``--cassette-mode replay`` (the agent's placeholder keys), ``--cassettes-from`` (a download
before the run, which a Ctrl-C must still cut short), a missing agent file, anything this
reading does not follow.

What it leaves is the run's to remove: a run that stops before it claims the server (bad
flags, bad scenarios, an empty shard, a signal) discards it (:meth:`EarlyStart.discard`,
called by the suite, and :meth:`EarlyStart.end` by ``__main__`` on every way out): the
server is killed and its raw log directory (private, 0700) removed. A SIGINT or SIGTERM
while lk-eval imports, whether a server started or not (``--cold-start`` too), is kept for
the run (:meth:`EarlyStart.take_signal`, :class:`~lkeval.startup.HeldSignals`), which ends
with every scenario "not run (interrupted)" once its scenarios are loaded; a second one kills
the server and ends the process at once.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lkeval import defaults
from lkeval.agents.environment import agent_environment
from lkeval.agents.fork_start import ForkServerError, ServerProcess, start_server_process
from lkeval.startup import HELD, HeldSignals

RAW_LOGS_PREFIX = "lkeval-raw-logs-"
#: The flags read here (each takes a value); the rest of ``run``'s are skipped, and these
#: stop the guess: a run that may start no fork server, or with another environment.
_READ = frozenset({"--agent", "--python", "--env", "--inference-class", "--cassette-mode"})
#: ``--cassettes-from`` downloads before the run begins: a signal meanwhile must not wait.
_NOT_STARTING = frozenset({"-h", "--help", "--cold-start", "--shard", "--cassettes-from", "--"})


@dataclass(frozen=True)
class LaunchKey:
    """What a fork server is started with: two keys equal, the same server."""

    python: str
    env: tuple[tuple[str, str], ...]
    agent: Path
    cwd: Path | None = None

    @classmethod
    def of(
        cls, python: str, env: Mapping[str, str], agent: Path, cwd: Path | None = None
    ) -> LaunchKey:
        return cls(python, tuple(sorted(env.items())), agent, cwd)


@dataclass(frozen=True)
class Claimed:
    """A server handed to the suite, with the raw-log directory its log is in."""

    raw_logs: Path
    process: ServerProcess


class EarlyStart:
    """At most one fork server started before lk-eval's imports, until it is claimed or
    discarded; and, for ``lkeval run``, the signals held meanwhile (``held``: the process's
    :data:`~lkeval.startup.HELD`, which ``__main__`` holds from its first line)."""

    def __init__(self, held: HeldSignals | None = None) -> None:
        self._key: LaunchKey | None = None
        self._held: Claimed | None = None
        self._signals = held if held is not None else HeldSignals()

    def begin(self, argv: Sequence[str]) -> bool:
        """For ``lkeval run``: hold SIGINT/SIGTERM for the run, and start the fork server
        when the run will want one (see the module's docstring); whether one was started."""
        if not argv or argv[0] != "run":
            return False
        self._signals.hold(on_second=self.discard)  # a second signal: the server goes first
        key = launch_key(argv)
        if key is None:
            return False
        raw_logs = Path(tempfile.mkdtemp(prefix=RAW_LOGS_PREFIX))
        try:
            process = start_server_process(
                key.python,
                dict(key.env),
                cwd=key.cwd,
                agent=key.agent,
                log_path=raw_logs / "fork-server.log",
                log_is_raw=True,
            )
        except (ForkServerError, OSError):  # the suite finds the reason, and says it
            shutil.rmtree(raw_logs, ignore_errors=True)
            return False
        self._key, self._held = key, Claimed(raw_logs, process)
        return True

    def claim(self, key: LaunchKey) -> Claimed | None:
        """The server, if it was started with ``key`` (the caller now owns it and its raw-log
        directory); otherwise it is discarded and None. Once: later calls return None."""
        if self._held is not None and key == self._key:
            held, self._held = self._held, None
            return held
        self.discard()
        return None

    def discard(self) -> None:
        """Kill a server nobody claimed and remove its raw logs. Idempotent."""
        held, self._held = self._held, None
        if held is not None:
            held.process.kill()
            shutil.rmtree(held.raw_logs, ignore_errors=True)

    def end(self) -> None:
        """The process is leaving: :meth:`discard`, and the signals' handlers from before
        :meth:`begin` are back (the run's own were in place while it ran, and gave these
        back when it ended). Idempotent."""
        self.discard()
        self._signals.release()

    def take_signal(self) -> signal.Signals | None:
        """A SIGINT/SIGTERM that came while lk-eval was getting ready (once)."""
        return self._signals.take()

    @property
    def signal_pending(self) -> bool:
        """Whether a signal came that the run has not taken yet."""
        return self._signals.pending

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Work the run waits for before it begins (a download): a signal cuts it short with
        ``KeyboardInterrupt``, and stays kept for the run (:meth:`take_signal`)."""
        with self._signals.interruptible():
            yield


def launch_key(argv: Sequence[str]) -> LaunchKey | None:
    """The fork server ``lkeval ARGV`` would start, when argv says so plainly; else None."""
    if not argv or argv[0] != "run":
        return None
    read = _read_flags(argv[1:])
    if read is None:
        return None
    agent = read.get("--agent", [])
    if not agent or read.get("--cassette-mode", [""])[-1] == "replay":
        return None
    agent_path = Path(agent[-1])
    if not agent_path.is_file():
        return None  # the run says so, in its own words
    added = {}
    for item in read.get("--env", []):
        name, sep, value = item.partition("=")
        if not sep or not name:
            return None  # a usage error, the parser's to report
        added[name] = value
    inference_class = read.get("--inference-class", [defaults.INFERENCE_CLASS])[-1]
    python = read.get("--python", [sys.executable])[-1]
    env = agent_environment(added, inference_class)
    return LaunchKey.of(python, env, agent_path.resolve())


def _read_flags(args: Sequence[str]) -> dict[str, list[str]] | None:
    """The values of the flags in :data:`_READ`, in order; None when argv asks for no fork
    server or is not plain (a value that looks like a flag, ``--``)."""
    found: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in _NOT_STARTING or name in _NOT_STARTING:
            return None
        if name in _READ:
            if not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("-"):
                    return None
                value, i = args[i + 1], i + 1
            found.setdefault(name, []).append(value)
        i += 1
    return found


#: The process's one: ``python -m lkeval`` begins it, the suite claims it.
EARLY = EarlyStart(HELD)

__all__ = ["EARLY", "RAW_LOGS_PREFIX", "Claimed", "EarlyStart", "LaunchKey", "launch_key"]
