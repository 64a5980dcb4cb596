"""A turn's timing, from lk-eval's clock and from what the agent itself reports on the wire.

The agent attaches a ``MetricsReport`` to each assistant ``ChatMessage`` (livekit-agents
1.6.6-1.8.x send ``llm_node_ttft``, ``llm_node_tps``, ``llm_node_ttfs``, and in voice sessions
``tts_node_ttfb`` and ``e2e_latency``, all in seconds but tps) and stamps every function call and
output with ``created_at``. Reading them from the ``run_input`` answer we already hold costs a
few attribute reads per turn, nothing measurable next to the turn itself (bench/turn_time.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from livekit.protocol.agent_pb import agent_session as pb

from lkeval.results.model import TurnMetrics

# MetricsReport field (seconds unless noted) -> TurnMetrics field (LiveKit's simulation names).
_SECONDS = (
    ("llm_node_ttft", "llm_ttft_ms"),
    ("llm_node_ttfs", "llm_ttfs_ms"),
    ("tts_node_ttfb", "tts_ttfb_ms"),
    ("e2e_latency", "e2e_latency_ms"),
)


def measure_turn(
    turn_no: int, elapsed_seconds: float, items: Sequence[pb.ChatContext.ChatItem]
) -> TurnMetrics:
    """The metrics of one turn: ``elapsed_seconds`` is lk-eval's wall time for it."""
    reported: dict[str, float] = {}
    calls: dict[str, float] = {}
    tool_ms: list[float] = []
    for item in items:
        kind = item.WhichOneof("item")
        if kind == "message" and item.message.role == pb.ASSISTANT and not reported:
            reported = _reported(item.message)
        elif kind == "function_call" and item.function_call.HasField("created_at"):
            calls[item.function_call.call_id] = _stamp(item.function_call.created_at)
        elif kind == "function_call_output" and item.function_call_output.HasField("created_at"):
            started = calls.get(item.function_call_output.call_id)
            if started is not None:
                ended = _stamp(item.function_call_output.created_at)
                tool_ms.append(round(max(0.0, ended - started) * 1000, 3))
    return TurnMetrics(
        turn=turn_no,
        latency_ms=round(elapsed_seconds * 1000, 3),
        tool_ms=tuple(tool_ms),
        **reported,  # type: ignore[arg-type]  # only the float fields of the agent's metrics
    )


def _reported(message: pb.ChatMessage) -> dict[str, float]:
    if not message.HasField("metrics"):
        return {}
    metrics = message.metrics
    found = {
        ours: round(getattr(metrics, theirs) * 1000, 3)
        for theirs, ours in _SECONDS
        if metrics.HasField(theirs)
    }
    if metrics.HasField("llm_node_tps"):
        found["llm_tps"] = round(metrics.llm_node_tps, 3)
    return found


def _stamp(timestamp: object) -> float:
    seconds: int = getattr(timestamp, "seconds", 0)
    nanos: int = getattr(timestamp, "nanos", 0)
    return seconds + nanos / 1e9
