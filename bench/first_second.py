"""Benchmark: how long ``lkeval run`` is out of reach of its own signal handling (issue 30.6).

From the moment the process exists (``Popen`` returned: the interpreter is exec'd) to the
moment lk-eval has its SIGTERM handler in place (its first line has run: read from the
``SigCgt`` mask in ``/proc/PID/status``, polled): a signal in that window ends Python the way
Python ends (SIGTERM's default kills it with nothing written). For comparison, the same for a
bare interpreter that installs a handler in its first line (``python -c``): the part that is
the interpreter's own start.

    python bench/first_second.py [--runs 20]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine

_HANDLER = "import signal, time; signal.signal(signal.SIGTERM, lambda *a: None); time.sleep(30)"


def _catches_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def _window(argv: list[str]) -> float:
    """Seconds from the process's start to its SIGTERM handler."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    try:
        while not _catches_sigterm(proc.pid):
            if proc.poll() is not None:
                raise SystemExit(f"{argv} exited before it held SIGTERM")
            time.sleep(0.001)  # not a busy loop: it would take the CPU from the start it times
        return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(machine())
    lkeval = [sys.executable, "-m", "lkeval", "run", "--agent", "agent.py", "--scenarios", "s"]
    bare = [sys.executable, "-c", _HANDLER]
    for name, argv in (("python -c (a handler in its first line)", bare), ("lkeval run", lkeval)):
        ms = sorted(1000 * _window(argv) for _ in range(args.runs))
        print(
            f"{name}: median {statistics.median(ms):.0f} ms, "
            f"p90 {ms[int(0.9 * (len(ms) - 1))]:.0f} ms, max {ms[-1]:.0f} ms ({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
