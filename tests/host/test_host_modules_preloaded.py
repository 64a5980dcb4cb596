"""The fork server loads the host's siblings before it forks, as the agent's interpreter
loads them (by path, under private names), so no forked agent compiles or runs them again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lkeval.host import agent_host

SERVER = Path(agent_host.__file__).with_name("fork_server.py")

PROBE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("_probe_fork_server", sys.argv[1])
server = importlib.util.module_from_spec(spec)
spec.loader.exec_module(server)  # by path, as the agent's interpreter runs it
dict(server.WARM_CALLS)["host modules"]()
again = [server.agent_host.sibling(n) is sys.modules["_lkeval_" + n] for n in sys.argv[2:]]
print(all(again), " ".join(sorted(n for n in sys.modules if n.startswith("_lkeval_"))))
"""


def test_the_fork_server_loads_every_host_module_the_agent_uses() -> None:
    names = list(agent_host.HOST_MODULES)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(SERVER), *names],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    same, loaded = proc.stdout.split(" ", 1)
    assert same == "True"  # what a child's ``sibling(name)`` returns is the preloaded module
    assert {f"_lkeval_{n}" for n in names} <= set(loaded.split())
