"""What every attempt of a run starts from: the run-wide settings (:class:`RunSettings`) and
the dispatch the agent is handed, as LiveKit's simulator would attach it to the job."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import json_format
from livekit.protocol import agent_simulation as sim_pb

from lkeval import defaults
from lkeval.agents.process import AgentLaunch, AgentProcess
from lkeval.agents.session_agent import AgentFactory
from lkeval.replay.session import Cassettes
from lkeval.results.pricing import PriceTable
from lkeval.run.collaborators import AudioRig
from lkeval.scenarios.model import Scenario


@dataclass(frozen=True)
class RunSettings:
    """Run-wide defaults; a scenario's own limits override them."""

    launch: AgentLaunch
    logs_dir: Path
    work_dir: Path
    boot_timeout: float = defaults.BOOT_TIMEOUT
    turn_timeout: float = defaults.TURN_TIMEOUT
    max_turns: int = defaults.MAX_TURNS
    max_silent_turns: int = defaults.MAX_SILENT_TURNS
    stop_grace: float = defaults.STOP_GRACE
    # Prices the agent's own tokens (its get_session_usage names the models).
    prices: PriceTable = field(default_factory=PriceTable)
    # ``--cassettes``: each attempt's HTTP exchanges recorded and replayed (None: off).
    cassettes: Cassettes | None = None
    # ``--mode``: how scenarios without their own ``mode:`` play; the speech for audio ones.
    mode: str = "text"
    audio: AudioRig | None = None
    # How each attempt's agent comes to exist: a process (the console over TCP), or the
    # in-process player of ``lkeval dev`` (lkeval.inproc); the same session either way.
    agents: AgentFactory = AgentProcess


#: How lk-eval plays a conversation: text turns (the dispatch's mode, the console's text mode).
#: Recorded with the results, since latency measured in text mode is not a voice agent's.
CONVERSATION_MODE = "text"


def dispatch_json(scenario: Scenario, run_id: str, job_id: str, audio: bool = False) -> str:
    """The protojson ``SimulationDispatch`` LiveKit's simulator would attach to the job.

    Userdata travels as a JSON string; a scenario without userdata sends an empty string,
    not ``"null"`` (some agents crash on ``null``). An audio scenario says
    ``SIMULATION_MODE_AUDIO``: the agent host then leaves the console in audio mode, and the
    agent's ``simulation_context()`` and LiveKit's inference class see an audio simulation.
    """
    mode = sim_pb.SimulationMode.SIMULATION_MODE_AUDIO if audio else None
    proto = sim_pb.SimulationDispatch(
        simulation_run_id=run_id,
        job_id=job_id,
        mode=mode or sim_pb.SimulationMode.SIMULATION_MODE_TEXT,
        scenario=sim_pb.Scenario(
            id=scenario.id,
            label=scenario.label,
            instructions=scenario.instructions,
            agent_expectations=scenario.agent_expectations,
            tags=scenario.tags,
            userdata=json.dumps(scenario.userdata) if scenario.userdata else "",
        ),
    )
    return json_format.MessageToJson(proto, indent=None)


__all__ = ["CONVERSATION_MODE", "RunSettings", "dispatch_json"]
