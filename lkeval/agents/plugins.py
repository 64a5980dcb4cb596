"""Which ``livekit.plugins`` packages an agent uses, read from its source without running it.

The fork server preloads them so a forked agent does not pay their import; reading the file
(never importing it) keeps the agent's import-time code for each child, with that scenario's
environment.
"""

from __future__ import annotations

import ast
from pathlib import Path


def agent_plugins(agent: Path | None) -> list[str]:
    """The ``livekit.plugins`` packages the agent's file imports (read, not imported: its
    import-time code must run in each child, with that scenario's environment), and openai,
    which LiveKit Inference models use too."""
    names = {"livekit.plugins.openai"}
    try:
        tree = ast.parse(agent.read_text(encoding="utf-8")) if agent else None
    except (OSError, SyntaxError, ValueError):
        tree = None  # the child reports it the way a cold start would
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.ImportFrom) and node.module == "livekit.plugins":
            modules = [f"livekit.plugins.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        names.update(
            ".".join(m.split(".")[:3]) for m in modules if m.startswith("livekit.plugins.")
        )
    return sorted(names)
