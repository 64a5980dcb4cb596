"""Benchmark: an LLM-bound suite at several concurrencies and at the default (issue 20.2, 20.3).

N hotel-like scripted scenarios (default 40: a greeting and 3 turns each, one LLM answer per
turn) against the example agent, every LLM answer after ``--delay`` seconds (default 1 s, a
real provider's pace), through the real ``lkeval run`` with one attempt per scenario. For each
concurrency (and once at lk-eval's default, no ``--concurrency``) it prints the wall time of the
whole process, the per-turn p50/p95 as a multiple of the LLM's latency (each turn is one LLM
answer, so 1.00x is a turn with no overhead at all) and the longest turn in seconds (how close
it came to ``--turn-timeout``), the peak PSS of lk-eval's whole process
tree (lk-eval, the fork server, every agent; sampled every 0.5 s from /proc) and the number of
agent processes alive at the peak, and the CPU the whole tree used (user + system, from the
children's rusage once lk-eval has exited: agents are reaped by the fork server, the fork
server by lk-eval), per LLM answer and as a share of the machine's cores over the wall time,
which says whether the suite was CPU-bound. Verdicts must be the same everywhere (all pass):
every scenario that did not pass is printed with its status and reason, and the run's work
directory (results.json, the agents' logs in logs/, lk-eval's own output in lkeval.log) is then
kept and its path printed.

    python bench/concurrency.py [--scenarios 40] [--delay 1] [--concurrency 2,4,8,16,32]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from _common import (
    HOTEL_AGENT,
    ROOT,
    hotel_env,
    llm_server_process,
    machine,
    smaps_rollup,
    write_echo_rules,
)

TURNS = 3


def write_inputs(work: Path, scenarios: int, delay: float) -> tuple[Path, Path]:
    rules = write_echo_rules(work / "rules.yaml", delay)
    path = work / "scenarios.yaml"
    turn = {"expect": [{"message": {"contains": "Noted"}}]}
    path.write_text(
        yaml.safe_dump(
            {
                "name": "Concurrency bench",
                "scenarios": [
                    {
                        "id": f"guest-{k:03d}",
                        "label": f"Guest {k}",
                        "turns": [
                            {"user": f"question {t} from guest {k}", **turn} for t in range(TURNS)
                        ],
                    }
                    for k in range(scenarios)
                ],
            },
            sort_keys=False,
        )
    )
    return rules, path


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
                ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, queue = [root], [root]
    while queue:
        for child in children.get(queue.pop(), ()):
            found.append(child)
            queue.append(child)
    return found


class PeakMemory:
    """Samples the PSS of a process tree every 0.5 s; keeps the peak and its process count."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak_kib, self.peak_procs = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            total, procs = 0, 0
            for pid in _tree(self.pid):
                try:
                    total += smaps_rollup(pid)["Pss"]
                    procs += 1
                except (OSError, KeyError):
                    pass
            if total > self.peak_kib:
                self.peak_kib, self.peak_procs = total, procs

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_suite(
    concurrency: int | None, scenarios: Path, env: dict[str, str], work: Path, delay: float
) -> dict[str, float]:
    label = str(concurrency) if concurrency else "default"
    results = work / label / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    args = [
        *("run", "--agent", str(HOTEL_AGENT), "--scenarios", str(scenarios)),
        *("--results", str(results), "--comment", "off", "--no-github", "--repeat", "1"),
    ]
    if concurrency:
        args += ["--concurrency", str(concurrency)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lkeval", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    memory = PeakMemory(proc.pid)
    out, _ = proc.communicate()
    wall = time.monotonic() - started
    lkeval_log = results.parent / "lkeval.log"
    lkeval_log.write_text(out)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    memory.stop()
    if not results.is_file():
        raise RuntimeError(f"lkeval run failed ({proc.returncode}):\n{out}")
    data = json.loads(results.read_text())
    turns = sorted(t for s in data["scenarios"] for a in s["attempts"] for t in a["turn_seconds"])
    failed = [s for s in data["scenarios"] if s["status"] != "passed"]
    for s in failed:
        logs = ", ".join(str(a.get("log_path")) for a in s["attempts"])
        print(f"    {s['scenario_id']}: {s['status']}: {s['reason']}", flush=True)
        print(f"      results {results}; agent log {logs}; lk-eval's log {lkeval_log}")
    return {
        "wall": wall,
        "p50": statistics.median(turns) / delay,
        "p95": turns[int(0.95 * (len(turns) - 1))] / delay,
        "max_s": turns[-1],
        "pss_mib": memory.peak_kib / 1024,
        "procs": memory.peak_procs,
        "failed": len(failed),
        "cpu": cpu,
        "cpu_per_answer": cpu / (len(data["scenarios"]) * (TURNS + 1)),
        "busy": cpu / (wall * (os.cpu_count() or 1)),
        "concurrency": float(data["metadata"].get("concurrency") or 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", type=int, default=40)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--concurrency", default="2,4,8,16,32")
    parser.add_argument("--no-default", action="store_true", help="skip the run at the default")
    args = parser.parse_args()
    levels: list[int | None] = [int(c) for c in args.concurrency.split(",") if c]
    if not args.no_default:
        levels.append(None)
    print(f"machine: {machine()}")
    rows: dict[str, dict[str, float]] = {}
    work = Path(tempfile.mkdtemp(prefix="lkeval-bench-concurrency-"))
    try:
        rules, scenarios = write_inputs(work, args.scenarios, args.delay)
        with llm_server_process(rules) as base_url:
            env = {**os.environ, **hotel_env(base_url)}
            env.pop("GITHUB_ACTIONS", None)
            for c in levels:
                label = str(c) if c else "default"
                r = rows[label] = run_suite(c, scenarios, env, work, args.delay)
                print(
                    f"  c={label:>7s}: wall {r['wall']:6.1f}s  turn p50 {r['p50']:.2f}x p95 "
                    f"{r['p95']:.2f}x of the LLM, longest {r['max_s']:.0f}s  "
                    f"peak PSS {r['pss_mib']:6.0f} MiB in "
                    f"{r['procs']:.0f} processes  CPU {r['cpu']:.0f} s "
                    f"({r['cpu_per_answer'] * 1000:.0f} ms per LLM answer, "
                    f"{r['busy']:.0%} of the cores)  load {os.getloadavg()[0]:.1f}"
                    + (f"  {r['failed']:.0f} NOT PASSED" if r["failed"] else ""),
                    flush=True,
                )
    finally:
        if any(r["failed"] for r in rows.values()) or len(rows) < len(levels):
            print(f"kept for reading: {work} (results.json, logs/, lkeval.log per concurrency)")
        else:
            shutil.rmtree(work, ignore_errors=True)
    fixed = {k: v for k, v in rows.items() if k != "default"}
    if fixed and "default" in rows:
        best = min(fixed, key=lambda k: fixed[k]["wall"])
        ratio = rows["default"]["wall"] / fixed[best]["wall"]
        print(
            f"\n{args.scenarios} scenarios x {TURNS + 1} LLM answers after {args.delay:g} s: "
            f"the default is {ratio:.2f}x the best fixed concurrency (c={best})"
        )
    return 1 if any(r["failed"] for r in rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
