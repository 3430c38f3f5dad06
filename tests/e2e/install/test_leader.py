"""Leader election on a real hub Lease: one leader, takeover after expiry or release."""

from __future__ import annotations

import time

import anyio
from kubernetes import client as k8s

from fleet.local import HUB
from kube.hub import hub_connection
from kube.session import ConnectionOptions
from propagator.runtime.leader import LeaderElector, LeaseConfig
from tests.e2e.conftest import Fleet
from tests.e2e.waiting import HANG_GUARD_S


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

    async def scenario() -> float:
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        assert await a.try_acquire_or_renew()  # renewing keeps it
        assert not await b.try_acquire_or_renew()
        # a stops renewing: b takes over once it has seen the record unchanged for 2 s.
        started = time.monotonic()
        with anyio.fail_after(HANG_GUARD_S):
            while True:
                if await b.try_acquire_or_renew():
                    break
                await anyio.sleep(0.25)
        waited = time.monotonic() - started
        assert not await a.try_acquire_or_renew()
        await a.hub.close()
        await b.hub.close()
        return waited

    assert anyio.run(scenario) >= 2  # not before the lease duration
    spec = k8s.CoordinationV1Api(fleet.api(HUB)).read_namespaced_lease("takeover", "default").spec
    assert spec is not None
    assert spec.holder_identity == "b"
    assert spec.lease_transitions == 1


def test_release_hands_over_at_once(fleet: Fleet) -> None:
    a, b = _candidate(fleet, "a", "release"), _candidate(fleet, "b", "release")

    async def scenario() -> None:
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        await a.release()
        assert await b.try_acquire_or_renew()  # at once: no waiting for the lease to expire
        await a.hub.close()
        await b.hub.close()

    anyio.run(scenario)
