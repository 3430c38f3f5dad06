"""Placement that knows where the application runs: the issue's examples as written, and
properties over random fleets with the application's own pods running."""

from __future__ import annotations

import dataclasses
from collections import Counter
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.placement import Placement
from fleet.snapshot import ClusterInfo
from propagator.scheduler import Decision, Demand
from propagator.scheduler.plugins import replicas_capacity
from propagator.scheduler.types import SchedulingContext
from tests.propagator.scheduler.test_scheduler import cluster, decide, demand, placement

DIVIDED = {"mode": "Divided"}
BY_ROOM = {"mode": "Divided", "weights": {"dynamic": "AvailableCapacity"}}


def replicas_of(decision: Decision) -> dict[str, int]:
    return {p.cluster: p.replicas for p in decision.placed}


def running(clusters: list[ClusterInfo], placed: dict[str, int], d: Demand) -> list[ClusterInfo]:
    """The clusters once the placed replicas run there (their requests taken from
    ``available``), as the members would report them."""
    out = []
    for c in clusters:
        used = {r: v * placed.get(c.name, 0) for r, v in d.per_replica.items()}
        available = {r: v - used.get(r, Decimal(0)) for r, v in c.available.items()}
        out.append(dataclasses.replace(c, available=MappingProxyType(available)))
    return out


def test_divided_replicas_stay_placed_once_their_own_pods_take_the_room() -> None:
    clusters = [cluster("a", free_cpu="10"), cluster("b", free_cpu="10")]
    p, d = placement(replicas=DIVIDED), demand(16)
    first = decide(clusters, p, d)
    assert replicas_of(first) == {"a": 8, "b": 8}
    # the pods run: 2 cpu free on each; the application's own 8 count as its room
    again = decide(running(clusters, replicas_of(first), d), p, d, current=replicas_of(first))
    assert again.schedulable
    assert replicas_of(again) == {"a": 8, "b": 8}


def test_a_scale_down_removes_in_proportion_to_what_runs() -> None:
    # 12 -> 6, room for 1 more on each, 2:4:6 running: Karmada's 1:2:3, not unschedulable
    clusters = [cluster(n, free_cpu="1") for n in "abc"]
    now = {"a": 2, "b": 4, "c": 6}
    decision = decide(clusters, placement(replicas=DIVIDED), demand(6), current=now)
    assert replicas_of(decision) == {"a": 1, "b": 2, "c": 3}


def test_a_scale_up_only_adds_in_proportion_to_the_room() -> None:
    # 12 -> 24, room for 10 more on each, 2:4:6 running: 6:8:10 (nothing moves), not 8:8:8
    clusters = [cluster(n, cpu="16", free_cpu="10") for n in "abc"]
    now = {"a": 2, "b": 4, "c": 6}
    decision = decide(clusters, placement(replicas=BY_ROOM), demand(24), current=now)
    assert replicas_of(decision) == {"a": 6, "b": 8, "c": 10}


def test_a_scale_up_by_weight_never_takes_a_replica_away() -> None:
    weights = {
        "static": [{"cluster": n, "weight": w} for n, w in zip("abc", (1, 3, 3), strict=True)]
    }
    clusters = [cluster(n, free_cpu="100") for n in "abc"]
    p = placement(replicas={"mode": "Divided", "weights": weights})
    three = replicas_of(decide(clusters, p, demand(3)))
    four = replicas_of(decide(clusters, p, demand(4)))
    assert all(four[n] >= three[n] for n in "abc")
    steady = replicas_of(decide(clusters, p, demand(4), current=three))
    assert all(steady[n] >= three[n] for n in "abc")


def test_duplicated_under_max_clusters_does_not_oscillate() -> None:
    clusters = [cluster(n, free_cpu="8") for n in "abc"]
    p, d = placement(maxClusters=2), demand(6)
    placed: dict[str, int] = {}
    seen = []
    for _ in range(5):  # each pass sees the previous pass's pods as load
        decision = decide(running(clusters, placed, d), p, d, current=placed)
        placed = replicas_of(decision)
        seen.append(sorted(placed))
    assert all(s == seen[0] for s in seen), seen


def test_ties_spread_applications_over_the_fleet() -> None:
    clusters = [cluster(n) for n in ("a", "b", "c", "d")]
    p = placement(maxClusters=1)
    chosen = Counter(decide(clusters, p, application=f"uid-{i}").clusters[0] for i in range(200))
    assert set(chosen) == {"a", "b", "c", "d"}
    assert min(chosen.values()) >= 25  # about 50 each, never all on "a"
    # 3:1 weights, 2 replicas: the tied second replica goes either way by application
    weights = {"static": [{"cluster": "a", "weight": 3}, {"cluster": "b", "weight": 1}]}
    divided = placement(replicas={"mode": "Divided", "weights": weights})
    splits = {
        tuple(
            sorted(
                replicas_of(decide(clusters[:2], divided, demand(2), application=f"u{i}")).items()
            )
        )
        for i in range(20)
    }
    assert splits == {(("a", 2), ("b", 0)), (("a", 1), ("b", 1))}


def test_spread_meets_min_clusters_with_the_fewest_groups() -> None:
    clusters = [
        cluster("east-1", region="east"),
        cluster("east-2", region="east"),
        cluster("east-3", region="east"),
        cluster("west-1", region="west", free_cpu="7"),
        cluster("west-2", region="west", free_cpu="7"),
    ]
    one_region = placement(
        minClusters=3, maxClusters=3, spread={"byField": "region", "minGroups": 1, "maxGroups": 1}
    )
    decision = decide(clusters, one_region)
    assert decision.schedulable, decision.summary
    assert decision.clusters == ["east-1", "east-2", "east-3"]
    # two groups asked: two used (not every allowed one), each covered
    three_regions = [*clusters, cluster("north-1", region="north", free_cpu="6")]
    two = decide(three_regions, placement(spread={"byField": "region", "minGroups": 2}))
    regions = {c.region for c in three_regions if c.name in two.clusters}
    assert len(regions) == 2
    assert two.verdicts["north-1"].detail == "region north is not among the 2 group(s) used"


def test_under_max_clusters_the_chosen_room_holds_the_replicas() -> None:
    # 120 replicas, max 2: the two best scored hold 50 + 60; swapping in the 80 fits
    rooms = {"a": 50, "b": 60, "c": 80, "d": 40}
    clusters = [
        cluster(n, cpu="200", free_cpu=str(r), memory="999", labels={"favourite": str(n in "ab")})
        for n, r in rooms.items()
    ]
    p = placement(
        maxClusters=2,
        replicas=DIVIDED,
        preferred=[{"weight": 100, "selector": {"matchLabels": {"favourite": "True"}}}],
    )
    decision = decide(clusters, p, demand(120))
    assert decision.schedulable, decision.summary
    # ranked b (favourite, more free), a, c, d: b+a hold 110; b+c is the best pair that fits
    assert decision.clusters == ["b", "c"]
    assert sum(replicas_of(decision).values()) == 120


def test_layers_overflow_when_asked() -> None:
    clusters = [
        cluster("fast", layer="fast", free_cpu="2"),
        cluster("spare-1", layer="spare"),
        cluster("spare-2", layer="spare"),
    ]
    spec: dict[str, Any] = {"layers": ["fast", "spare"], "replicas": DIVIDED}
    whole = decide(clusters, placement(**spec), demand(5))
    assert replicas_of(whole) == {"spare-1": 3, "spare-2": 2}  # the default: one tier
    spill = decide(clusters, placement(**spec, overflow=True), demand(5))
    assert spill.schedulable, spill.summary
    placed = replicas_of(spill)
    assert placed["fast"] == 2
    assert placed["spare-1"] + placed["spare-2"] == 3
    assert "held 2 of 5 replicas, the rest overflow" in [a.outcome for a in spill.attempts]
    # more than every layer holds: nothing is placed
    assert not decide(clusters, placement(**spec, overflow=True), demand(40)).schedulable


def test_overflow_is_refused_for_duplicated() -> None:
    with pytest.raises(ValueError, match=r"overflow applies only to replicas\.mode Divided or Agg"):
        Placement.model_validate({"layers": ["a", "b"], "overflow": True})


def test_aggregated_uses_the_fewest_clusters_that_hold_the_replicas() -> None:
    clusters = [cluster("a", free_cpu="3"), cluster("b", free_cpu="5"), cluster("c", free_cpu="8")]
    p = placement(replicas={"mode": "Aggregated"})
    assert replicas_of(decide(clusters, p, demand(7))) == {"c": 7}
    two = replicas_of(decide(clusters, p, demand(10)))
    assert sorted(two) == ["b", "c"]
    assert sum(two.values()) == 10
    # where it runs stays: a scale-up adds to the clusters it is on first
    steady = replicas_of(decide(clusters, p, demand(12), current=two))
    assert all(steady[n] >= two[n] for n in two)


# -- properties ----------------------------------------------------------------------------


@st.composite
def fleets(draw: st.DrawFn) -> list[ClusterInfo]:
    return [
        cluster(
            f"c{i}",
            region=draw(st.sampled_from(["r1", "r2", "r3"])),
            cpu="64",
            free_cpu=str(draw(st.integers(0, 20))),
        )
        for i in range(draw(st.integers(1, 8)))
    ]


placements = st.fixed_dictionaries(
    {
        "replicas": st.sampled_from(
            [DIVIDED, BY_ROOM, {"mode": "Aggregated"}, {"mode": "Duplicated"}]
        )
    },
    optional={
        "maxClusters": st.integers(1, 5),
        "spread": st.fixed_dictionaries(
            {"byField": st.just("region")}, optional={"minGroups": st.integers(1, 2)}
        ),
    },
)


@settings(max_examples=150, deadline=None)
@given(fleets(), placements, st.integers(1, 30), st.integers(-10, 10), st.text(max_size=6))
def test_properties_with_the_application_running(
    clusters: list[ClusterInfo], spec: dict[str, Any], replicas: int, change: int, uid: str
) -> None:
    p = placement(**spec)
    d = demand(replicas)
    first = decide(clusters, p, d, application=uid)
    if not first.schedulable:
        return
    placed = replicas_of(first)
    live = running(clusters, placed, d)
    # nothing changed: the same placement, pass after pass
    again = decide(live, p, d, current=placed, application=uid)
    assert replicas_of(again) == placed
    # within room, the application's own replicas counted back
    ctx = SchedulingContext(p, d, current=placed)
    by_name = {c.name: c for c in live}
    for name, n in placed.items():
        cap = replicas_capacity(by_name[name], ctx)
        assert cap is None or n <= cap
    # a rescale moves only what it must: up only adds, down only removes, where it stays
    # (a cluster may leave only when a scale-up needs a roomier set within maxClusters)
    total = max(0, replicas + change)
    rescaled = decide(live, p, demand(total), current=placed, application=uid)
    if rescaled.schedulable and p.replicas.mode != "Duplicated":
        after = replicas_of(rescaled)
        for name, n in placed.items():
            if change >= 0 and name in after:
                assert after[name] >= n, (placed, after)
            elif change < 0:
                assert name in after or p.replicas.mode == "Aggregated", (placed, after)
                assert after.get(name, 0) <= n, (placed, after)
        if change >= 0 and set(placed) - set(after):
            # leaving was needed: the clusters it ran on could not hold the new total
            kept_room = [replicas_capacity(by_name[n], ctx) for n in placed]
            assert None not in kept_room
            assert sum(c for c in kept_room if c is not None) < total
