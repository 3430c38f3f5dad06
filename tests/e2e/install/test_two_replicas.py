"""Two ``propagator run`` replicas against the hub, as the chart deploys them: the leader
is SIGKILLed in the middle of a fan-out; the standby takes the Lease once it expires,
finishes the work, and between them every object is written once — none twice, none lost
(the members' objects at the kill and the standby's member-write counter compared)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from fleet.local import HUB
from propagator.cli.run import LEASE_NAME
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    ap_gone,
    application,
    create,
    delete_ap,
    ready_everywhere,
    wait_ap,
)
from tests.e2e.waiting import eventually

NS = "two-replicas"
GROUP_PLURAL = "applicationpropagations"
OBJECTS = 200
"""Per member: the leader cannot write them all on every member between the first showing
and its kill (a poll every 0.25 s; a round of a cluster's objects goes out at once, and
these members take a few hundred writes a second)."""
LEASE = {
    "PROPAGATOR_LEADER_LEASE_DURATION_S": "4",
    "PROPAGATOR_LEADER_RENEW_DEADLINE_S": "3",
    "PROPAGATOR_LEADER_RETRY_PERIOD_S": "0.5",
}


@pytest.fixture
def replicas(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Controller, Controller]]:
    first = Controller(fleet, tmp_path_factory.mktemp("replica-a"), {**ENV, **LEASE})
    second = Controller(fleet, tmp_path_factory.mktemp("replica-b"), {**ENV, **LEASE})
    try:
        yield first, second
    finally:
        if not ap_gone(fleet, NS, "web"):  # removed while a replica runs (its finalizer)
            delete_ap(fleet, NS, "web")
            if first.proc is None and second.proc is None:
                second.start()
            eventually(lambda: ap_gone(fleet, NS, "web") or None, f"{NS}/web gone")
        for replica in (first, second):
            if replica.proc is not None:
                replica.stop()


def _leads(replica: Controller) -> bool:
    try:
        return replica.scrape().get("propagator_leader") == 1.0
    except (OSError, AssertionError):  # not serving yet
        return False


def _applied_writes(replica: Controller) -> float:
    return sum(
        v
        for k, v in replica.scrape().items()
        if k.startswith("propagator_member_writes_total{") and 'operation="apply"' in k
    )


def _remove_other_applications(fleet: Fleet) -> None:
    api = k8s.CustomObjectsApi(fleet.api(HUB))
    listed: Any = api.list_cluster_custom_object("propagator.io", "v1alpha1", GROUP_PLURAL)
    others = [(a["metadata"]["namespace"], a["metadata"]["name"]) for a in listed["items"]]
    for namespace, name in others:
        delete_ap(fleet, namespace, name)
    for namespace, name in others:
        eventually(
            lambda ns=namespace, n=name: ap_gone(fleet, ns, n) or None,  # type: ignore[misc]
            f"{namespace}/{name} gone",
        )


def _settled(replica: Controller, quiet_s: float = 3.0) -> None:
    """Wait until ``replica``'s member-write counter has not moved for ``quiet_s``."""
    last, since = _applied_writes(replica), time.monotonic()

    def quiet() -> bool:
        nonlocal last, since
        now = _applied_writes(replica)
        if now != last:
            last, since = now, time.monotonic()
        return time.monotonic() - since >= quiet_s

    eventually(lambda: quiet() or None, "the replica's writes settled")


def _on_members(fleet: Fleet) -> int:
    """The application's ConfigMaps on all members."""
    return sum(
        len(fleet.core(c).list_namespaced_config_map(NS, label_selector="part=web").items)
        for c in MEMBERS
    )


def test_the_standby_finishes_a_fan_out_the_killed_leader_began_writing_nothing_twice(
    fleet: Fleet, replicas: tuple[Controller, Controller]
) -> None:
    leader, standby = replicas
    leader.start()
    eventually(lambda: _leads(leader) or None, "the first replica leads")
    # The member-write counters below must be this application's alone: earlier tests'
    # applications (some refused or conflicting by design, retried on every start) go first.
    _remove_other_applications(fleet)
    _settled(leader)
    standby.start()
    eventually(lambda: standby.ready()[0] == 200 or None, "the standby ready (following)")
    assert not _leads(standby)

    objects = []
    for i in range(OBJECTS):
        cm = config_map(f"web-{i:03d}", NS, index=str(i))
        cm["metadata"]["labels"] = {"part": "web"}
        objects.append(cm)
    # one cluster at a time, so that the kill lands with clusters still to do
    create(fleet, application("web", NS, objects, rollout={"maxConcurrency": 1}))
    # killed as soon as the first objects show on a member: clusters are still to do
    eventually(lambda: _on_members(fleet) > 0 or None, "the leader's first objects written")
    leases = k8s.CoordinationV1Api(fleet.api(HUB))
    before: Any = leases.read_namespaced_lease(LEASE_NAME, "propagator-system").spec
    leader.kill()
    killed = time.monotonic()
    # The writes it had in flight land on the members (they were sent before the kill);
    # nobody else writes until its Lease (4 s) expires, checked below.
    time.sleep(1)
    written_by_leader = _on_members(fleet)
    assert _applied_writes(standby) == 0  # a standby writes nothing
    total = OBJECTS * len(MEMBERS)
    assert 0 < written_by_leader < total, "the kill did not land mid fan-out"

    eventually(lambda: _leads(standby) or None, "the standby takes over")
    print(f"standby leads {time.monotonic() - killed:.1f}s after the leader's SIGKILL")
    after: Any = leases.read_namespaced_lease(LEASE_NAME, "propagator-system").spec
    assert after.holder_identity != before.holder_identity
    assert after.lease_transitions == before.lease_transitions + 1

    wait_ap(fleet, NS, "web", "ready everywhere", ready_everywhere)
    assert _on_members(fleet) == total  # none lost
    # none written twice: the standby wrote exactly what the leader had not
    eventually(
        lambda: _applied_writes(standby) == total - written_by_leader or None,
        f"the standby's writes = {total} - {written_by_leader}",
    )
    time.sleep(2)  # a late duplicate would show here
    assert _applied_writes(standby) == total - written_by_leader
    by_standby = total - written_by_leader
    print(f"{written_by_leader} objects written by the leader, {by_standby} by the standby")
