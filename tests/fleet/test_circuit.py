from __future__ import annotations

import pytest

from fleet.circuit import CircuitBreaker, CircuitOpen


def test_opens_after_consecutive_failures_then_half_opens() -> None:
    b = CircuitBreaker("m1", failure_threshold=3, cool_down_s=10)
    for t in range(2):
        b.before_call(now=t)
        b.record(False, now=t)
    b.record(True, now=2)  # a success resets the count
    for t in range(3, 6):
        b.before_call(now=t)
        b.record(False, now=t)
    assert b.state(now=6) == "open"
    with pytest.raises(CircuitOpen, match="m1: circuit open after repeated failures"):
        b.before_call(now=6)
    assert b.state(now=15) == "half-open"
    b.before_call(now=15)  # the one trial
    with pytest.raises(CircuitOpen):
        b.before_call(now=15)  # nobody else while it runs
    b.record(True, now=16)
    assert b.state(now=16) == "closed"


def test_a_failed_trial_opens_it_again() -> None:
    b = CircuitBreaker("m1", failure_threshold=1, cool_down_s=10)
    b.before_call(now=0)
    b.record(False, now=0)
    b.before_call(now=10)
    b.record(False, now=10)
    assert b.state(now=19) == "open"
    assert b.state(now=20) == "half-open"
