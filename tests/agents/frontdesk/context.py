"""What one call knows: the session's userdata. (A generic module name, as real agent dirs use.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CallContext:
    """The caller's details and where this call keeps its appointment book."""

    db_path: Path
    caller: str = ""
    booked: list[str] = field(default_factory=list)
