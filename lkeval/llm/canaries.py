"""The judge preflight's known-bad canaries, and the sequential test that reads its answers.

A judge can be wrong one way only: a small model that passes known-bad conversations 30% of the
time and is right otherwise turned a broken agent green (it passed a conversation in which the
agent never captured the email). Asking one known-bad canary three to five times stops such a
judge in 16% of runs. So the preflight asks :data:`KNOWN_FAILS`, six distinct conversations in
which the agent refuses the caller's request, in rounds of one ask each, and reads the answers
with a Wald sequential test between a decent judge (it passes a known-bad canary with
probability :data:`DECENT` = 0.1) and the one-sided one (:data:`ONE_SIDED` = 0.3): after each
round, with ``k`` passes in ``n`` asks, the log likelihood ratio is
``k·ln(0.3/0.1) + (n-k)·ln(0.7/0.9)``; at :data:`STOP_WEAK` (3.75) or above the judge is weak
(the run stops unless ``--allow-weak-judge``), at :data:`STOP_FIT` (-2.5) or below it is fit,
and at :data:`MAX_ASKS` (78, 13 rounds) it is weak with :data:`FINAL_PASSES` (16) passes or more.

Exact (:func:`stop_probability`, :func:`expected_asks`, a dynamic programme over every path of
answers, checked in ``tests/llm/test_canaries.py``): the one-sided 30% judge is stopped in
95.08% of preflights; a judge flipping 10% of its verdicts in 0.91% (at most 1%, as required);
one passing every canary in all of them. It costs 12 asks for a judge that fails every canary
(two rounds), 26.9 on average for the 10% flipper, 30.7 for the one-sided judge and 6 for one
that passes everything. ``bench/verdict_trust.py --preflight`` prints these figures.
"""

from __future__ import annotations

import math
from functools import lru_cache

from lkeval.results.model import TranscriptItem

DECENT = 0.1
ONE_SIDED = 0.3
STOP_WEAK = 3.75
STOP_FIT = -2.5
MAX_ASKS = 78
FINAL_PASSES = 16
_PASS_LLR = math.log(ONE_SIDED / DECENT)
_FAIL_LLR = math.log((1 - ONE_SIDED) / (1 - DECENT))


def _canary(
    greeting: str, asks: str, refusal: str, expectations: str, instructions: str
) -> tuple[tuple[TranscriptItem, ...], str, str]:
    """A conversation in which the agent refuses exactly what the expectations ask of it."""
    transcript = (
        TranscriptItem("message", 0, role="assistant", text=greeting),
        TranscriptItem("message", 1, role="user", text=asks),
        TranscriptItem("message", 1, role="assistant", text=f"I can't help with that. {refusal}"),
        TranscriptItem("message", 2, role="user", text="Oh. Okay, bye."),
    )
    return transcript, expectations, instructions


#: (transcript, agent expectations, caller instructions) of each known-bad canary; every
#: agent reply that matters is a refusal, so no reading of the expectations can pass it.
KNOWN_FAILS = (
    _canary(
        "Corner Shop, how can I help?",
        "Hi, what time do you open tomorrow?",
        "Please call another shop.",
        "The agent tells the caller that the shop opens at 9 am.",
        "You want to know what time the shop opens tomorrow.",
    ),
    _canary(
        "Thanks for calling Acme, how can I help?",
        "Please update my contact email to maya.chen@example.com.",
        "Please write to us instead.",
        "The agent records the caller's new email address and confirms it back.",
        "You want your contact email changed to maya.chen@example.com.",
    ),
    _canary(
        "Bella's Trattoria, good evening.",
        "Can I book a table for two tomorrow at 7 pm?",
        "Bookings are closed.",
        "The agent books a table for two tomorrow at 7 pm and confirms the booking.",
        "You want a table for two tomorrow at 7 pm.",
    ),
    _canary(
        "Parcel desk, how can I help?",
        "Where is my order 1042?",
        "Check the website.",
        "The agent looks up order 1042 and tells the caller where it is.",
        "You want to know where your order 1042 is.",
    ),
    _canary(
        "Smile Dental, how can I help?",
        "I need to cancel my appointment on Friday.",
        "Call the front desk.",
        "The agent cancels the caller's Friday appointment and confirms the cancellation.",
        "You want to cancel your dental appointment on Friday.",
    ),
    _canary(
        "City Bank, how can I help?",
        "I moved. My new address is 12 Elm Street.",
        "Please visit a branch.",
        "The agent updates the caller's address to 12 Elm Street and confirms it.",
        "You want your address changed to 12 Elm Street.",
    ),
)
ROUND = len(KNOWN_FAILS)


def evidence(passes: int, asks: int) -> float:
    """The log likelihood ratio (one-sided judge over decent judge) of ``passes`` in ``asks``."""
    return passes * _PASS_LLR + (asks - passes) * _FAIL_LLR


def verdict(passes: int, asks: int) -> str:
    """ "weak", "fit", or "" (ask another round) after ``passes`` of ``asks`` answers."""
    value = evidence(passes, asks)
    if value >= STOP_WEAK - 1e-12:
        return "weak"
    if value <= STOP_FIT + 1e-12:
        return "fit"
    if asks >= MAX_ASKS:
        return "weak" if passes >= FINAL_PASSES else "fit"
    return ""


@lru_cache(maxsize=32)
def _walk(p: float) -> tuple[float, float]:
    """(P(weak), expected asks) for a judge passing each ask with probability ``p``."""
    states = {0: 1.0}  # passes so far -> probability, all at the same number of asks
    asks = 0
    weak = spent = 0.0
    while states:
        size = min(ROUND, MAX_ASKS - asks)
        spent += size * sum(states.values())
        asks += size
        after: dict[int, float] = {}
        for passes, weight in states.items():
            for k in range(size + 1):
                chance = math.comb(size, k) * p**k * (1 - p) ** (size - k)
                after[passes + k] = after.get(passes + k, 0.0) + weight * chance
        states = {}
        for passes, weight in after.items():
            decided = verdict(passes, asks)
            if decided == "weak":
                weak += weight
            elif not decided:
                states[passes] = weight
    return weak, spent


def stop_probability(p: float) -> float:
    """P(the preflight calls the judge weak) when it passes each known-bad ask with ``p``."""
    return _walk(p)[0]


def expected_asks(p: float) -> float:
    """Known-bad asks the preflight makes on average for such a judge."""
    return _walk(p)[1]


__all__ = [
    "DECENT",
    "FINAL_PASSES",
    "KNOWN_FAILS",
    "MAX_ASKS",
    "ONE_SIDED",
    "ROUND",
    "STOP_FIT",
    "STOP_WEAK",
    "evidence",
    "expected_asks",
    "stop_probability",
    "verdict",
]
