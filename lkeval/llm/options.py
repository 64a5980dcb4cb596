"""What the command line says about the caller and judge LLMs, as typed, frozen data.

Built once at the top (:mod:`lkeval.cli.options`) and passed down, so nothing in ``lkeval.llm``
reads ``argparse`` and every option is a named field grep can follow. ``None`` means "not given
on the command line": :func:`lkeval.llm.config.resolve_llm_spec` then reads the
``LKEVAL_<ROLE>_*`` variables and finally the defaults of :mod:`lkeval.defaults`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lkeval import defaults


@dataclass(frozen=True)
class LLMEndpointOptions:
    """``--<role>-model``, ``--<role>-base-url``, ``--<role>-price`` of one role."""

    model: str | None = None
    base_url: str | None = None
    price: str | None = None


@dataclass(frozen=True)
class LLMOptions:
    """The caller's and the judge's flags, and how judging is done."""

    caller: LLMEndpointOptions = field(default_factory=LLMEndpointOptions)
    judge: LLMEndpointOptions = field(default_factory=LLMEndpointOptions)
    judges: tuple[str, ...] = ()
    rejudge: int = 0
    maybe_is_pass: bool = False
    allow_weak_judge: bool = False
    """Run on when the judge passes the known-bad canary (the preflight stops the run else)."""
    max_turns: int = defaults.MAX_TURNS
    retries: int | None = None
    timeout: float | None = None
    caller_temperature: float | None = None
    """None: LKEVAL_CALLER_TEMPERATURE, else the default (the judge always uses 0)."""
    prices: tuple[tuple[str, tuple[float, float]], ...] = ()
    """``--price MODEL=IN,OUT`` overrides (USD per 1M tokens) of the genai-prices table."""

    def endpoint(self, role: str) -> LLMEndpointOptions:
        """The flags of ``role`` (``"caller"`` or ``"judge"``)."""
        if role == "caller":
            return self.caller
        if role == "judge":
            return self.judge
        raise ValueError(f"unknown LLM role {role!r}")


__all__ = [
    "LLMEndpointOptions",
    "LLMOptions",
]
