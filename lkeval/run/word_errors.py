"""Word error rate: how far what the agent heard is from what the caller said.

Words are compared after the differences a speech recogniser's style makes and a listener
does not hear: case, punctuation (``"B-4-2"`` is ``b 4 2``), and digits spelt out one way or
the other are not normalised (a booking number heard as "four two" instead of "42" is an error
the agent would also make). The rate is (substitutions + deletions + insertions) / words said.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """``"Room 42, please!"`` -> ``["room", "42", "please"]``."""
    return [w.strip("'") for w in _WORD.findall(text.lower()) if w.strip("'")]


def word_error_rate(said: str, heard: str) -> float:
    """Edit distance over words divided by the words said (1.0 when nothing was said but
    something heard; 0.0 when both are empty)."""
    ref, hyp = words(said), words(heard)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, other in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other))
        previous = current
    return round(previous[-1] / len(ref), 4)
