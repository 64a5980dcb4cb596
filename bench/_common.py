"""Shared plumbing of the benchmarks: the example agent on the local LLM, figures, the machine.

The benchmarks are scripts, not tests: each prints its figures and the ratios measured in the
same run, so a reader can compare like with like on whatever machine ran them.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOTEL = ROOT / "examples" / "hotel"
HOTEL_AGENT = HOTEL / "agent.py"
HOTEL_RULES = HOTEL / "llm_rules.yaml"
if str(ROOT) not in sys.path:  # run as `python bench/x.py` from a checkout
    sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def hotel_fork_server() -> Iterator[tuple[Any, Any, Path]]:
    """The example agent on the local LLM, its cold launch, and a warm fork server for it:
    yields (cold launch, fork server, scratch dir); everything is stopped on the way out."""
    from lkeval.agents.fork_client import ForkServer
    from lkeval.agents.process import AgentLaunch, agent_env
    from lkeval.testing.llm_server import LLMServer

    with LLMServer.from_file(HOTEL_RULES) as llm, tempfile.TemporaryDirectory() as tmp:
        base = AgentLaunch(HOTEL_AGENT, env=hotel_env(llm.base_url))
        server = ForkServer.start(sys.executable, agent_env(base), agent=HOTEL_AGENT)
        print(server.describe())
        try:
            yield base, server, Path(tmp)
        finally:
            server.close()


def hotel_env(base_url: str) -> dict[str, str]:
    """The example agent's environment: its LLM is the local scripted server."""
    return {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "bench-key-not-secret",
        "HOTEL_AGENT_MODEL": "hotel-agent",
    }


def write_echo_rules(path: Path, delay: float) -> Path:
    """Rules for the example agent: "Welcome!" to greet, "Noted: <the user's line>" to every
    turn, each answer after ``delay`` seconds (a real provider's pace)."""
    import yaml

    rules = [
        {"model": "hotel-agent", "system": "Greet", "text": "Welcome!", "delay": delay},
        {"model": "hotel-agent", "text": "Noted: {last_user}", "delay": delay},
    ]
    path.write_text(yaml.safe_dump({"rules": rules}))
    return path


def stats(values: Sequence[float]) -> str:
    """``median (min-max, n)`` in milliseconds."""
    ms = [v * 1000 for v in values]
    return (
        f"median {statistics.median(ms):8.1f} ms  (min {min(ms):7.1f}, max {max(ms):7.1f}, "
        f"n={len(ms)})"
    )


def machine() -> str:
    """nproc, CPU model, memory, load: what a figure means depends on all four."""
    cpu = platform.processor() or "unknown CPU"
    mem = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem}, load average {load}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def mib(kib: float) -> str:
    return f"{kib / 1024:7.1f} MiB"


def smaps_rollup(pid: int) -> dict[str, int]:
    """Rss/Pss/USS (Private_Clean + Private_Dirty) of a process in KiB, Linux only."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            out[parts[0][:-1]] = int(parts[1])
    out["Uss"] = out.get("Private_Clean", 0) + out.get("Private_Dirty", 0)
    return out


@contextlib.contextmanager
def llm_server_process(rules: Path) -> Iterator[str]:
    """The scripted LLM in its own process (not a thread of the benchmark: an in-process agent
    would otherwise share its GIL with the server); yields the base URL.

    With TCP_NODELAY: the server writes a streamed answer in several small writes, and on a
    kept-alive connection Nagle's algorithm meets the client's delayed ACK, adding ~40 ms to
    every request after the first, which would swamp the turn times measured here.
    """
    serve = (
        "import sys, lkeval.testing.llm_server as m; "
        "m._Handler.disable_nagle_algorithm = True; sys.exit(m.main(sys.argv[1:]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", serve, "--rules", str(rules)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"the LLM server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def edit(agent: Path, round_no: int) -> None:
    """What a developer's edit does to the agent module: new source, compiled again."""
    with agent.open("a", encoding="utf-8") as fh:
        fh.write(f"# edit {round_no}\n")


def wall(argv: list[str], env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    """Seconds from start to exit of one command, whose exit code must be one of ``ok`` (the
    figure is of the run measured, not of a failure)."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in ok:
        sys.exit(f"{argv[2:4]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds
