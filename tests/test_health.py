from __future__ import annotations

from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from fleet.health import Health, HealthPolicy

POLICY = HealthPolicy(failure_threshold=3, success_threshold=2, unreachable_after_s=40)


def _run(health: Health, results: list[bool], start: float = 0.0) -> Health:
    for i, ok in enumerate(results):
        health = health.observe(ok, start + i * 10, POLICY, None if ok else "timeout")
    return health


def test_first_good_probe_makes_a_new_member_ready() -> None:
    assert Health().observe(True, 0, POLICY).ready is True


def test_not_ready_only_after_consecutive_failures() -> None:
    ready = _run(Health(), [True])
    assert _run(ready, [False, False]).ready is True
    assert _run(ready, [False, True, False, False]).ready is True  # a success resets the count
    down = _run(ready, [False, False, False])
    assert down.ready is False
    assert down.last_error == "timeout"


def test_ready_again_only_after_consecutive_successes() -> None:
    down = _run(Health(), [True, False, False, False])
    assert _run(down, [True]).ready is False
    assert _run(down, [True, False, True]).ready is False
    back = _run(down, [True, True])
    assert back.ready is True
    assert back.not_ready_since is None
    assert back.taints(1000, POLICY) == []


def test_taints_not_ready_then_unreachable_after_grace() -> None:
    down = _run(Health(), [True, False, False, False])  # NotReady at t=30
    assert down.not_ready_since == 30
    assert down.taints(30, POLICY) == [NOT_READY_TAINT]
    assert down.taints(69, POLICY) == [NOT_READY_TAINT]
    assert down.taints(70, POLICY) == [NOT_READY_TAINT, UNREACHABLE_TAINT]


def test_a_member_never_reached_is_not_ready_after_the_threshold() -> None:
    assert _run(Health(), [False]).ready is None
    assert _run(Health(), [False, False, False]).ready is False
