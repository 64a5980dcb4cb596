"""Benchmark: the run's memory as a whole (issue 30.4), heavy agents at a high concurrency.

N scenarios of an agent that holds M MiB of its own (tests/agents/held_agent.py with
HOLD_MIB; each answer ~S s late, so agents live side by side) through the real CLI at
``--concurrency N``. Every 0.5 s it sums the proportional set size of lk-eval's agents (every
descendant but the fork server) and prints the peak against the bound the run stated in its
first lines. With ``--cgroup-mib`` the run is put in a memory cgroup of that size first (root;
tests/memory_cgroup.py), and the cgroup's own peak and OOM kills are printed too.

    python bench/memory_plan.py [--agents 32] [--mib 300] [--reply 20] [--cgroup-mib 4096]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import yaml
from _common import ROOT, machine, smaps_rollup

sys.path.insert(0, str(ROOT / "tests"))
from memory_cgroup import MemoryCgroup, memory_cgroup  # the tests' helper

HELD = ROOT / "tests" / "agents" / "held_agent.py"


def _agents_pss_mib(root: int) -> float:
    """Sum of the PSS of ``root``'s descendants that are agents (not the fork server)."""
    total = 0
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(root).children(recursive=True):
            with contextlib.suppress(psutil.Error, OSError):
                if child.ppid() == root and "fork_server.py" in " ".join(child.cmdline()):
                    continue  # the server itself (its forked agents carry its command line)
                total += smaps_rollup(child.pid).get("Pss", 0)
    return total / 1024


@contextlib.contextmanager
def _cgroup(mib: int | None) -> Iterator[MemoryCgroup | None]:
    if mib is None:
        yield None
        return
    with memory_cgroup(mib) as cgroup:
        yield cgroup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--mib", type=int, default=300)
    parser.add_argument("--reply", type=float, default=20.0)
    parser.add_argument("--cgroup-mib", type=int, default=None)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp, _cgroup(args.cgroup_mib) as cgroup:
        turn = {"user": "hello", "expect": [{"message": {"contains": "You said"}}]}
        scenarios = [{"id": f"m{i}", "label": f"M{i}", "turns": [turn]} for i in range(args.agents)]
        path = Path(tmp) / "memory.yaml"
        path.write_text(yaml.safe_dump({"name": "Memory", "scenarios": scenarios}))
        argv = [sys.executable, "-m", "lkeval", "run", "--agent", str(HELD), "--scenarios"]
        argv += [str(path), "--results", f"{tmp}/out/results.json", "--repeat", "1"]
        argv += ["--concurrency", str(args.agents), "--boot-timeout", "300"]
        argv += ["--turn-timeout", "300", "--no-github"]
        env = {**os.environ, "OPENAI_API_KEY": "k", "HOLD_MIB": str(args.mib)}
        env["HOLD_REPLY_SECONDS"] = str(args.reply)
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=cgroup.join if cgroup else None,
        )
        peak = [0.0]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], _agents_pss_mib(proc.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, _ = proc.communicate()
        sampler.join()
        wall = time.monotonic() - started
        for line in out.splitlines():
            if line.startswith(("memory:", "lk-eval gate:", "lk-eval: warm", "lk-eval: cold")):
                print(line)
        print(f"exit {proc.returncode}, wall {wall:.1f} s")
        print(f"agents' peak total PSS (sampled every 0.5 s): {peak[0]:.0f} MiB")
        if cgroup is not None:
            print(f"cgroup peak {cgroup.peak_mib():.0f} MiB, OOM kills {cgroup.oom_kills()}")


if __name__ == "__main__":
    main()
