"""The failover state a plan carries (and the status keeps), and one plan's decision."""

from __future__ import annotations

import dataclasses
import time
from decimal import Decimal

from api.failover import Failover
from fleet.snapshot import FleetSnapshot, build_snapshot
from propagator.failover.moves import Move
from propagator.failover.state import (
    Evicted,
    FailoverState,
    decide,
    unhealthy_clocks,
)
from tests.propagator.scheduler.test_scheduler import cluster

NOW = 1_800_000_000.0


def _fleet(**ready_since: float) -> FleetSnapshot:
    clusters = [cluster("a"), cluster("b")]
    clusters += [dataclasses.replace(cluster(n), ready_since=t) for n, t in ready_since.items()]
    return build_snapshot(clusters, {"f": [c.name for c in clusters]}, generation=1)


def test_the_state_goes_to_the_status_and_comes_back() -> None:
    state = FailoverState(
        "r1",
        {"c": Evicted("c", "ApplicationUnhealthy", NOW)},
        {"a": Move("a", "Rebalance", NOW, "rebalance 'r1': keeps 4", 4)},
    )
    status = {
        "rebalanced": state.rebalanced,
        "evicted": state.evicted_status(),
        "clusters": [{"name": "a", "evicting": state.move_status("a")}, {"name": "b"}],
    }
    assert status["evicted"] == [
        {"cluster": "c", "reason": "ApplicationUnhealthy", "since": "2027-01-15T08:00:00Z"}
    ]
    assert state.move_status("b") is None
    assert FailoverState.from_status(status) == state


def test_unreadable_status_entries_are_skipped() -> None:
    status = {
        "rebalanced": 7,
        "evicted": ["c", {"cluster": "d", "reason": "Other", "since": "2027-01-15T08:00:00Z"}],
        "clusters": [
            {"name": "a", "evicting": {"reason": "Rebalance", "since": "yesterday"}},
            {"name": "b", "evicting": {"reason": "Whim", "since": "2027-01-15T08:00:00Z"}},
            {"name": "c", "evicting": "soon"},
        ],
    }
    assert FailoverState.from_status(status) == FailoverState()
    lines = {"clusters": [{"name": "a", "unhealthySince": "2027-01-15T08:00:00Z"}, {"name": "b"}]}
    assert unhealthy_clocks(lines) == {"a": NOW}


def test_a_rebalance_acts_once_per_value_and_clears_the_clusters_kept_off() -> None:
    failover = Failover.model_validate({"application": {}, "failback": "WhenReady"})
    state = FailoverState(
        "old",
        {
            "c": Evicted("c", "ApplicationUnhealthy", NOW - 10),
            "d": Evicted("d", "ClusterUnreachable", NOW - 10),
        },
    )
    same = decide(failover, state, ["a", "b"], _fleet(), {}, {}, "old", NOW)
    assert (same.rebalance, same.fresh, same.cause) == (None, False, None)
    assert same.away == {"c", "d"}
    again = decide(failover, state, ["a", "b"], _fleet(), {}, {}, "new", NOW)
    assert (again.rebalance, again.fresh, again.away) == ("new", True, set())
    assert again.state.rebalanced == "new"
    assert again.cause is not None
    assert again.cause.reason == "Rebalance"


def test_failback_returns_only_to_a_cluster_ready_long_enough() -> None:
    failover = Failover.model_validate({"failback": "WhenReady", "failbackAfter": "60s"})
    state = FailoverState(
        None,
        {
            "c": Evicted("c", "ClusterUnreachable", NOW - 600),
            "d": Evicted("d", "ClusterUnreachable", NOW - 600),
        },
    )
    decision = decide(
        failover, state, ["a", "b"], _fleet(c=NOW - 90, d=NOW - 30), {}, {}, None, NOW
    )
    assert decision.returning == ["c"]
    # back long enough, but none of its nodes Ready yet (their heartbeats lapsed): no room
    fleet = _fleet(c=NOW - 90)
    nodeless = dataclasses.replace(fleet.clusters["c"], allocatable={"pods": Decimal(0)})
    fleet = build_snapshot([fleet.clusters["a"], nodeless], {}, generation=2)
    assert decide(failover, state, ["a"], fleet, {}, {}, None, NOW).returning == []
    assert set(decision.state.evicted) == {"d"}
    assert decision.cause is not None
    assert decision.cause.message == "failback to c"
    never = Failover.model_validate({"failback": "Never"})
    assert decide(never, state, ["a"], _fleet(c=NOW - 90), {}, {}, None, NOW).state.evicted == {}


def test_application_failover_keeps_the_cluster_off_while_it_is_on() -> None:
    on = Failover.model_validate({"application": {"unhealthyAfter": "60s"}})
    decision = decide(
        on,
        FailoverState(),
        ["a", "b"],
        _fleet(),
        {"a": "Healthy", "b": "Degraded"},
        {"b": NOW - 61},
        None,
        NOW,
    )
    assert list(decision.evicted) == ["b"]
    assert decision.state.evicted == {"b": Evicted("b", "ApplicationUnhealthy", NOW)}
    assert decision.immediate == frozenset()
    later = decide(on, decision.state, ["a"], _fleet(), {"a": "Healthy"}, {}, None, NOW + 1)
    assert later.away == {"b"}
    off = Failover()
    assert decide(off, decision.state, ["a"], _fleet(), {}, {}, None, NOW + 1).away == set()


def test_purge_immediately_is_said_for_the_unhealthy_cluster_only() -> None:
    failover = Failover.model_validate(
        {"clusterUnreachableAfter": "1s", "application": {"purgeMode": "Immediately"}}
    )
    down = dataclasses.replace(cluster("c", ready=False), not_ready_since=time.time() - 60)
    snap = build_snapshot([cluster("a"), cluster("b"), down], {"f": ["a", "b", "c"]}, generation=1)
    decision = decide(
        failover,
        FailoverState(),
        ["a", "b", "c"],
        snap,
        {"a": "Healthy", "b": "Degraded", "c": "Unknown"},
        {"b": 0.0},
        None,
        time.time(),
    )
    assert {n: e.reason for n, e in decision.evicted.items()} == {
        "b": "ApplicationUnhealthy",
        "c": "ClusterUnreachable",
    }
    assert decision.immediate == frozenset({"b"})
