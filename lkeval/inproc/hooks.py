"""The private livekit-agents names the in-process player relies on, checked before it plays.

The player builds the job as LiveKit's own in-process test helper does and hands it the
scenario as LiveKit's simulator would; for that it reads and sets names livekit-agents does not
promise to keep (docs/dev.md). On a version without one of them a scenario would fail somewhere
in the middle with an ``AttributeError``; the check names what is missing and the supported
range in one line instead, as the console's host does (``host/agent_host.py``).

Module-level names are looked up on the modules; the names a ``JobContext`` or an
``AgentServer`` sets in its constructor are looked up on real instances (a fake job's context,
the user's own server).
"""

from __future__ import annotations

from typing import Any

from lkeval.errors import ConfigError
from lkeval.host import agent_host

#: (module, attribute path) the player imports or calls.
MODULE_HOOKS: tuple[tuple[str, str], ...] = (
    ("livekit.agents.testing", "fake_job_context"),
    ("livekit.agents.ipc.mock_room", "create_mock_room"),
    ("livekit.agents.simulation", "SimulationContext._begin_finalize"),
    ("livekit.agents.job", "JobContext.simulation_context"),
    ("livekit.agents.voice.remote_session", "SessionHost"),
    ("livekit.agents.voice.remote_session", "TcpSessionTransport"),
    ("livekit.agents.types", "ATTRIBUTE_SIMULATOR_DISPATCH"),
    ("livekit.protocol.agent_simulation", "SimulationDispatch"),
)
#: Names set on a fake job's ``JobContext`` (``_info.job.attributes`` carries the dispatch;
#: ``_on_shutdown`` is what ``ctx.shutdown()`` calls).
JOB_HOOKS = ("_info", "_simulation_end_fnc", "_on_shutdown")
#: Names set on the user's ``AgentServer`` (its entrypoint and ``on_simulation_end``).
SERVER_HOOKS = ("_entrypoint_fnc", "_simulation_end_fnc")


class UnsupportedLivekitAgents(ConfigError):
    """The installed livekit-agents lacks a name the in-process player needs (exit 2)."""


def missing_module_hooks() -> list[str]:
    """The module-level names this livekit-agents lacks."""
    return agent_host.missing_hooks(MODULE_HOOKS)


def missing_job_hooks() -> list[str]:
    """The names a fake job's context lacks (one is built, on a mock room, and dropped)."""
    from livekit.agents.ipc.mock_room import create_mock_room
    from livekit.agents.testing import fake_job_context

    with fake_job_context(room=create_mock_room()) as job:
        missing = [f"JobContext.{name}" for name in JOB_HOOKS if not hasattr(job, name)]
        info = getattr(job, "_info", None)
        if info is not None and not hasattr(getattr(info, "job", None), "attributes"):
            missing.append("JobContext._info.job.attributes")
    return missing


def missing_server_hooks(server: Any) -> list[str]:
    """The names the user's ``AgentServer`` lacks."""
    return [f"AgentServer.{name}" for name in SERVER_HOOKS if not hasattr(server, name)]


def check_hooks(server: Any | None = None) -> None:
    """Raise :class:`UnsupportedLivekitAgents` naming every missing name and the range."""
    missing = missing_module_hooks()
    if not missing:
        missing = missing_job_hooks()
    if server is not None:
        missing += missing_server_hooks(server)
    if missing:
        raise UnsupportedLivekitAgents(unsupported_line(missing))


def unsupported_line(missing: list[str]) -> str:
    """The one line the console's host prints too: the version, what is missing, the range."""
    return (
        f"{agent_host.UNSUPPORTED_MARKER} {agent_host.installed_version()} in-process: "
        f"missing {', '.join(missing)}. lk-eval supports livekit-agents "
        f"{agent_host.SUPPORTED_RANGE}."
    )
