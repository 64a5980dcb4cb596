"""Agent-side host: runs the LiveKit thin CLI's console code path with a scenario attached.

Runs *inside* the agent process, as ``python lkeval/host/agent_host.py AGENT.py --connect-addr
HOST:PORT --control-fd N`` (by file path, so an agent venv without lk-eval can run it: this module
imports nothing from lk-eval; ``--dispatch-file FILE`` instead of ``--control-fd`` runs at once).

The control channel (a socket lk-eval hands over as fd N) does three things:
- *Prepared, then go.* lk-eval sends the scenario as soon as the host runs. The host imports
  the user's module, starts the agent server (prewarm included) and runs the console's job up
  to ``AgentSession.start`` (the entrypoint's own set-up), says ``prepared``, and holds the
  session until lk-eval sends ``go``. So no session, greeting or idle timer runs before its
  conversation can start, however long the agent waits for a conversation slot: load cannot
  change the transcript.
- *Dies with lk-eval.* End of file on the channel (lk-eval exited, even by SIGKILL) makes the
  host kill its whole process tree and itself. The host is a child subreaper, so descendants
  that called ``setsid`` and lost their parent stay in its tree and are found by walking
  the process table (psutil). (A parent-death signal would kill the host before it could take
  them along.)
- *Leaves nothing behind.* The host cleans its per-agent directory (see ``LKEVAL_AGENT_DIR``).

Why not plain ``python -m livekit.agents console``: it starts the session in audio mode (a
text agent's replies are dropped, an agent with speech models opens their websockets and
closes its session), and it cannot hand the agent its scenario. Production LiveKit puts a
protojson ``SimulationDispatch`` in the job attribute ``lk.simulator.dispatch``; this host does
the same on the console's job, before the job context exists, so ``ctx.simulation_context()``,
its ``userdata()`` and the server's ``on_simulation_end`` behave as under LiveKit's simulator.

LiveKit Inference class: since livekit-agents 1.6.10 a text simulation's job pins every LiveKit
Inference call to the ``low`` class (``JobContext.inference_headers`` adds
``X-LiveKit-Inference-Priority: low``, merged after what each model was configured with), so a
latency measured under lk-eval is not the class production uses. ``LKEVAL_INFERENCE_CLASS=agent``
(``--inference-class agent``) removes that pin, so each model sends the class it asks for; the
host tells lk-eval which class the agent's calls ran at, before ``prepared`` (see
``docs/protocol.md``).

This touches private names of livekit-agents. :func:`missing_hooks` checks them first; on a
version without them the host exits with :data:`EXIT_UNSUPPORTED` and one clear line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

if __package__:  # imported as lkeval.host.agent_host (lk-eval's process, tests, type checks)
    from . import siblings
elif "_lkeval_siblings" in sys.modules:  # loaded by the fork server, which loaded the loader
    siblings = sys.modules["_lkeval_siblings"]
else:  # run by path in the agent's interpreter: the host's one loader, by path as well
    _spec = importlib.util.spec_from_file_location(
        "_lkeval_siblings", os.path.join(os.path.dirname(os.path.abspath(__file__)), "siblings.py")
    )
    assert _spec is not None and _spec.loader is not None
    siblings = sys.modules["_lkeval_siblings"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(siblings)
sibling = siblings.sibling
HOST_DIR = siblings.HOST_DIR
if __package__:
    from . import control, tree
else:
    tree = sibling("tree")
    control = sibling("control")

SUPPORTED_RANGE = ">=1.6.6,<1.9"
EXIT_UNSUPPORTED = 78
UNSUPPORTED_MARKER = "lk-eval: unsupported livekit-agents"
# Which LiveKit Inference class the agent's calls run at: "low" (as LiveKit's text simulation
# pins them) or "agent" (the class each model asks for, as in production).
INFERENCE_CLASS_ENV = "LKEVAL_INFERENCE_CLASS"
INFERENCE_CLASSES = ("low", "agent")
PRIORITY_HEADER = "X-LiveKit-Inference-Priority"

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


def missing_hooks(hooks: Iterable[tuple[str, str]] | None = None) -> list[str]:
    """The private livekit-agents names this host (or ``hooks``: the in-process player's)
    needs that the installed version lacks."""
    missing = []
    for module_name, attr_path in HOOKS if hooks is None else hooks:
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


def attach_dispatch(dispatch: str | control.Control) -> None:
    """Make every job this process launches carry the scenario as LiveKit's simulator does.

    With a :class:`Control`, the job waits for the scenario lk-eval sends right after the
    spawn; its session waits for ``go`` (:func:`hold_session_start`).
    """
    from livekit.agents.ipc.proc_pool import ProcPool
    from livekit.agents.types import ATTRIBUTE_SIMULATOR_DISPATCH

    original: Callable[..., Any] = ProcPool.launch_job

    async def launch_job(self: Any, info: Any) -> Any:
        if isinstance(dispatch, control.Control):
            import asyncio

            loop = asyncio.get_running_loop()
            dispatch_json = await loop.run_in_executor(None, dispatch.wait_scenario)
            if dispatch.mock_tools:
                sibling("tool_mocks").install(dispatch.mock_tools)
        else:
            dispatch_json = dispatch
        info.job.attributes[ATTRIBUTE_SIMULATOR_DISPATCH] = dispatch_json
        if console_mode_for(dispatch_json) == "audio":
            enter_audio_mode(dispatch)
        return await original(self, info)

    ProcPool.launch_job = launch_job  # type: ignore[method-assign]


#: The dispatch's mode that makes the console play audio (``SimulationMode`` = 2).
AUDIO_DISPATCH_MODE = "SIMULATION_MODE_AUDIO"


def console_mode_for(dispatch_json: str) -> str:
    """``audio`` when the scenario's dispatch says ``SIMULATION_MODE_AUDIO``, else ``text``."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        mode = json.loads(dispatch_json).get("mode")
        if mode in (AUDIO_DISPATCH_MODE, 2):
            return "audio"
    return "text"


def enter_audio_mode(dispatch: str | control.Control) -> None:
    """Leave the console in audio mode for an audio scenario (``--mode audio``).

    The job is launched but its session not started yet: the console reads its mode when the
    session claims its IO (``AgentsConsole.acquire_io``), so the session hears lk-eval's
    microphone and speaks to its speaker. LiveKit pins Inference to the low class only in text
    simulations, so an audio job's calls run at the class each model asks for: the conditions
    lk-eval is told say so.
    """
    from livekit.agents.cli.cli import AgentsConsole

    AgentsConsole.get_instance().console_mode = "audio"
    if isinstance(dispatch, control.Control):
        dispatch.conditions = conditions_line("agent", dispatch.marks_greeting, dispatch.patches)


#: The siblings every agent process loads (:func:`run`); the fork server loads them before it
#: forks, so a child neither compiles nor executes them again.
HOST_MODULES = ("pins", "tool_schemas", "idle_timers", "greeting_mark")


def load_host_modules() -> None:
    for name in HOST_MODULES:
        sibling(name)
    speed_patches(None)  # their digests, read once here, are inherited by every fork


def speed_patches(schemas: Any) -> dict[str, str]:
    """Whether each speed patch is on in this process and why (``pins.py``), as lk-eval prints
    it at the run's start: patch -> "on (...)" or "off (...)". ``schemas`` is what installing
    ``tool_schemas`` said (None: only check)."""
    timers = sibling("idle_timers")
    if schemas is None:
        schemas = sibling("tool_schemas").check()
    tls = sys.modules.get("_lkeval_tls_context") or sys.modules.get(f"{__package__}.tls_context")
    return {
        "tool_schemas": schemas.describe(),
        "idle_timers": timers.check().describe(),
        "loop_monitor_pause": timers.check_monitor().describe(),
        "tls_context": tls.note() if tls is not None else TLS_COLD,
    }


#: The TLS context is prebuilt in the fork server only (``tls_context.py``).
TLS_COLD = "off (cold start: the TLS context is prebuilt only in the fork server)"


def warm_mock_room() -> None:
    """Build the console's mock room now when the framework caches it (``functools.cache``;
    ~0.1 s of ``create_autospec`` that every console job would otherwise pay)."""
    with contextlib.suppress(Exception):
        from livekit.agents.ipc.mock_room import create_mock_room

        if hasattr(create_mock_room, "cache_info"):
            create_mock_room()


def set_inference_class(wanted: str) -> str:
    """Make the job's LiveKit Inference calls run at ``wanted``; returns the class they run at.

    ``low`` when this livekit-agents pins text simulations (``JobContext.inference_headers``,
    1.6.10 and later) and ``wanted`` is ``low``; ``agent`` when it does not pin (older
    versions) or ``wanted`` is ``agent``, in which case the pin is taken out of the job's headers
    and each model's own ``inference_class`` (or none) goes out as configured.
    """
    from livekit.agents.job import JobContext

    pinned = JobContext.__dict__.get("inference_headers")
    if not isinstance(pinned, property) or pinned.fget is None:
        return "agent"
    if wanted != "agent":
        return "low"
    job_headers = pinned.fget

    def inference_headers(self: Any) -> dict[str, str]:
        headers: dict[str, str] = job_headers(self)
        return {k: v for k, v in headers.items() if k.lower() != PRIORITY_HEADER.lower()}

    JobContext.inference_headers = property(inference_headers, doc=pinned.__doc__)  # type: ignore[method-assign,assignment]
    return "agent"


def conditions_line(
    inference_class: str, marks_greeting: bool = False, patches: dict[str, str] | None = None
) -> bytes:
    """What the host tells lk-eval before ``prepared``: the conditions of its measurements,
    whether the session will mark the end of its greeting (``greeting_mark.py``), and which
    speed patches are on (:func:`speed_patches`)."""
    said = {
        "inference_class": inference_class,
        "greeting_mark": marks_greeting,
        "speed_patches": patches or {},
    }
    return (json.dumps(said) + "\n").encode()


def forget_host_dir() -> None:
    """Take this file's directory off ``sys.path`` before the user's module is imported.

    Run by path, the interpreter puts ``lkeval/host/`` first on ``sys.path``: its modules
    (``tape``, ``pins``, ``served`` ...) would then shadow the agent's own top-level modules of
    those names, and real agents use such generic names.
    """
    here = os.path.realpath(HOST_DIR)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]


def run(agent_path: str, connect_addr: str, dispatch: str | control.Control) -> int:
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

    start_tape()
    # Text mode before the console starts: keeps replies (and an on_enter greeting) in text
    # and stops voice agents from opening speech model connections. An audio scenario's
    # dispatch turns audio back on before its session starts (enter_audio_mode).
    AgentsConsole.get_instance().console_mode = "text"
    inference_class = set_inference_class(os.environ.get(INFERENCE_CLASS_ENV, "low"))
    if isinstance(dispatch, control.Control):
        control.hold_session_start(dispatch)
        dispatch.marks_greeting = sibling("greeting_mark").install()
        control.announce_ending(dispatch)
    attach_dispatch(dispatch)
    # each tool's schema once per process, not per LLM request (same bytes sent)
    schemas = sibling("tool_schemas").install()
    forget_host_dir()
    server = _discover_server(agent_path)
    # no idle-process poll or load report where one console job is the process's only work
    sibling("idle_timers").install(server)
    if isinstance(dispatch, control.Control):
        dispatch.patches = speed_patches(schemas)
        dispatch.conditions = conditions_line(
            inference_class, dispatch.marks_greeting, dispatch.patches
        )
    _run_tcp_console(server=server, connect_addr=connect_addr)
    return 0


#: The recorder that replays and records the agent's HTTP exchanges (``--cassettes``).
TAPE_MODULE = "transports"


def load_tape() -> Any:
    """The recorder's module, loaded once per interpreter. The fork server loads it before it
    forks: a child then neither compiles nor executes its three files (with no ``.pyc`` to
    read, ~35 ms of the ~0.3 s of CPU a replayed agent spends, ``bench/replay_phases.py``).
    Loading patches nothing: only ``install_from_env`` does, in the child."""
    return sibling(TAPE_MODULE)


def start_tape() -> None:
    """Install the scenario's tape when lk-eval handed one (``LKEVAL_TAPE``), before the
    user's module is imported. A tape that cannot start is fatal: the agent must not run live
    when lk-eval was told its calls are replayed or recorded."""
    if not os.environ.get("LKEVAL_TAPE"):
        return
    load_tape().install_from_env()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the agent process."""
    parser = argparse.ArgumentParser(prog="lkeval/host/agent_host.py")
    parser.add_argument("agent")
    parser.add_argument("--connect-addr", required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--control-fd", type=int, help="lk-eval's control channel")
    source.add_argument("--dispatch-file", help="run at once with this scenario")
    args = parser.parse_args(argv)
    tree.become_subreaper()
    tree.limit_memory()
    dispatch: str | control.Control
    if args.control_fd is not None:
        dispatch = control.Control(args.control_fd)
    else:
        with open(args.dispatch_file, encoding="utf-8") as fh:
            dispatch = fh.read()
    tree.fast_exit(run(args.agent, args.connect_addr, dispatch))


if __name__ == "__main__":
    main()
