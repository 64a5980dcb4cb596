"""What changed in a run's conditions since the baseline: the caller's or judge's model, the
LiveKit Inference class, text or audio turns. Each is a warning beside the comparison, since
its deltas then compare two conditions, not one agent before and after."""

from __future__ import annotations

from urllib.parse import urlsplit

from lkeval.results.model import LLMInUse, RunResults


def model_changes(current: RunResults, baseline: RunResults) -> tuple[str, ...]:
    """The caller or judge models that differ from the baseline's (both must be recorded).

    What identifies a model is its name (with the provider, ``openai/gpt-4.1-mini``) and the
    host serving it, not the port: a local server on an ephemeral port (the bundled example's
    scripted LLM, a llama-server started per job) gets a new one every run, and a warning that
    is always there teaches users to ignore warnings.
    """
    before = {u.role: u for u in baseline.metadata.llms}
    changes: list[str] = []
    for now in current.metadata.llms:
        old = before.get(now.role)
        if old is None or _identity(old) == _identity(now):
            continue
        same_host = _hostname(old.host) == _hostname(now.host)
        was = old.model if same_host else f"{old.model} at {old.host}"
        new = now.model if same_host else f"{now.model} at {now.host}"
        changes.append(f"{now.role} model changed since the baseline: {was} → {new}")
    return tuple(changes)


def _identity(llm: LLMInUse) -> tuple[str, str]:
    return llm.model, _hostname(llm.host)


def _hostname(host: str) -> str:
    """``127.0.0.1:36143`` → ``127.0.0.1``; ``[::1]:8080`` → ``::1``; a name stays itself."""
    try:
        return (urlsplit(f"//{host}").hostname or host).lower()
    except ValueError:
        return host.lower()


def inference_class_change(current: RunResults, baseline: RunResults) -> tuple[str, ...]:
    """The LiveKit Inference class the agent's calls ran at, when it differs from the
    baseline's (both must be recorded): its latency deltas then compare two conditions."""
    return _changed(
        "LiveKit Inference class",
        baseline.metadata.inference_class,
        current.metadata.inference_class,
        "latency deltas compare different conditions",
    )


def mode_change(current: RunResults, baseline: RunResults) -> tuple[str, ...]:
    """Text or audio turns, when they differ from the baseline's (both recorded): a text turn's
    latency is a reply's, an audio turn's the caller's wait for the agent's first audio."""
    return _changed(
        "conversation mode",
        baseline.metadata.conversation_mode,
        current.metadata.conversation_mode,
        "latency deltas compare different measures and are not gated",
    )


def _changed(what: str, was: str, now: str, consequence: str) -> tuple[str, ...]:
    """One warning when both runs recorded ``what`` and it differs; none otherwise."""
    if not was or not now or was == now:
        return ()
    return (f"{what} changed since the baseline: {was} → {now} ({consequence})",)


__all__ = ["inference_class_change", "mode_change", "model_changes"]
