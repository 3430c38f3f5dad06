"""The fleet manager's fresh view of the members, for decisions on a stale snapshot."""

from __future__ import annotations

import time
from typing import Any, cast

from fleet.connection import KubeConnection
from fleet.health import Health
from fleet.member import MemberMonitor
from fleet.snapshot import SnapshotStore
from propagator.fleetmanager import FleetManager
from propagator.fleetmanager.manager import FRESH_SCAN_REUSE_S
from propagator.settings import Settings


def _member(name: str, ready: str, taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "resourceVersion": "7", "labels": {"env": "prod"}},
        "spec": {"layer": "edge", "taints": taints},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "ProbeSucceeded",
                    "message": "",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ]
        },
    }


def test_fresh_clusters_show_what_the_probes_see_not_what_the_hub_last_stored() -> None:
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    user_taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    # the hub still says Ready (the status writes have been failing), the probes do not
    manager.members.cache["down"] = _member("down", "True", [user_taint])
    manager.members.cache["up"] = _member(
        "up", "False", [{"key": "propagator.io/not-ready", "effect": "NoSchedule"}]
    )
    for name, ready in (("down", False), ("up", True)):
        manager.monitors[name] = MemberMonitor(
            name,
            "1",
            manager.policy,
            connection=cast(KubeConnection, object()),
            health=Health(ready=ready, not_ready_since=None if ready else time.time() - 5),
        )
    fresh = {c.name: c for c in manager.fresh_clusters()}
    assert (fresh["down"].ready, fresh["up"].ready) == (False, True)
    assert [(t.key, t.effect) for t in fresh["down"].taints] == [
        ("dedicated", "NoSchedule"),
        ("propagator.io/not-ready", "NoSchedule"),
    ]
    assert fresh["up"].taints == ()  # the stale not-ready taint is gone
    assert (fresh["down"].layer, dict(fresh["down"].labels)) == ("edge", {"env": "prod"})


def test_a_fresh_scan_serves_the_decisions_of_the_next_second(monkeypatch: Any) -> None:
    manager = FleetManager(cast(KubeConnection, object()), Settings(), SnapshotStore())
    manager.members.cache["m1"] = _member("m1", "True", [])
    monitor = MemberMonitor(
        "m1",
        "1",
        manager.policy,
        connection=cast(KubeConnection, object()),
        health=Health(ready=True),
    )
    manager.monitors["m1"] = monitor
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    assert manager.fresh_clusters()[0].ready
    monitor.health = Health(ready=False, not_ready_since=time.time())
    clock[0] += FRESH_SCAN_REUSE_S / 2
    assert manager.fresh_clusters()[0].ready  # the same scan, half a second later
    clock[0] += FRESH_SCAN_REUSE_S
    assert not manager.fresh_clusters()[0].ready  # a new scan
