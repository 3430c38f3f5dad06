"""A member's outage on the local fleet: its API server stopped, and back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import anyio
from kubernetes import client as k8s

from api.taints import NOT_READY_TAINT
from fleet.local import HUB
from fleet.local import cluster as local_cluster
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller
from tests.e2e.propagation.test_propagation import MEMBERS
from tests.e2e.waiting import HANG_GUARD_S, eventually


def tainted(fleet: Fleet, cluster: str) -> bool:
    member: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", cluster
    )
    return any(t["key"] == NOT_READY_TAINT for t in (member.get("spec") or {}).get("taints") or [])


def back(fleet: Fleet, cluster: str) -> bool:
    """The member answers and all its nodes are Ready again (after a long outage its node
    controller marks them NotReady for a moment, and a NotReady node has no room)."""
    member: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", cluster
    )
    nodes = (member.get("status") or {}).get("nodes") or {}
    return not tainted(fleet, cluster) and nodes.get("total", 0) == nodes.get("ready", -1) > 0


def all_back(fleet: Fleet, controller: Controller | None = None) -> None:
    """Every member is back (an earlier test stopped one); with ``controller``, also in
    the fleet snapshot its scheduler places from (written a moment after the members'
    status: an application created in between would be placed without the member)."""
    eventually(lambda: all(back(fleet, c) for c in MEMBERS) or None, "every member back")
    if controller is not None:
        eventually(
            lambda: (
                controller.scrape().get("propagator_fleet_snapshot_ready_clusters") == len(MEMBERS)
                or None
            ),
            "every member Ready in the controller's fleet snapshot",
        )


@contextlib.contextmanager
def stopped(fleet: Fleet, member: str) -> Iterator[None]:
    """The member's API server stopped inside the block, and answering again after it."""
    state = fleet.state.cluster(member)
    local_cluster.stop_component(state, "kube-apiserver")
    try:
        yield
    finally:
        local_cluster.start_component(state, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, state, time.monotonic() + HANG_GUARD_S)
