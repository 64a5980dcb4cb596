"""Agent-side host: runs the LiveKit thin CLI's console code path with a scenario attached.

Runs *inside* the agent process, as ``python -m lkeval.agents.agent_host AGENT.py --connect-addr
HOST:PORT --dispatch-file FILE`` (or by file path, so an agent venv without lk-eval can run it:
this module imports nothing from lk-eval).

Why not plain ``python -m livekit.agents console``: it starts the session in audio mode (a
text agent's replies are dropped, an agent with speech models opens their websockets and
closes its session), and it cannot hand the agent its scenario. Production LiveKit puts a
protojson ``SimulationDispatch`` in the job attribute ``lk.simulator.dispatch``; this host does
the same on the console's job, before the job context exists, so ``ctx.simulation_context()``,
its ``userdata()`` and the server's ``on_simulation_end`` behave as under LiveKit's simulator.

This touches private names of livekit-agents. :func:`missing_hooks` checks them first; on a
version without them the host exits with :data:`EXIT_UNSUPPORTED` and one clear line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

SUPPORTED_RANGE = ">=1.6.6,<1.9"
HOST_DIR = os.path.dirname(os.path.abspath(__file__))
EXIT_UNSUPPORTED = 78
UNSUPPORTED_MARKER = "lk-eval: unsupported livekit-agents"

# (module, attribute path) the host relies on.
HOOKS: tuple[tuple[str, str], ...] = (
    ("livekit.agents.__main__", "_discover_server"),
    ("livekit.agents.cli.cli", "_run_tcp_console"),
    ("livekit.agents.cli.cli", "AgentsConsole.get_instance"),
    ("livekit.agents.cli.cli", "AgentsConsole.console_mode"),
    ("livekit.agents.ipc.proc_pool", "ProcPool.launch_job"),
    ("livekit.agents.types", "ATTRIBUTE_SIMULATOR_DISPATCH"),
    ("livekit.protocol.agent_simulation", "SimulationDispatch"),
)


def missing_hooks() -> list[str]:
    """The private livekit-agents names this host needs that the installed version lacks."""
    missing = []
    for module_name, attr_path in HOOKS:
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr_path.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{attr_path}")
    return missing


def installed_version() -> str:
    """The installed livekit-agents version, or "unknown"."""
    try:
        from importlib.metadata import version

        return version("livekit-agents")
    except Exception:
        return "unknown"


def attach_dispatch(dispatch_json: str) -> None:
    """Make every job this process launches carry the scenario as LiveKit's simulator does."""
    from livekit.agents.ipc.proc_pool import ProcPool
    from livekit.agents.types import ATTRIBUTE_SIMULATOR_DISPATCH

    original: Callable[..., Any] = ProcPool.launch_job

    async def launch_job(self: Any, info: Any) -> Any:
        info.job.attributes[ATTRIBUTE_SIMULATOR_DISPATCH] = dispatch_json
        return await original(self, info)

    ProcPool.launch_job = launch_job  # type: ignore[method-assign]


def fast_exit(code: int) -> None:
    """Exit without the interpreter's final garbage collection (~0.75 s of a 0.8 s exit).

    The agent's own shutdown hooks have run by now (``_run_tcp_console`` returned after the
    server closed), so only flushing is left to do.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run(agent_path: str, connect_addr: str, dispatch_json: str) -> int:
    """Import the user's agent and run the console against ``connect_addr``."""
    missing = missing_hooks()
    if missing:
        print(
            f"{UNSUPPORTED_MARKER} {installed_version()}: missing {', '.join(missing)}. "
            f"lk-eval supports livekit-agents {SUPPORTED_RANGE}.",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_UNSUPPORTED

    from livekit.agents.__main__ import _discover_server
    from livekit.agents.cli.cli import AgentsConsole, _run_tcp_console

    # Text mode before the console starts: keeps replies (and an on_enter greeting) in text
    # and stops voice agents from opening speech model connections.
    AgentsConsole.get_instance().console_mode = "text"
    attach_dispatch(dispatch_json)
    server = _discover_server(agent_path)
    _run_tcp_console(server=server, connect_addr=connect_addr)
    return 0


def main(argv: list[str] | None = None) -> None:
    """Entry point of the agent process."""
    parser = argparse.ArgumentParser(prog="lkeval.agents.agent_host")
    parser.add_argument("agent")
    parser.add_argument("--connect-addr", required=True)
    parser.add_argument("--dispatch-file", required=True)
    args = parser.parse_args(argv)
    with open(args.dispatch_file, encoding="utf-8") as fh:
        dispatch_json = fh.read()
    fast_exit(run(args.agent, args.connect_addr, dispatch_json))


if __name__ == "__main__":
    main()
