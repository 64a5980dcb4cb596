"""The judge preflight's outcome kept between runs of the same judge (``lkeval dev``).

The preflight asks the judge about two canary transcripts, up to five times each: seconds of
LLM round trips that an edit-and-rerun loop would pay on every run for the same answer. Its
outcome depends on the judge (model, endpoint, how it gives verdicts), the judge's prompts,
the options that read its votes and lk-eval's own version; the cache key is a digest of all
of them, so a change to any one asks the judge again. Only a check that let the run go on is
kept (a judge that failed its canaries is asked again next time), and never one with the
suite's own known-bad controls (those come from a baseline: ``lkeval run`` only).

The file holds verdict words only (no transcript, no key): ``$XDG_CACHE_HOME/lkeval/`` (else
``~/.cache/lkeval/``), one small JSON file per key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lkeval import __version__
from lkeval.llm.config import LLMSpec
from lkeval.results.model import JudgeCheck

CACHE_ENV = "XDG_CACHE_HOME"


def cache_dir() -> Path:
    """Where preflight outcomes are kept."""
    base = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lkeval" / "judge-preflight"


def cache_key(spec: LLMSpec, prompts_digest: str, maybe_is_pass: bool, allow_weak: bool) -> str:
    """What a preflight's outcome depends on, as one digest."""
    parts = (
        __version__,
        spec.model,
        spec.backend,
        spec.base_url,
        spec.verdict_form,
        str(spec.max_tokens),
        prompts_digest,
        str(maybe_is_pass),
        str(allow_weak),
    )
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def load_check(key: str, folder: Path | None = None) -> JudgeCheck | None:
    """The kept outcome for ``key``, or None (none kept, or unreadable: asked again)."""
    path = (folder or cache_dir()) / f"{key}.json"
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        fields = {f.name for f in dataclasses.fields(JudgeCheck)}
        known: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in fields
        }
        return JudgeCheck(**known)
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def save_check(key: str, check: JudgeCheck, folder: Path | None = None) -> None:
    """Keep ``check`` for ``key``; a cache that cannot be written is no error."""
    folder = folder or cache_dir()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{key}.{os.getpid()}.tmp"
        temp.write_text(json.dumps(dataclasses.asdict(check)), encoding="utf-8")
        os.replace(temp, folder / f"{key}.json")
