"""The impairment spec's grammar: ``noise=15dB,loss=3%,burst=40ms,jitter=20ms,codec=mulaw,seed=7``.

``--impair`` and a scenario's ``impair:`` say the same thing, and both are checked before
anything runs (a bad field is an error naming the flag, or the scenario file's line). The
grammar is here, beneath every layer, so the scenario loader checks it without knowing audio;
what the impairments *do* to the caller's audio is ``lkeval/audio/impair.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from lkeval.errors import UsageError

CodecName = Literal["mulaw", "opus"]
DEFAULT_BURST_MS = 40.0
#: The shortest burst: one 20 ms frame.
_FRAME_MS = 20.0
_FIELD = re.compile(r"^\s*([a-z]+)\s*=\s*(.*?)\s*$")


@dataclass(frozen=True)
class Impairments:
    """What to do to the caller's audio; the default does nothing."""

    noise_db: float | None = None
    loss: float = 0.0
    burst_ms: float = DEFAULT_BURST_MS
    jitter_ms: float = 0.0
    codec: CodecName | None = None
    seed: int = 0

    @property
    def active(self) -> bool:
        """Whether anything is done to the audio at all."""
        return bool(self.noise_db is not None or self.loss or self.jitter_ms or self.codec)

    def describe(self) -> str:
        """The canonical spec, the seed included (what results record and a re-run takes)."""
        parts = []
        if self.noise_db is not None:
            parts.append(f"noise={self.noise_db:g}dB")
        if self.loss:
            parts += [f"loss={self.loss * 100:g}%", f"burst={self.burst_ms:g}ms"]
        if self.jitter_ms:
            parts.append(f"jitter={self.jitter_ms:g}ms")
        if self.codec:
            parts.append(f"codec={self.codec}")
        return ",".join([*parts, f"seed={self.seed}"]) if parts else "none"


def _number(where: str, name: str, text: str, unit: str, low: float, high: float) -> float:
    match = re.fullmatch(rf"(-?\d+(?:\.\d+)?)\s*(?:{re.escape(unit)})?", text, re.IGNORECASE)
    if match is None:
        raise UsageError(f"{where}: {name}={text!r}: expected a number of {unit}, e.g. {name}=")
    value = float(match.group(1))
    if not low <= value <= high:
        raise UsageError(f"{where}: {name}={text!r}: must be from {low:g} to {high:g} {unit}")
    return value


def parse_impairments(spec: str, where: str = "--impair") -> Impairments:
    """``noise=15dB,loss=3%,burst=40ms,jitter=20ms,codec=mulaw,seed=7`` (any subset; ``none``).

    Raises :class:`UsageError` naming ``where`` (the flag, or a scenario file's field) and the
    bad field.
    """
    values: dict[str, Any] = {}
    text = spec.strip()
    if text in ("", "none"):
        return Impairments()
    for part in text.split(","):
        match = _FIELD.match(part)
        if match is None:
            raise UsageError(f"{where}: {part.strip()!r}: expected NAME=VALUE")
        name, value = match.groups()
        if name in values or (name == "noise" and "noise_db" in values):
            raise UsageError(f"{where}: {name} is given twice")
        if name == "noise":
            values["noise_db"] = _number(where, name, value, "dB", -10, 80)
        elif name == "loss":
            values["loss"] = _number(where, name, value, "%", 0, 50) / 100
        elif name in ("burst", "jitter"):
            low = _FRAME_MS if name == "burst" else 0
            values[f"{name}_ms"] = _number(where, name, value, "ms", low, 1000)
        elif name == "codec":
            if value not in ("mulaw", "opus", "none"):
                raise UsageError(f"{where}: codec={value!r}: mulaw, opus or none")
            values["codec"] = None if value == "none" else value
        elif name == "seed":
            if not re.fullmatch(r"\d{1,18}", value):
                raise UsageError(f"{where}: seed={value!r}: a whole number, 0 or more")
            values["seed"] = int(value)
        else:
            raise UsageError(
                f"{where}: unknown impairment {name!r} (noise, loss, burst, jitter, codec, seed)"
            )
    return Impairments(**values)


__all__ = ["DEFAULT_BURST_MS", "CodecName", "Impairments", "parse_impairments"]
