"""--max-errors: when a systemic failure stops booting the rest (lkeval/run/systemic.py)."""

from __future__ import annotations

from lkeval.run.systemic import ErrorBrake, cause_key

DEAD = "turn 1: the agent answered with an error: failed after {n} attempts (port {p})"


def test_the_same_cause_in_the_first_n_trips_the_brake() -> None:
    brake = ErrorBrake(3)
    for n in range(3):
        assert brake.cause is None
        brake.record(DEAD.format(n=n, p=40000 + n))  # numbers differ, the cause is the same
    assert brake.cause == DEAD.format(n=0, p=40000)
    assert brake.not_run_reason().startswith(
        "not run (stopped early): the first 3 scenario(s) failed with the same agent-side cause "
        "(--max-errors 3): turn 1: the agent answered"
    )


def test_a_pass_or_another_cause_among_the_first_n_keeps_the_suite_running() -> None:
    mixed = ErrorBrake(2)
    mixed.record(DEAD.format(n=1, p=1))
    mixed.record("agent died: agent process exited with code 3")
    passing = ErrorBrake(2)
    passing.record(None)
    passing.record(DEAD.format(n=1, p=1))
    passing.record(DEAD.format(n=1, p=1))  # after the first N: never trips
    off = ErrorBrake(0)
    for _ in range(5):
        off.record(DEAD.format(n=1, p=1))
    assert (mixed.cause, passing.cause, off.cause) == (None, None, None)


def test_cause_key_ignores_numbers_only() -> None:
    assert cause_key("exit code 3 at 10:01") == cause_key("exit code 70 at 11:02")
    assert cause_key("exit code 3") != cause_key("killed by signal 9")
