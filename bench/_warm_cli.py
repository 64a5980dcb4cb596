"""``lkeval`` with warm starts, for a CLI that does not create the fork server itself yet.

Until ``lkeval run`` owns a fork server (see BENCHMARKS.md), this runs the real CLI unchanged
except that the ``AgentLaunch`` it builds gets one, started by :func:`open_launcher` exactly as
the run command would, and closed at exit.
"""

from __future__ import annotations

import atexit
import dataclasses
import sys
from typing import Any

from lkeval import cli, run_command
from lkeval.agents.process import AgentLaunch, agent_env
from lkeval.agents.fork_client import open_launcher


def _launch_with_server(*args: Any, **kwargs: Any) -> AgentLaunch:
    launch = AgentLaunch(*args, **kwargs)
    server, line = open_launcher(
        launch.python, agent_env(launch), agent=launch.agent, cwd=launch.cwd
    )
    print(line, file=sys.stderr, flush=True)
    if server.mode == "cold":
        return launch
    atexit.register(server.close)
    return dataclasses.replace(launch, launcher=server)


if __name__ == "__main__":
    run_command.AgentLaunch = _launch_with_server
    sys.exit(cli.main())
