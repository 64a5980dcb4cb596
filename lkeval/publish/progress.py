"""Progress: an observer the engine calls, kept out of the engine itself.

The engine only knows its :class:`~lkeval.run.engine.ProgressObserver` protocol; what a user
sees is chosen here: one line per finished scenario in a terminal, or a collapsible
``::group::`` per scenario in GitHub Actions (the transcript and reasons folded under a
one-line title, the way ``lk agent simulate`` prints its jobs). Scenarios run concurrently,
so writes are serialised with a lock and a scenario's lines never interleave with another's.

Each finished scenario is counted against the run's total: ``[3/12 · 0:41]`` with the elapsed
time in a terminal, a compact ``[3/12]`` in CI logs (which stamp their own times). While
scenarios run and nothing else is printed, a status line says how many run, wait and are
decided: redrawn in place every second on a terminal, a line every 10 s in a CI log, so a long
conversation never looks like a hang.

Output passes through the process's one masker (:mod:`lkeval.text.masking`): the log of a
public repository's workflow is as public as its PR comments.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

from lkeval.results.metrics import format_ms, scenario_metrics
from lkeval.results.model import ScenarioResult
from lkeval.results.pricing import format_cost
from lkeval.results.wording import (
    attempt_to_show,
    count,
    failure_reasons,
    format_transcript,
    is_repeated,
    plain,
    primary_reason,
    repeat_summary,
    seconds,
)
from lkeval.run.engine import ProgressObserver
from lkeval.text.masking import mask, mask_results
from lkeval.text.untrusted import command, inert, inert_line, terminal_text

MARK = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "-"}


def headline(result: ScenarioResult) -> str:
    """``✓ label (1.2s)``, plus the repeat count and ``quarantined`` when they apply."""
    extra = []
    if is_repeated(result):
        extra.append(repeat_summary(result) or "")
    if result.quarantined:
        extra.append("quarantined")
    metrics = scenario_metrics(result)
    if metrics.latency is not None:  # latency and cost per scenario, where they were measured
        extra.append(f"{count(metrics.turns, 'turn')}, p95 {format_ms(metrics.latency.p95)}")
        if metrics.usage:
            extra.append(format_cost(metrics.cost_usd, metrics.unpriced))
    suffix = f", {', '.join(extra)}" if extra else ""
    mark = MARK.get(result.status, "?")
    return f"{mark} {terminal_text(result.label, 120)} ({seconds(result.duration_seconds)}{suffix})"


#: Seconds of silence before the status line is shown: redrawn in place on a terminal; a
#: line of its own in a CI log, which keeps every line (so less often).
STATUS_EVERY_TTY = 1.0
STATUS_EVERY_LOG = 10.0


class _Writer:
    def __init__(
        self, stream: TextIO, total: int | None = None, status_every: float | None = None
    ) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self.total = total
        self.done = 0
        self.running = 0
        self.started = time.monotonic()
        isatty = getattr(stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        default_every = STATUS_EVERY_TTY if self.tty else STATUS_EVERY_LOG
        self.status_every = default_every if status_every is None else status_every
        self._last_write = self.started
        self._status_shown = False  # a status line is on the terminal's last line
        self._ticker: threading.Thread | None = None

    def scenario_started(self) -> None:
        """Count a scenario as running; the status ticker starts with the first."""
        with self._lock:
            self.running += 1
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, daemon=True, name="status")
                self._ticker.start()

    def status(self) -> str:
        """``… 3 running, 4 waiting, 5 of 12 decided · 0:41``: never 20 s of silence."""
        minutes, secs = divmod(int(time.monotonic() - self.started), 60)
        parts = [f"{self.running} running"]
        if self.total:
            waiting = max(self.total - self.done - self.running, 0)
            parts += [f"{waiting} waiting", f"{self.done} of {self.total} decided"]
        else:
            parts.append(f"{self.done} decided")
        return f"… {', '.join(parts)} · {minutes}:{secs:02d}"

    def _tick(self) -> None:
        while True:
            time.sleep(min(self.status_every, 1.0))
            with self._lock:
                if self.total is not None and self.done >= self.total:
                    return
                quiet = time.monotonic() - self._last_write >= self.status_every
                if not (quiet and self.running):
                    continue
                if self.tty:  # redrawn in place, wiped before the next real line
                    self.stream.write("\r\x1b[K" + self.status())
                    self._status_shown = True
                else:
                    self.stream.write(self.status() + "\n")
                self._last_write = time.monotonic()
                self.stream.flush()

    def counter(self) -> str:
        """``[3/12 · 0:41]`` on a terminal, ``[3/12]`` elsewhere; counts one more scenario."""
        with self._lock:
            self.done += 1
            done = self.done
        of = f"/{self.total}" if self.total and done <= self.total else ""
        if not self.tty:
            return f"[{done}{of}]"
        minutes, secs = divmod(int(time.monotonic() - self.started), 60)
        return f"[{done}{of} · {minutes}:{secs:02d}]"

    def write(self, lines: list[str], finished: bool = False) -> None:
        text = mask("".join(line + "\n" for line in lines))
        with self._lock:
            if finished:
                self.running = max(self.running - 1, 0)
            if self._status_shown:
                text = "\r\x1b[K" + text
                self._status_shown = False
            self.stream.write(text)
            self.stream.flush()
            self._last_write = time.monotonic()


class _Progress:
    """What both displays share: a masked, counted writer, and nothing printed at a start
    (with scenarios running in parallel, a start line is noise and a ``::group::`` opened then
    would swallow other scenarios' groups)."""

    def __init__(
        self, stream: TextIO, total: int | None = None, status_every: float | None = None
    ) -> None:
        self._out = _Writer(stream, total, status_every)

    def scenario_started(self, scenario_id: str, label: str) -> None:
        """No line (see the class docstring): counted in the status line instead."""
        self._out.scenario_started()


class TerminalProgress(_Progress):
    """One line per finished scenario, with the reason when it did not pass."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        """Print ``✓ label (1.2s)``; a scenario that did not pass gets ``— reason`` appended."""
        result = mask_results(result)  # mask before anything is cut
        line = f"{self._out.counter()} {headline(result)}"
        reason = primary_reason(result) if result.status != "passed" else ""
        if reason:
            line += f" — {terminal_text(reason, 160)}"
        # a CI log may still read it for commands
        self._out.write([inert_line(line, 4000)], finished=True)


class GitHubProgress(_Progress):
    """A collapsed log group per scenario: title line, then transcript and reasons inside."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        """Print the scenario's group in one write."""
        result = mask_results(result)  # mask before anything is cut
        lines: list[str] = []
        reasons = failure_reasons(result) if result.status != "passed" else []
        if reasons:
            lines.append("Reasons:")
            lines.extend(f"  {plain(r)}" for r in reasons)
        attempt = attempt_to_show(result)
        if attempt is not None and attempt.transcript:
            lines.append("Transcript:")
            lines.extend(f"  {plain(line)}" for line in format_transcript(attempt.transcript))
        if attempt is not None and result.status == "error" and attempt.log_tail:
            lines.append("Last log lines:")
            lines.extend(f"  {plain(line)}" for line in attempt.log_tail[-20:])
        title = f"{self._out.counter()} {headline(result)}"
        self._out.write([command("group", title), *inert(lines), "::endgroup::"], finished=True)


def make_progress(stream: TextIO, github: bool, total: int | None = None) -> ProgressObserver:
    """The progress display for where lk-eval runs (``github``: inside GitHub Actions);
    ``total`` is the number of scenarios the run will report."""
    if github:
        return GitHubProgress(stream, total)
    return TerminalProgress(stream, total)
