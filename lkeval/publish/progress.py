"""Progress: an observer the engine calls, kept out of the engine itself.

The engine only knows its :class:`~lkeval.run.engine.ProgressObserver` protocol; what a user
sees is chosen here: one line per finished scenario in a terminal, or a collapsible
``::group::`` per scenario in GitHub Actions (the transcript and reasons folded under a
one-line title, the way ``lk agent simulate`` prints its jobs). Scenarios run concurrently,
so writes are serialised with a lock and a scenario's lines never interleave with another's.

Each finished scenario is counted against the run's total: ``[3/12 · 0:41]`` with the elapsed
time in a terminal, a compact ``[3/12]`` in CI logs (which stamp their own times).

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


class _Writer:
    def __init__(self, stream: TextIO, total: int | None = None) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        isatty = getattr(stream, "isatty", None)
        self.tty = bool(isatty and isatty())

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

    def write(self, lines: list[str]) -> None:
        text = mask("".join(line + "\n" for line in lines))
        with self._lock:
            self.stream.write(text)
            self.stream.flush()


class _Progress:
    """What both displays share: a masked, counted writer, and nothing printed at a start
    (with scenarios running in parallel, a start line is noise and a ``::group::`` opened then
    would swallow other scenarios' groups)."""

    def __init__(self, stream: TextIO, total: int | None = None) -> None:
        self._out = _Writer(stream, total)

    def scenario_started(self, scenario_id: str, label: str) -> None:
        """Nothing: see the class docstring."""


class TerminalProgress(_Progress):
    """One line per finished scenario, with the reason when it did not pass."""

    def scenario_finished(self, result: ScenarioResult) -> None:
        """Print ``✓ label (1.2s)``; a scenario that did not pass gets ``— reason`` appended."""
        result = mask_results(result)  # mask before anything is cut
        line = f"{self._out.counter()} {headline(result)}"
        reason = primary_reason(result) if result.status != "passed" else ""
        if reason:
            line += f" — {terminal_text(reason, 160)}"
        self._out.write([inert_line(line, 4000)])  # a CI log may still read it for commands


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
        self._out.write([command("group", title), *inert(lines), "::endgroup::"])


def make_progress(stream: TextIO, github: bool, total: int | None = None) -> ProgressObserver:
    """The progress display for where lk-eval runs (``github``: inside GitHub Actions);
    ``total`` is the number of scenarios the run will report."""
    if github:
        return GitHubProgress(stream, total)
    return TerminalProgress(stream, total)
