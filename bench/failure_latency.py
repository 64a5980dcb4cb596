"""Benchmark: how fast a broken agent becomes a result (issue 10, "fast, honest failure").

(a) Fatal-error latency: the time from an agent's fatal error to its scenario's result line,
    through the real ``lkeval run``. The error's moment is read from the agent's own raw log
    (lk-eval keeps it in a private temp dir until the agent stops; the bench gives lk-eval its
    own TMPDIR and polls it every 10 ms); the result's moment is when lk-eval prints the
    scenario's line. Goal: <= 5 s (not the 90 s turn timeout). One attempt per scenario
    (``--repeat 1``): the fatal error of the first attempt is timed to that attempt's result.
(b) A 100-scenario suite whose agent LLM is dead: wall time of the whole ``lkeval run`` with
    the defaults (``--max-errors``, and the sequential test's attempts), and, with
    ``--compare``, with ``--max-errors 0`` (every scenario booted and failed). Goal: <= 30 s.

Agents are tests/agents/broken_agent.py, breakage chosen per scenario (userdata); no LLM but the
dead one is involved (scripted scenarios).

    python bench/failure_latency.py [--repeat 3] [--suite 100] [--compare]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from _common import ROOT, machine

AGENT = ROOT / "tests" / "agents" / "broken_agent.py"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MARK = re.compile(r"^(?:\[\d+/\d+\] )?([!✓✗-]) ")  # a progress line: "[3/100] ! s003 (...)"
# breakage -> the log text that marks the fatal moment
FATAL = {
    "dead_llm_close": "AgentSession is closing due to unrecoverable error",
    "dead_llm_stay": "failed to generate LLM completion after",
    "crash_in_turn": '"function": "explode"',
    "crash_after_greeting": '"role": "assistant"',
}


def scenario(sid: str, broken: str) -> dict[str, object]:
    turn = {"user": "hello", "expect": [{"message": {"role": "assistant"}}]}
    return {"id": sid, "label": sid, "userdata": {"broken": broken}, "turns": [turn]}


def env(tmpdir: Path) -> dict[str, str]:
    drop = ("GITHUB_", "INPUT_", "OPENAI_", "LKEVAL_", "LIVEKIT_")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k != "CI"}
    return {**keep, "TMPDIR": str(tmpdir)}


def run(work: Path, scenarios: list[dict[str, object]], *flags: str) -> subprocess.Popen[str]:
    path = work / "scenarios.yaml"
    path.write_text(yaml.safe_dump({"name": "Broken", "scenarios": scenarios}))
    argv = [
        sys.executable,
        "-m",
        "lkeval",
        "run",
        "--agent",
        str(AGENT),
        "--scenarios",
        str(path),
        "--results",
        str(work / "results.json"),
        *flags,
    ]
    private = work / "tmp"
    private.mkdir(exist_ok=True)
    return subprocess.Popen(
        argv,
        env=env(private),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )


def watch_logs(tmpdir: Path, found: dict[str, float], stop: threading.Event) -> None:
    """Record, per scenario, when its agent's raw log first shows the fatal marker."""
    while not stop.is_set():
        for sid, marker in FATAL.items():
            if sid in found:
                continue
            try:
                raw = next(tmpdir.glob(f"lkeval-raw-logs-*/{sid}.log"))
                text = ANSI.sub("", raw.read_text(errors="replace"))
            except (OSError, StopIteration):
                continue
            if marker in text:
                found[sid] = time.monotonic()
        time.sleep(0.01)


def fatal_latency(repeat: int) -> dict[str, list[float]]:
    """(a): seconds from each breakage's fatal log line to its result line."""
    out: dict[str, list[float]] = {sid: [] for sid in FATAL}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            found: dict[str, float] = {}
            stop = threading.Event()
            watcher = threading.Thread(target=watch_logs, args=(work / "tmp", found, stop))
            watcher.start()
            proc = run(
                work,
                [scenario(sid, sid) for sid in FATAL],
                "--concurrency",
                "1",
                "--max-errors",
                "0",
                "--repeat",  # one attempt: the sequential default plays a failing scenario
                "1",  # 3 times, and its line comes after the last (the first error's 3x)
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                sid = next((s for s in FATAL if f" {s} (" in line), None)
                if sid is not None and sid in found:
                    out[sid].append(time.monotonic() - found[sid])
            proc.wait()
            stop.set()
            watcher.join()
    return out


def suite_wall(size: int, *flags: str) -> tuple[float, int, int]:
    """(b): wall seconds of a suite of ``size`` dead-LLM scenarios; (seconds, errors, not run)."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started = time.monotonic()
        proc = run(work, [scenario(f"s{i:03d}", "dead_llm_stay") for i in range(size)], *flags)
        lines = proc.communicate()[0].splitlines()
        wall = time.monotonic() - started
    errors = sum(1 for line in lines if MARK.match(line) and MARK.match(line).group(1) == "!")
    not_run = sum(1 for line in lines if MARK.match(line) and MARK.match(line).group(1) == "-")
    return wall, errors, not_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--suite", type=int, default=100)
    parser.add_argument("--compare", action="store_true", help="also run with --max-errors 0")
    args = parser.parse_args()
    print(machine())
    print(f"(a) fatal error -> scenario result, {args.repeat} run(s), concurrency 1 (goal <= 5 s)")
    for sid, values in fatal_latency(args.repeat).items():
        if values:
            print(
                f"    {sid:22s} median {statistics.median(values):5.2f} s  "
                f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
            )
        else:
            print(f"    {sid:22s} not measured (marker not seen)")
    print(f"(b) {args.suite} scenarios, dead agent LLM, default concurrency (goal <= 30 s)")
    wall, errors, not_run = suite_wall(args.suite)
    print(f"    default --max-errors: {wall:6.1f} s wall, {errors} error(s), {not_run} not run")
    if args.compare:
        wall, errors, not_run = suite_wall(args.suite, "--max-errors", "0")
        print(f"    --max-errors 0:       {wall:6.1f} s wall, {errors} error(s), {not_run} not run")


if __name__ == "__main__":
    main()
