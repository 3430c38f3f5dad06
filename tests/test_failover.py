"""Cluster failover: an application leaves a member that stopped answering, gracefully."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fleet.snapshot import build_snapshot
from propagator.propagation.failover import evicting, evictions, next_change
from tests.e2e.manifests import application, deployment
from tests.test_reconcile import Harness
from tests.test_scheduler import cluster


def test_a_cluster_down_longer_than_tolerated_is_evicted() -> None:
    now = time.time()
    clusters = [
        cluster("up"),
        dataclasses.replace(cluster("briefly", ready=False), not_ready_since=now - 10),
        dataclasses.replace(cluster("long", ready=False), not_ready_since=now - 400),
    ]
    snap = build_snapshot(clusters, {"f": [c.name for c in clusters]}, generation=1)
    evicted = evictions(["up", "briefly", "long", "gone"], snap, 300, now)
    assert list(evicted) == ["long"]
    assert evicted["long"].reason == "not Ready for 6m40s (clusterUnreachableAfter 5m0s)"
    assert evicting(["up", "long"], snap, now) == {"long": "not Ready for 6m40s"}


def _placement(h: Harness) -> dict[str, Any]:
    return {p["cluster"]: p.get("replicas") for p in h.hub.app["status"]["placement"]}


def _running_2_2_2(failover: dict[str, Any] | None = None) -> Harness:
    """A Divided application of 6 replicas, applied 2:2:2 on clusters a, b and c."""
    app = application("web", "shop", [deployment("web", "shop", "nginx:1.27", 6)], "f")
    app["spec"]["placement"] = {"replicas": {"mode": "Divided"}}
    if failover is not None:
        app["spec"]["failover"] = failover
    h = Harness(app, clusters=("a", "b", "c"))
    h.reconcile()
    h.synced("shop/web", "a", "b", "c")
    h.reconcile(replan=False)
    return h


def _set_c(h: Harness, **facts: Any) -> None:
    """Publish a snapshot where cluster c has these facts (ready, not_ready_since...)."""
    snap = h.reconciler.store.current()
    c = dataclasses.replace(snap.clusters["c"], **facts)
    h.reconciler.store.publish([snap.clusters["a"], snap.clusters["b"], c], {"f": ["a", "b", "c"]})


def test_replicas_leave_an_unreachable_cluster_and_its_objects_go_after_the_replacement() -> None:
    h = _running_2_2_2({"clusterUnreachableAfter": "30s"})
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    # c stops answering, for longer than the application tolerates
    _set_c(h, ready=False, not_ready_since=time.time() - 60)
    h.hub.app["metadata"]["generation"] = 2
    outcome = h.reconcile()
    h.reconcile(replan=False)  # the status, as the member syncs' reports would write it
    assert _placement(h) == {"a": 3, "b": 3}  # c's replicas went where there is room
    assert h.table.get("shop/web", "c") is None  # its removal waits for the replacement
    assert outcome.replan_after_s is not None
    line = next(c for c in h.hub.app["status"]["clusters"] if c["name"] == "c")
    assert line["lastError"].startswith("evicting: not Ready for 1m0s;")
    assert [e["reason"] for e in h.hub.events] == ["Evicted"]
    assert h.reconciler.metrics.evictions.labels("c", "unreachable")._value.get() == 1
    # the replacement is applied and healthy: now what ran on c may go
    h.synced("shop/web", "a", "b")
    h.reconcile()
    removal = h.table.get("shop/web", "c")
    assert removal is not None
    assert removal.removal
    assert h.reconciler.metrics.evictions.labels("c", "unreachable")._value.get() == 1
    [metric] = h.reconciler.metrics.failover_duration.collect()
    samples = {s.name: s.value for s in metric.samples}
    assert samples["propagator_failover_duration_seconds_count"] == 1
    assert samples["propagator_failover_duration_seconds_sum"] >= 60  # lost a minute ago


def test_within_the_toleration_a_not_ready_cluster_keeps_its_replicas_and_nothing_moves() -> None:
    h = _running_2_2_2()
    _set_c(h, ready=False, not_ready_since=time.time() - 5)
    h.hub.app["metadata"]["generation"] = 2
    h.reconcile()
    h.reconcile(replan=False)
    # not 3:3 on a and b beside c's 2: the total stays 6
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    scheduled = h.condition("Scheduled")
    assert scheduled["status"] == "True"
    assert "kept where already placed: c (not ready)" in scheduled["message"]


def test_a_rebalance_places_the_application_from_scratch_once_per_value() -> None:
    app = application("web", "shop", [deployment("web", "shop", "nginx:1.27", 6)], "f")
    app["spec"]["placement"] = {"replicas": {"mode": "Divided"}}
    h = Harness(app, clusters=("a", "b", "c"))
    h.hub.app["status"] = {
        "placement": [
            {"cluster": "a", "replicas": 4},
            {"cluster": "b", "replicas": 1},
            {"cluster": "c", "replicas": 1},
        ]
    }
    h.reconcile()
    h.reconcile(replan=False)
    assert _placement(h) == {"a": 4, "b": 1, "c": 1}  # steady: nothing moves by itself
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "2026-12-01"}
    h.reconcile()
    h.reconcile(replan=False)
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    assert h.hub.app["status"]["rebalanced"] == "2026-12-01"
    h.hub.app["status"]["placement"] = [
        {"cluster": "a", "replicas": 3},
        {"cluster": "b", "replicas": 2},
        {"cluster": "c", "replicas": 1},
    ]
    h.reconcile()  # the same value again: steady
    h.reconcile(replan=False)
    assert _placement(h) == {"a": 3, "b": 2, "c": 1}


def test_failback_when_ready_returns_the_replicas_once_the_cluster_is_stable() -> None:
    for failback, expected in (
        ("Never", {"a": 3, "b": 3, "c": 0}),
        ("WhenReady", {"a": 2, "b": 2, "c": 2}),
    ):
        h = _running_2_2_2(
            {"clusterUnreachableAfter": "30s", "failback": failback, "failbackAfter": "60s"}
        )
        _set_c(h, ready=False, not_ready_since=time.time() - 60)
        h.reconcile()
        h.reconcile(replan=False)
        assert _placement(h) == {"a": 3, "b": 3}
        assert h.hub.app["status"].get("evicted", []) == (["c"] if failback == "WhenReady" else [])
        # c answers again, for longer than failbackAfter
        _set_c(h, ready=True, not_ready_since=None, ready_since=time.time() - 90)
        h.synced("shop/web", "a", "b")
        h.reconcile()
        h.reconcile(replan=False)
        assert _placement(h) == expected, failback
        assert h.hub.app["status"].get("evicted", []) == []
        if failback == "WhenReady":
            assert [e["reason"] for e in h.hub.events] == ["Evicted", "FailedBack"]


def test_the_next_change_is_when_a_toleration_or_a_failback_period_runs_out() -> None:
    now = time.time()
    clusters = [
        cluster("up"),
        dataclasses.replace(cluster("down", ready=False), not_ready_since=now - 100),
        dataclasses.replace(cluster("back"), ready_since=now - 20),
    ]
    snap = build_snapshot(clusters, {"f": [c.name for c in clusters]}, generation=1)
    # down tolerated for 300s: 200s left; back fails back after 60s: 40s left
    assert next_change(["up", "down"], [], snap, 300, None, now) == 200
    assert next_change(["up", "down"], ["back"], snap, 300, 60, now) == 40
    assert next_change(["up"], ["back"], snap, 300, None, now) is None
    assert next_change(["down"], [], snap, 30, None, now) == 0  # overdue: at once
