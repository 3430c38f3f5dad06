"""A Pull member's health from its agent's heartbeat, and its report as the hub takes it."""

from __future__ import annotations

from typing import Any

import anyio

from fleet.pullmember import MAX_LEASE_S, MIN_LEASE_S, PullMonitor
from fleet.readiness import HealthPolicy

POLICY = HealthPolicy(failure_threshold=1, success_threshold=1)


def _lease(renewed: str | None, duration: Any = 10) -> dict[str, Any]:
    return {"spec": {"renewTime": renewed, "leaseDurationSeconds": duration}}


def _probe(monitor: PullMonitor, now: float) -> tuple[bool, str | None]:
    result = anyio.run(monitor.probe, 1.0, now)
    return result.ok, result.error


def test_ready_while_the_lease_is_renewed_within_its_duration() -> None:
    monitor = PullMonitor("edge", "pull", POLICY)
    ok, error = _probe(monitor, 100.0)
    assert not ok
    assert error == "no heartbeat from its agent yet (Lease propagator-cluster-edge/agent)"
    monitor.lease_seen(_lease("t1"), now=100.0)
    assert _probe(monitor, 105.0) == (True, None)
    assert monitor.health.ready is True
    # the same renewTime again (a relist) is no heartbeat
    monitor.lease_seen(_lease("t1"), now=109.0)
    ok, error = _probe(monitor, 111.0)
    assert not ok
    assert error == "its agent has not renewed Lease propagator-cluster-edge/agent within its 10 s"
    assert monitor.health.ready is False
    monitor.lease_seen(_lease("t2"), now=112.0)
    assert _probe(monitor, 113.0) == (True, None)


def test_the_agents_clock_does_not_count_only_when_the_hub_saw_the_renewal() -> None:
    monitor = PullMonitor("edge", "pull", POLICY)
    monitor.lease_seen(_lease("1999-01-01T00:00:00.000000Z"), now=50.0)  # a skewed clock
    assert _probe(monitor, 55.0)[0]


def test_a_lease_duration_out_of_bounds_is_taken_at_the_bound() -> None:
    monitor = PullMonitor("edge", "pull", POLICY)
    monitor.lease_seen(_lease("t1", 1))
    assert monitor.lease_duration_s == MIN_LEASE_S
    monitor.lease_seen(_lease("t2", 10**9))
    assert monitor.lease_duration_s == MAX_LEASE_S
    monitor.lease_seen(_lease("t3", "forever"))
    assert monitor.lease_duration_s == MAX_LEASE_S  # unchanged


def test_the_agents_report_gives_version_kinds_and_capacity() -> None:
    monitor = PullMonitor("edge", "pull", POLICY)
    assert monitor.usable
    assert monitor.capacity() is None
    monitor.report_seen(
        {
            "kubernetesVersion": "v1.37.2",
            "apiEnablements": [{"groupVersion": "apps/v1", "kinds": ["Deployment"]}],
            "nodes": {"total": 2, "ready": 1},
            "resources": {"allocatable": {"cpu": "4"}},
        }
    )
    assert monitor.version == "v1.37.2"
    assert monitor.enablements == [{"groupVersion": "apps/v1", "kinds": ["Deployment"]}]
    capacity = monitor.capacity()
    assert capacity is not None
    assert capacity["nodes"] == {"total": 2, "ready": 1}
    assert capacity["resources"]["allocatable"] == {"cpu": "4"}
    assert monitor.quota_usage("shop") is None


def test_a_report_that_does_not_fit_is_not_taken_and_says_why() -> None:
    monitor = PullMonitor("edge", "pull", POLICY)
    monitor.report_seen({"kubernetesVersion": "v1.37.2"})
    monitor.report_seen({"kubernetesVersion": "v" * 1000, "nodes": {"total": -1}})
    assert monitor.version == "v1.37.2"
    assert monitor.report_problem is not None
    assert monitor.report_problem.startswith("status.agent.")
