"""A test agent file that defines no AgentServer (a typo'd ``--agent``, a helper module)."""

from __future__ import annotations

GREETING = "hello"
