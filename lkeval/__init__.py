"""lk-eval: scenario evals for LiveKit agents, as a CLI, a CI container and a GitHub Action."""

from __future__ import annotations

__version__ = "1.0.0"

__all__ = ["__version__"]
