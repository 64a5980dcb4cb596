"""espeak-ng as a subprocess: the offline voice of the caller and of the local speech server.

The text goes in on stdin, never as an argument, so a line that starts with ``-`` is spoken,
not parsed as an option. espeak-ng writes a 22.05 kHz WAV with silence at both ends; it is
trimmed and resampled to the rate asked.
"""

from __future__ import annotations

import asyncio
import re
import shutil

from lkeval.audio import SpeechError
from lkeval.audio.pcm import trim_silence, wav_to_pcm

_VOICE = re.compile(r"^[A-Za-z0-9_+-]+$")
INSTALL_TIP = "install espeak-ng (apt-get install espeak-ng; brew install espeak-ng)"


async def espeak_pcm(text: str, voice: str, rate: int, words_per_minute: int = 165) -> bytes:
    """``text`` spoken by espeak-ng's ``voice``: mono s16le at ``rate`` (b"" for blank text)."""
    if not text.strip():
        return b""
    if not _VOICE.match(voice):
        raise SpeechError(f"espeak voice {voice!r}: letters, digits, '_', '+' and '-' only")
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise SpeechError(f"espeak-ng is not installed: {INSTALL_TIP}")
    process = await asyncio.create_subprocess_exec(
        *(binary, "-v", voice, "-s", str(words_per_minute), "--stdout", "--stdin"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    wav, err = await process.communicate(text.encode("utf-8"))
    if process.returncode != 0:
        why = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise SpeechError(f"espeak-ng voice {voice!r} failed: {why[0]}")
    return trim_silence(wav_to_pcm(wav, rate))
