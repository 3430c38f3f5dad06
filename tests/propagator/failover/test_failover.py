"""Failover through the reconcile: an application leaves a member that stopped answering,
or one where it stays unhealthy, gracefully; it comes back by failback or rebalance."""

from __future__ import annotations

import copy
import dataclasses
import time
from decimal import Decimal
from typing import Any

import anyio

from fleet.snapshot import build_snapshot
from propagator.failover.decisions import (
    evictions,
    next_change,
    unanswered,
    unhealthy_evictions,
    unhealthy_since,
)
from tests.e2e.manifests import application, deployment
from tests.propagator.propagation.test_reconcile import Harness
from tests.propagator.scheduler.test_scheduler import cluster

APP = "shop/web"


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
    assert evicted["long"].reason == "ClusterUnreachable"
    assert evicted["long"].message == "not Ready for 6m40s (clusterUnreachableAfter 5m0s)"
    assert unanswered(["up", "long"], snap, now) == {"long": "not Ready for 6m40s"}


def test_the_unhealthy_clock_runs_while_not_healthy_and_holds_while_unknown() -> None:
    assert unhealthy_since("Progressing", None, 100.0) == 100.0
    assert unhealthy_since("Degraded", 40.0, 100.0) == 40.0
    assert unhealthy_since("Unknown", 40.0, 100.0) == 40.0  # unreachable: not its business
    assert unhealthy_since("Unknown", None, 100.0) is None
    assert unhealthy_since("Healthy", 40.0, 100.0) is None


def test_an_application_unhealthy_everywhere_is_not_moved() -> None:
    since = {"a": 0.0, "b": 0.0}
    assert unhealthy_evictions({"a": "Degraded", "b": "Progressing"}, since, 60, 100) == {}
    moved = unhealthy_evictions({"a": "Degraded", "b": "Healthy"}, since, 60, 100)
    assert list(moved) == ["a"]
    assert moved["a"].message == "Degraded for 1m40s (unhealthyAfter 1m0s)"
    assert unhealthy_evictions({"a": "Degraded", "b": "Healthy"}, since, 600, 100) == {}


def _placement(h: Harness) -> dict[str, Any]:
    return {p["cluster"]: p.get("replicas") for p in h.hub.app["status"]["placement"]}


def _line(h: Harness, name: str) -> dict[str, Any]:
    return next(c for c in h.hub.app["status"]["clusters"] if c["name"] == name)


def _replicas(h: Harness, name: str) -> int:
    work = h.table.get(APP, name)
    assert work is not None
    [web] = work.objects
    return int(web["spec"]["replicas"])


def _running(
    replicas: int = 6, failover: dict[str, Any] | None = None, mode: str = "Divided"
) -> Harness:
    """An application of ``replicas`` applied on clusters a, b and c (2:2:2 for 6 Divided)."""
    app = application("web", "shop", [deployment("web", "shop", "nginx:1.27", replicas)], "f")
    app["spec"]["placement"] = {"replicas": {"mode": mode}}
    if failover is not None:
        app["spec"]["failover"] = failover
    h = Harness(app, clusters=("a", "b", "c"))
    h.reconcile()
    h.synced(APP, "a", "b", "c")
    h.reconcile(replan=False)
    return h


def _set_c(h: Harness, **facts: Any) -> None:
    """Publish a snapshot where cluster c has these facts (ready, not_ready_since...)."""
    snap = h.reconciler.store.current()
    c = dataclasses.replace(snap.clusters["c"], **facts)
    h.reconciler.store.publish([snap.clusters["a"], snap.clusters["b"], c], {"f": ["a", "b", "c"]})


def _replan(h: Harness) -> Any:
    """Plan again, then refresh the status as the member syncs' reports would."""
    h.hub.app["metadata"]["generation"] += 1
    outcome = h.reconcile()
    return outcome, h.reconcile(replan=False)


def test_replicas_leave_an_unreachable_cluster_and_its_objects_go_after_the_replacement() -> None:
    h = _running(failover={"clusterUnreachableAfter": "30s"})
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    # c stops answering, for longer than the application tolerates
    _set_c(h, ready=False, not_ready_since=time.time() - 60)
    outcome, refresh = _replan(h)
    assert _placement(h) == {"a": 3, "b": 3}  # c's replicas went where there is room
    assert h.table.get(APP, "c") is None  # its removal waits for the replacement
    assert outcome.replan_after_s is not None  # when the grace period runs out
    assert refresh.replan_after_s is None  # the replacement is not Available yet
    evicting_c = _line(h, "c")["evicting"]
    assert evicting_c["reason"] == "ClusterUnreachable"
    assert evicting_c["replicas"] == 2
    assert evicting_c["message"].startswith("not Ready for 1m0s")
    assert [e["reason"] for e in h.hub.events] == ["Evicted"]
    assert h.reconciler.metrics.evictions.labels("c", "unreachable")._value.get() == 1
    # the replacement is applied and Healthy: the refresh asks for a plan at once
    h.synced(APP, "a", "b")
    assert h.reconcile(replan=False).replan_after_s == 0
    _replan(h)
    removal = h.table.get(APP, "c")
    assert removal is not None
    assert removal.removal
    assert "evicting" not in _line(h, "c")
    assert _line(h, "c")["lastError"].startswith("removing once it answers: not Ready for")
    assert h.reconciler.metrics.evictions.labels("c", "unreachable")._value.get() == 1
    [metric] = h.reconciler.metrics.failover_duration.collect()
    samples = {s.name: s.value for s in metric.samples}
    assert samples["propagator_failover_duration_seconds_count"] == 1
    assert samples["propagator_failover_duration_seconds_sum"] >= 60  # lost a minute ago


def test_an_evicted_cluster_that_answers_again_keeps_its_objects_until_replaced() -> None:
    h = _running(failover={"clusterUnreachableAfter": "30s"})
    _set_c(h, ready=False, not_ready_since=time.time() - 60)
    _replan(h)
    _set_c(h, ready=True, not_ready_since=None, ready_since=time.time())
    _replan(h)
    assert _placement(h) == {"a": 3, "b": 3, "c": 0}  # failback Never: none go back
    assert _replicas(h, "c") == 2  # but its 2 stay while a and b are not Available
    assert _line(h, "c")["evicting"]["reason"] == "ClusterUnreachable"
    h.synced(APP, "a", "b")
    _replan(h)
    assert _replicas(h, "c") == 0


def test_the_grace_period_lets_the_replicas_go_without_a_replacement() -> None:
    h = _running(failover={"clusterUnreachableAfter": "30s", "gracePeriod": "1s"})
    _set_c(h, ready=False, not_ready_since=time.time() - 60)
    outcome, _ = _replan(h)
    assert outcome.replan_after_s <= 1.5
    assert h.table.get(APP, "c") is None
    time.sleep(1.1)
    h.healths["a"] = "Progressing"  # never replaced
    _replan(h)
    removal = h.table.get(APP, "c")
    assert removal is not None
    assert removal.removal
    [metric] = h.reconciler.metrics.failover_duration.collect()
    counts = {s.name: s.value for s in metric.samples}
    assert counts["propagator_failover_duration_seconds_count"] == 0  # not replaced


def test_within_the_toleration_a_not_ready_cluster_keeps_its_replicas_and_nothing_moves() -> None:
    h = _running()
    _set_c(h, ready=False, not_ready_since=time.time() - 5)
    _replan(h)
    # not 3:3 on a and b beside c's 2: the total stays 6
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    scheduled = h.condition("Scheduled")
    assert scheduled["status"] == "True"
    assert "kept where already placed: c (not ready)" in scheduled["message"]


def _skewed() -> Harness:
    """6 replicas Divided, running 4:1:1 on a, b and c."""
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
    h.synced(APP, "a", "b", "c")
    h.reconcile(replan=False)
    return h


def test_a_rebalance_places_the_application_from_scratch_once_per_value() -> None:
    h = _skewed()
    assert _placement(h) == {"a": 4, "b": 1, "c": 1}  # steady: nothing moves by itself
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "2026-12-01"}
    _replan(h)
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    assert h.hub.app["status"]["rebalanced"] == "2026-12-01"
    assert [e["reason"] for e in h.hub.events] == ["Rebalanced"]
    h.hub.app["status"]["placement"] = [
        {"cluster": "a", "replicas": 3},
        {"cluster": "b", "replicas": 2},
        {"cluster": "c", "replicas": 1},
    ]
    h.reconciler.forget(APP)  # as after a restart: the status is all there is
    h.reconcile()  # the same value again: steady
    h.reconcile(replan=False)
    assert _placement(h) == {"a": 3, "b": 2, "c": 1}


def test_a_rebalance_keeps_the_replicas_it_moves_until_they_run_elsewhere() -> None:
    h = _skewed()
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "now"}
    _replan(h)
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    assert _replicas(h, "a") == 4  # kept while b and c scale up
    assert _line(h, "a")["evicting"]["reason"] == "Rebalance"
    assert _line(h, "a")["evicting"]["replicas"] == 4
    assert (_replicas(h, "b"), _replicas(h, "c")) == (2, 2)
    h.synced(APP, "b", "c")
    h.healths["c"] = "Progressing"
    _replan(h)
    assert _replicas(h, "a") == 4  # c is not Available yet
    h.healths["c"] = "Healthy"
    _replan(h)
    assert _replicas(h, "a") == 2
    assert "evicting" not in _line(h, "a")


def test_a_restarted_controller_keeps_a_move_in_progress_from_the_status() -> None:
    h = _skewed()
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "now"}
    _replan(h)
    h.reconciler.forget(APP)  # restart: the plan and the sync states are gone
    _replan(h)
    assert _replicas(h, "a") == 4
    assert h.hub.app["status"]["rebalanced"] == "now"
    assert [e["reason"] for e in h.hub.events] == ["Rebalanced"]  # not again


def test_failback_when_ready_returns_the_replicas_once_the_cluster_is_stable() -> None:
    for failback, expected in (
        ("Never", {"a": 3, "b": 3, "c": 0}),
        ("WhenReady", {"a": 2, "b": 2, "c": 2}),
    ):
        h = _running(
            failover={
                "clusterUnreachableAfter": "30s",
                "failback": failback,
                "failbackAfter": "60s",
            }
        )
        _set_c(h, ready=False, not_ready_since=time.time() - 60)
        _replan(h)
        assert _placement(h) == {"a": 3, "b": 3}
        evicted = h.hub.app["status"].get("evicted", [])
        assert [(e["cluster"], e["reason"]) for e in evicted] == (
            [("c", "ClusterUnreachable")] if failback == "WhenReady" else []
        )
        # c answers again, for longer than failbackAfter
        _set_c(h, ready=True, not_ready_since=None, ready_since=time.time() - 90)
        h.synced(APP, "a", "b")
        _replan(h)
        assert _placement(h) == expected, failback
        assert h.hub.app["status"].get("evicted", []) == []
        if failback == "WhenReady":
            assert [e["reason"] for e in h.hub.events] == ["Evicted", "FailedBack"]
            # a and b keep 3 each until c's 2 run
            assert (_replicas(h, "a"), _replicas(h, "b")) == (3, 3)
            assert _line(h, "a")["evicting"]["reason"] == "Failback"


def _unhealthy_on_c(purge: str = "Graciously", healthy_elsewhere: bool = True) -> Harness:
    """6 replicas Divided 2:2:2 on a, b and c with application failover after 60s; c
    has been Degraded for long (and a and b too unless ``healthy_elsewhere``)."""
    h = _running(failover={"application": {"unhealthyAfter": "60s", "purgeMode": purge}})
    h.healths["c"] = "Degraded"
    if not healthy_elsewhere:
        h.healths["a"] = h.healths["b"] = "Progressing"
    h.reconcile(replan=False)  # the clock starts
    for line in h.hub.app["status"]["clusters"]:
        if "unhealthySince" in line:
            line["unhealthySince"] = "2026-01-01T00:00:00Z"
    return h


def test_the_unhealthy_clock_is_in_the_status_and_asks_for_a_plan_when_it_runs_out() -> None:
    h = _running(2, {"application": {"unhealthyAfter": "60s"}}, mode="Duplicated")
    h.healths["c"] = "Progressing"
    outcome = h.reconcile(replan=False)
    assert "unhealthySince" in _line(h, "c")
    assert "unhealthySince" not in _line(h, "a")
    assert 59 <= outcome.replan_after_s <= 61  # the status keeps whole seconds
    h.healths["c"] = "Healthy"
    h.reconcile(replan=False)
    assert "unhealthySince" not in _line(h, "c")


def test_an_application_unhealthy_on_one_cluster_leaves_it_gracefully() -> None:
    h = _unhealthy_on_c()
    _replan(h)
    assert _placement(h) == {"a": 3, "b": 3}
    assert h.table.get(APP, "c") is None  # graceful: until a and b run 3 each
    h.synced(APP, "a", "b")
    assert h.reconcile(replan=False).replan_after_s == 0  # they do: the next plan lets go
    h.reconcile()
    removal = h.table.get(APP, "c")
    assert removal is not None
    assert removal.removal
    [evicted] = h.hub.app["status"]["evicted"]
    assert (evicted["cluster"], evicted["reason"]) == ("c", "ApplicationUnhealthy")
    [event] = h.hub.events
    assert event["reason"] == "Evicted"
    assert "Degraded for" in event["message"]
    assert h.reconciler.metrics.evictions.labels("c", "unhealthy")._value.get() == 1
    # kept off, also once it would be healthy there: until a rebalance
    h.healths["c"] = "Healthy"
    _replan(h)
    assert "c" not in _placement(h)
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "1"}
    _replan(h)
    assert _placement(h) == {"a": 2, "b": 2, "c": 2}
    assert h.hub.app["status"]["evicted"] == []


def test_purge_mode_immediately_removes_at_once() -> None:
    h = _unhealthy_on_c("Immediately")
    _replan(h)
    removal = h.table.get(APP, "c")
    assert removal is not None
    assert removal.removal


def test_without_application_failover_or_when_unhealthy_everywhere_nothing_moves() -> None:
    h = _unhealthy_on_c(healthy_elsewhere=False)
    _replan(h)
    assert set(_placement(h)) == {"a", "b", "c"}
    h = _running(2, mode="Duplicated")
    h.healths["c"] = "Degraded"
    h.reconcile(replan=False)
    assert "unhealthySince" not in _line(h, "c")
    _replan(h)
    assert set(_placement(h)) == {"a", "b", "c"}


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
    # no Ready node yet: its nodes' change plans it again, not a clock
    roomless = dataclasses.replace(snap.clusters["back"], allocatable={"pods": Decimal(0)})
    snap = build_snapshot([roomless], {}, generation=2)
    assert next_change([], ["back"], snap, 300, 60, now) is None


def _planned_twice(h: Harness) -> dict[str, int | None]:
    """Plan (the generation moved on), then plan again from the application as the
    informer's cache still held it — its status from before the first plan's write came
    back through the watch — as when a snapshot changes meanwhile; returns the placement
    the first plan made (the second must keep it)."""
    h.hub.app["metadata"]["generation"] += 1
    stale = copy.deepcopy(h.hub.app)
    h.reconcile()
    h.reconcile(replan=False)
    first = _placement(h)
    anyio.run(lambda: h.reconciler.reconcile(copy.deepcopy(stale), replan=True))
    h.reconcile(replan=False)
    assert _placement(h) == first
    return first


def test_a_plan_before_the_last_status_write_is_seen_keeps_a_rebalance() -> None:
    h = _skewed()  # status: 4:1:1
    h.hub.app["metadata"]["annotations"] = {"propagator.io/rebalance": "now"}
    assert _planned_twice(h) == {"a": 2, "b": 2, "c": 2}
    assert _replicas(h, "b") == 2


def test_a_plan_before_the_last_status_write_is_seen_keeps_a_failback() -> None:
    h = _running(
        failover={"clusterUnreachableAfter": "30s", "failback": "WhenReady", "failbackAfter": "3s"}
    )
    _set_c(h, ready=False, not_ready_since=time.time() - 60)
    _replan(h)
    assert _placement(h) == {"a": 3, "b": 3}  # status: c evicted
    _set_c(h, ready=True, not_ready_since=None, ready_since=time.time() - 10)
    assert _planned_twice(h) == {"a": 2, "b": 2, "c": 2}
    assert _replicas(h, "c") == 2
