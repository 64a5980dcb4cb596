"""Cold starts: one fresh interpreter per agent, running the host script by path.

The fallback that works wherever the agent's Python does (no fork, no preload), and the
reference the warm path is compared against. The host is its own session and process group
(so the runner can stop it with ``killpg``) and inherits only its control channel.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Literal

from lkeval.agents.interface import AgentProc, LaunchError, SpawnRequest
from lkeval.host import agent_host

HOST_SCRIPT = Path(agent_host.__file__).resolve()


class ColdLauncher:
    """Starts each agent in a new interpreter; ``why`` says why the run is not warm."""

    def __init__(self, python: str, why: str = "") -> None:
        self.python = python
        self.why = why

    @property
    def mode(self) -> Literal["cold"]:
        return "cold"

    async def spawn(self, request: SpawnRequest) -> AgentProc:
        """Start ``python agent_host.py ...`` with stdout and stderr appended to the log."""
        # The host runs by path: the agent's interpreter needs livekit-agents, not lk-eval.
        argv = [self.python, str(HOST_SCRIPT), *request.host_args]
        with request.log_path.open("ab") as log:
            try:
                return await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=str(request.cwd),
                    env=dict(request.env),
                    start_new_session=True,
                    pass_fds=(request.control_fd,),
                )
            except OSError as exc:
                raise LaunchError(f"could not start {self.python}: {exc}") from None

    def close(self) -> None:
        """Nothing to stop: each cold agent is stopped by its own AgentProcess."""


def python_problem(python: str, timeout: float = 60.0) -> str | None:
    """Why ``python`` cannot run agents (missing, not runnable, no livekit-agents), or None.

    Checked once before the first agent boots, so a typo'd ``--python`` is one clear line
    instead of every scenario failing to boot.
    """
    probe = (
        "import importlib.util, sys\n"
        "try:\n"
        "    found = importlib.util.find_spec('livekit.agents') is not None\n"
        "except ImportError:\n"
        "    found = False\n"
        "sys.exit(0 if found else 3)\n"
    )
    try:
        proc = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return f"{python}: no such interpreter"
    except PermissionError:
        return f"{python}: not executable"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python}: cannot run it: {exc}"
    if proc.returncode == 3:
        return f"livekit-agents is not installed for {python}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python}: not a working Python interpreter ({last})"
    return None
