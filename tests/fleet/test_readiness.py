from __future__ import annotations

from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from fleet.readiness import Health, HealthPolicy

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


def test_a_ping_stands_in_for_readyz_only_for_a_ready_member_with_a_recent_readyz() -> None:
    policy = HealthPolicy(failure_threshold=3, success_threshold=2, readyz_interval_s=30)
    ready = Health().observe(True, 0, policy)
    assert ready.may_ping(readyz_at=0, now=10, policy=policy)
    assert not ready.may_ping(readyz_at=0, now=30, policy=policy)  # /readyz is due
    assert not ready.may_ping(readyz_at=None, now=10, policy=policy)  # never passed
    assert not Health().may_ping(readyz_at=0, now=10, policy=policy)  # never probed
    # One failed probe, the member still Ready: /readyz until a probe passes again.
    failing = ready.observe(False, 10, policy, "timeout")
    assert failing.ready is True
    assert not failing.may_ping(readyz_at=0, now=20, policy=policy)
    # NotReady, then one good probe of the two it needs: still /readyz.
    down = failing.observe(False, 20, policy).observe(False, 30, policy).observe(True, 40, policy)
    assert down.ready is False
    assert not down.may_ping(readyz_at=40, now=50, policy=policy)
    every_probe = HealthPolicy(readyz_interval_s=0)
    assert not ready.may_ping(readyz_at=0, now=0, policy=every_probe)
