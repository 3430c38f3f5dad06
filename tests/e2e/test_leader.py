"""Leader election on a real hub Lease: one leader, takeover after expiry or release."""

from __future__ import annotations

from kubernetes import client as k8s

from fleet.connection import ConnectionOptions
from fleet.hub import hub_connection
from fleet.local import HUB
from propagator.runtime.leader import LeaderElector, LeaseConfig
from tests.e2e.conftest import Fleet
from tests.e2e.waiting import eventually


def _candidate(fleet: Fleet, identity: str, lease: str) -> LeaderElector:
    hub = hub_connection(fleet.kubeconfig(HUB), options=ConnectionOptions())
    return LeaderElector(
        hub,
        LeaseConfig(
            namespace="default",
            name=lease,
            identity=identity,
            lease_duration_s=2,
            renew_deadline_s=1.5,
            retry_period_s=0.2,
        ),
    )


def test_one_leader_and_takeover_when_it_stops_renewing(fleet: Fleet) -> None:
    a, b = _candidate(fleet, "a", "takeover"), _candidate(fleet, "b", "takeover")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.try_acquire_or_renew()  # renewing keeps it
    assert not b.try_acquire_or_renew()
    # a stops renewing: b takes over once it has seen the record unchanged for 2 s.
    took_over = eventually(lambda: b.try_acquire_or_renew(), "b takes the expired lease")
    assert took_over
    assert not a.try_acquire_or_renew()
    spec = k8s.CoordinationV1Api(fleet.api(HUB)).read_namespaced_lease("takeover", "default").spec
    assert spec is not None
    assert spec.holder_identity == "b"
    assert spec.lease_transitions == 1


def test_release_hands_over_at_once(fleet: Fleet) -> None:
    a, b = _candidate(fleet, "a", "release"), _candidate(fleet, "b", "release")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()  # at once: no waiting for the lease to expire
