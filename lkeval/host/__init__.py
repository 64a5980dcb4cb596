"""The program lk-eval runs inside the agent's interpreter: standard library and livekit only.

lk-eval starts ``agent_host.py`` (or ``fork_server.py``, which forks agent hosts) by file path
with the agent's own Python; its siblings are loaded by :mod:`.siblings`. lk-eval's own side
(launching, limits, logs, the wire) is in :mod:`lkeval.agents`; docs/architecture.md shows the
two programs and the wire between them.
"""
