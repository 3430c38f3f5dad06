"""The layered scheduler: each plugin, each rule, and properties over random fleets."""

from __future__ import annotations

import random
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.placement import Placement
from api.taints import NOT_READY_TAINT, Taint
from fleet.snapshot import ClusterInfo, build_snapshot
from propagator.scheduler import (
    DEFAULT_PLUGINS,
    Demand,
    PluginError,
    Scheduler,
    build_profile,
    demand_of,
    explain,
    on_clusters,
)
from propagator.scheduler.pluginregistry import discover
from propagator.scheduler.plugins import (
    ApiEnablementFilter,
    BalancedAllocation,
    Capacity,
    ClusterAffinity,
    Failed,
    LayerOrder,
    LeastAllocated,
    Preference,
    TaintPreference,
    TaintToleration,
    TenantQuotaFilter,
)
from propagator.scheduler.replicas import apportion as divide
from propagator.scheduler.types import SchedulingContext

DEPLOYMENT = ("apps/v1", "Deployment")
PROFILE = build_profile(DEFAULT_PLUGINS)


def cluster(
    name: str,
    *,
    layer: str = "core",
    labels: dict[str, str] | None = None,
    cpu: str = "8",
    free_cpu: str | None = None,
    memory: str = "32",
    free_memory: str | None = None,
    ready: bool = True,
    taints: tuple[Taint, ...] = (),
    region: str | None = None,
    kinds: frozenset[tuple[str, str]] | None = None,
) -> ClusterInfo:
    return ClusterInfo(
        name=name,
        labels=MappingProxyType(labels or {}),
        layer=layer,
        region=region,
        taints=taints,
        ready=ready,
        api_enablements=kinds if kinds is not None else frozenset({DEPLOYMENT}),
        available=MappingProxyType(
            {
                "cpu": Decimal(free_cpu or cpu),
                "memory": Decimal(free_memory or memory),
                "pods": Decimal(100),
            }
        ),
        allocatable=MappingProxyType(
            {"cpu": Decimal(cpu), "memory": Decimal(memory), "pods": Decimal(100)}
        ),
    )


def demand(replicas: int = 1, cpu: str = "1", memory: str = "1") -> Demand:
    return Demand(
        replicas,
        {"cpu": Decimal(cpu), "memory": Decimal(memory), "pods": Decimal(1)},
        frozenset({DEPLOYMENT}),
    )


def placement(**spec: Any) -> Placement:
    return Placement.model_validate(spec)


def ctx(
    p: Placement | None = None,
    d: Demand | None = None,
    quota: dict[str, dict[str, Decimal]] | None = None,
) -> SchedulingContext:
    p = p or placement()
    return SchedulingContext(p, d or demand(), quota, {x: i for i, x in enumerate(p.layers)})


def decide(
    clusters: list[ClusterInfo], p: Placement | None = None, d: Demand | None = None, **kw: Any
) -> Any:
    snap = build_snapshot(clusters, {"f": [c.name for c in clusters]}, generation=1)
    return Scheduler(PROFILE).schedule(snap, "f", p or placement(), d or demand(), age_s=0, **kw)


# -- filters -------------------------------------------------------------------------------


def test_taints_drop_unless_tolerated() -> None:
    tainted = cluster("a", taints=(Taint(key=NOT_READY_TAINT, effect="NoSchedule"),))
    assert TaintToleration().filter(tainted, ctx()) == (
        "tainted not-ready",
        f"taint {NOT_READY_TAINT}=:NoSchedule not tolerated",
    )
    tolerant = placement(tolerations=[{"key": NOT_READY_TAINT, "operator": "Exists"}])
    assert TaintToleration().filter(tainted, ctx(tolerant)) is None
    assert TaintToleration().filter(cluster("b", ready=False), ctx())[0] == "not ready"  # type: ignore[index]


def test_prefer_no_schedule_lowers_the_score_instead_of_filtering() -> None:
    avoided = Taint(key="example.com/spot", value="true", effect="PreferNoSchedule")
    spot = cluster("spot", taints=(avoided,))
    plain = cluster("plain")
    assert TaintToleration().filter(spot, ctx()) is None
    assert TaintPreference().score(plain, ctx()) == 100
    assert TaintPreference().score(spot, ctx()) == 50
    tolerant = placement(tolerations=[{"key": "example.com/spot", "operator": "Exists"}])
    assert TaintPreference().score(spot, ctx(tolerant)) == 100
    # with room on both, the untainted cluster wins the single slot
    decision = decide([spot, plain], placement(maxClusters=1))
    assert [p.cluster for p in decision.placed] == ["plain"]
    # the tainted one is still used when it is the only one
    assert [p.cluster for p in decide([spot], placement()).placed] == ["spot"]


def test_tolerations_compare_numbers_with_gt_and_lt() -> None:
    slow = cluster("slow", taints=(Taint(key="latency-ms", value="250", effect="NoSchedule"),))
    fast = cluster("fast", taints=(Taint(key="latency-ms", value="20", effect="NoSchedule"),))
    below_100 = placement(tolerations=[{"key": "latency-ms", "operator": "Lt", "value": "100"}])
    assert TaintToleration().filter(fast, ctx(below_100)) is None
    assert TaintToleration().filter(slow, ctx(below_100)) is not None


def test_cluster_selector_gt_and_lt_compare_labels_as_integers() -> None:
    sel = placement(
        clusterSelector={"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]}
    )
    assert ClusterAffinity().filter(cluster("big", labels={"gpus": "16"}), ctx(sel)) is None
    for labels in ({"gpus": "4"}, {"gpus": "many"}, {}):
        assert ClusterAffinity().filter(cluster("x", labels=labels), ctx(sel)) is not None


def test_affinity_names_exclusions_and_selector() -> None:
    c = cluster("a", labels={"env": "prod"})
    assert ClusterAffinity().filter(c, ctx(placement(excludeClusters=["a"])))[0] == "excluded"  # type: ignore[index]
    assert ClusterAffinity().filter(c, ctx(placement(clusterNames=["b"]))) is not None
    sel = placement(
        clusterSelector={
            "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]
        }
    )
    assert ClusterAffinity().filter(c, ctx(sel))[0] == "selector mismatch"  # type: ignore[index]
    assert ClusterAffinity().filter(c, ctx(placement(clusterNames=["a"]))) is None


def test_api_enablement_requires_every_kind() -> None:
    d = Demand(1, {}, frozenset({DEPLOYMENT, ("batch/v1", "Job")}))
    rejected = ApiEnablementFilter().filter(cluster("a"), ctx(d=d))
    assert rejected == ("no Job", "does not serve Job in batch/v1")


def test_capacity_duplicated_needs_all_replicas_divided_one() -> None:
    c = cluster("a", free_cpu="3")
    assert Capacity().filter(c, ctx(d=demand(3))) is None
    rejected = Capacity().filter(c, ctx(d=demand(4)))
    assert rejected == ("insufficient cpu", "4 replica(s) need 4 cpu; capacity left: 3")
    divided = placement(replicas={"mode": "Divided"})
    assert Capacity().filter(c, ctx(divided, demand(40))) is None


def test_tenant_quota_filter() -> None:
    c = cluster("a")
    quota = {"a": {"cpu": Decimal(1)}}
    assert TenantQuotaFilter().filter(c, ctx(d=demand(2), quota=quota))[0] == "quota cpu"  # type: ignore[index]
    assert TenantQuotaFilter().filter(c, ctx(d=demand(1), quota=quota)) is None
    assert TenantQuotaFilter().filter(c, ctx(d=demand(5))) is None  # no tenant quota applies


# -- scores --------------------------------------------------------------------------------


def test_scores_are_between_0_and_100() -> None:
    half = cluster(
        "a",
        cpu="8",
        free_cpu="4",
        memory="32",
        free_memory="16",
        layer="edge",
        labels={"ssd": "yes"},
    )
    p = placement(
        layers=["core", "edge"],
        preferred=[
            {"weight": 30, "selector": {"matchLabels": {"ssd": "yes"}}},
            {"weight": 10, "selector": {"matchLabels": {"gpu": "yes"}}},
        ],
    )
    c = ctx(p, demand(1, cpu="0", memory="0"))
    assert LeastAllocated().score(half, c) == 50
    assert BalancedAllocation().score(half, c) == 100
    assert Preference().score(half, c) == 75
    assert LayerOrder().score(half, c) == 50


# -- the pipeline --------------------------------------------------------------------------


def test_next_layer_only_when_the_first_cannot_serve() -> None:
    not_ready = Taint(key=NOT_READY_TAINT, effect="NoSchedule")
    clusters = [cluster("a", layer="fast", taints=(not_ready,)), cluster("b", layer="slow")]
    decision = decide(clusters, placement(layers=["fast", "slow"]))
    assert decision.schedulable
    assert decision.layer == "slow"
    assert decision.clusters == ["b"]
    assert [(a.layer, a.outcome) for a in decision.attempts] == [
        ("fast", "0 cluster(s) fit; minClusters is 1"),
        ("slow", "selected"),
    ]
    served_first = decide(
        [*clusters, cluster("c", layer="fast")], placement(layers=["fast", "slow"])
    )
    assert served_first.clusters == ["c"]


def test_divided_falls_to_the_next_layer_without_room() -> None:
    clusters = [cluster("a", layer="fast", free_cpu="2"), cluster("b", layer="slow")]
    p = placement(layers=["fast", "slow"], replicas={"mode": "Divided"})
    decision = decide(clusters, p, demand(5))
    assert decision.layer == "slow"
    assert decision.attempts[0].outcome == (
        "5 replicas do not fit: room for 2 in the chosen clusters"
    )


def test_min_and_max_clusters() -> None:
    clusters = [cluster(f"c{i}", free_cpu=str(8 - i)) for i in range(5)]
    assert decide(clusters, placement(maxClusters=2)).clusters == ["c0", "c1"]
    too_few = decide(clusters[:2], placement(minClusters=3))
    assert not too_few.schedulable
    assert too_few.summary == "2/2 clusters fit (2 cluster(s) fit; minClusters is 3)"


def test_spread_covers_min_groups_and_stays_within_max_groups() -> None:
    clusters = [
        cluster("a1", region="a", free_cpu="8"),
        cluster("a2", region="a", free_cpu="7"),
        cluster("b1", region="b", free_cpu="2"),
        cluster("c1", region="c", free_cpu="1"),
    ]
    p = placement(maxClusters=2, spread={"byField": "region", "minGroups": 2})
    assert decide(clusters, p).clusters == ["a1", "b1"]
    p = placement(spread={"byField": "region", "maxGroups": 1})
    decision = decide(clusters, p)
    assert decision.clusters == ["a1", "a2"]
    assert decision.verdicts["b1"].detail == "region b is not among the 1 group(s) used"
    impossible = decide(clusters, placement(spread={"byField": "region", "minGroups": 4}))
    assert not impossible.schedulable


def test_replica_division_weights_and_remainders() -> None:
    assert divide(10, {"a": 2, "b": 1}, {"a": None, "b": None}) == {"a": 7, "b": 3}
    assert divide(10, {"a": 1, "b": 1, "c": 1}, dict.fromkeys("abc")) == {"a": 4, "b": 3, "c": 3}
    assert divide(10, {"a": 1, "b": 1}, {"a": 2, "b": None}) == {"a": 2, "b": 8}
    assert divide(10, {"a": 1, "b": 1}, {"a": 2, "b": 3}) is None


def test_divided_by_static_weight_and_available_capacity() -> None:
    clusters = [
        cluster("a", free_cpu="2"),
        cluster("b", free_cpu="6"),
        cluster("c", labels={"tier": "gold"}),
    ]
    static = placement(
        replicas={
            "mode": "Divided",
            "weights": {
                "static": [
                    {"cluster": "a", "weight": 1},
                    {"selector": {"matchLabels": {"tier": "gold"}}, "weight": 3},
                ]
            },
        }
    )
    decision = decide(clusters, static, demand(8))
    assert {p.cluster: p.replicas for p in decision.placed} == {"a": 2, "c": 6}
    assert decision.verdicts["b"].reason == "no static weight"
    dynamic = placement(replicas={"mode": "Divided", "weights": {"dynamic": "AvailableCapacity"}})
    decision = decide(clusters[:2], dynamic, demand(4))
    assert {p.cluster: p.replicas for p in decision.placed} == {"a": 1, "b": 3}


def test_summary_counts_reasons() -> None:
    not_ready = Taint(key=NOT_READY_TAINT, effect="NoSchedule")
    clusters = [cluster(f"t{i}", taints=(not_ready,)) for i in range(7)] + [
        cluster(f"s{i}", free_cpu="0") for i in range(5)
    ]
    decision = decide(clusters)
    assert not decision.schedulable
    assert decision.summary.startswith("0/12 clusters fit: 7 tainted not-ready, 5 insufficient cpu")
    text = explain(decide(clusters, explain=True))
    assert "filtered:TaintToleration" in text
    assert "Unschedulable: 0/12 clusters fit" in text


def test_stale_snapshot_scans_fresh_data_with_hysteresis() -> None:
    snap = build_snapshot([cluster("a")], {"f": ["a"]}, generation=3)
    fresh = [cluster("a", free_cpu="0")]  # the freshest data says it is full now
    scheduler = Scheduler(PROFILE, stale_after_s=30, fresh_for_s=10)
    stale = scheduler.schedule(
        snap, "f", placement(), demand(), age_s=31, fresh_clusters=lambda: fresh, now=100
    )
    assert stale.full_scan
    assert not stale.schedulable
    assert "snapshot is 31.0s old" in (stale.full_scan_reason or "")
    still = scheduler.schedule(
        snap, "f", placement(), demand(), age_s=1, fresh_clusters=lambda: fresh, now=105
    )
    assert still.full_scan  # fresh for 0 s of the 10 s needed
    later = scheduler.schedule(snap, "f", placement(), demand(), age_s=1, now=116)
    assert later.full_scan is False
    assert later.schedulable
    assert scheduler.full_scans == 2


def test_demand_of_manifests() -> None:
    d = demand_of(
        [
            {"apiVersion": "v1", "kind": "Service"},
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "spec": {
                    "replicas": 6,
                    "template": {
                        "spec": {
                            "containers": [
                                {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
                            ]
                        }
                    },
                },
            },
        ]
    )
    assert d.replicas == 6
    assert d.per_replica == {"pods": 1, "cpu": Decimal("0.1"), "memory": Decimal(64 * 2**20)}
    assert d.kinds == {("v1", "Service"), DEPLOYMENT}


# -- plugins as entry points ---------------------------------------------------------------


def test_builtins_are_entry_points() -> None:
    assert {"TaintToleration", "Capacity", "LeastAllocated", "LayerOrder"} <= set(discover())


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("Capacity,Nope", "unknown scheduler plugin 'Nope'"),
        ("Capacity,Capacity", "'Capacity' is listed twice"),
        ("Capacity=3", "'Capacity' is a filter; only scores take =weight"),
        ("LeastAllocated=0", "weight of 'LeastAllocated' is '0'"),
        ("LeastAllocated=x", "it must be an integer from 1 to 100"),
    ],
)
def test_bad_plugin_lists_are_refused(spec: str, says: str) -> None:
    with pytest.raises(PluginError, match=says):
        build_profile(spec)


def test_a_third_party_plugin_runs_in_order() -> None:
    class NoEdge:
        name = "NoEdge"

        def filter(self, c: ClusterInfo, _: SchedulingContext) -> tuple[str, str] | None:
            return ("edge", "no edge clusters here") if c.layer == "edge" else None

    factories = {**discover(), "NoEdge": NoEdge}
    profile = build_profile("NoEdge,Capacity,LeastAllocated=2", factories)
    assert profile.names == ["NoEdge", "Capacity", "LeastAllocated=2"]
    snap = build_snapshot([cluster("a", layer="edge"), cluster("b")], {"f": ["a", "b"]}, 1)
    decision = Scheduler(profile).schedule(snap, "f", placement(), demand(), age_s=0)
    assert decision.clusters == ["b"]
    assert decision.verdicts["a"].filtered_by == "NoEdge"


def test_a_plugin_that_fails_or_raises_leaves_the_cluster_out_and_scheduling_goes_on() -> None:
    class Flaky:
        name = "Flaky"

        def filter(self, c: ClusterInfo, _: SchedulingContext) -> Failed | None:
            if c.name == "a":
                raise RuntimeError("lookup table missing")
            return Failed("no data", "the inventory does not know it") if c.name == "b" else None

    class Wild:
        name = "Wild"

        def score(self, c: ClusterInfo, _: SchedulingContext) -> float:
            return {"c": float("nan"), "d": 1e9}.get(c.name, -5.0)

    factories = {**discover(), "Flaky": Flaky, "Wild": Wild}
    profile = build_profile("Flaky,Capacity,Wild=1", factories)
    snap = build_snapshot([cluster(n) for n in "abcde"], {"f": list("abcde")}, 1)
    decision = Scheduler(profile).schedule(snap, "f", placement(maxClusters=1), demand(), age_s=0)
    assert decision.clusters == ["d"]  # 1e9 counts as 100
    a, b = decision.verdicts["a"], decision.verdicts["b"]
    assert (a.filtered_by, a.reason, a.detail) == (
        "Flaky",
        "plugin error",
        "RuntimeError: lookup table missing",
    )
    assert (b.filtered_by, b.reason) == ("Flaky", "no data")
    assert decision.verdicts["c"].scores == {"Wild": 0.0}  # NaN counts as 0
    assert decision.verdicts["d"].scores == {"Wild": 100.0}
    assert decision.verdicts["e"].scores == {"Wild": 0.0}  # below 0: 0
    assert "1 plugin error" in decision.summary


def test_a_plugin_with_a_memo_key_is_asked_once_per_cluster_and_generation() -> None:
    asked: list[str] = []

    class Inventory:
        name = "Inventory"

        def filter(self, c: ClusterInfo, _: SchedulingContext) -> tuple[str, str] | None:
            asked.append(f"filter {c.name}")
            return ("retired", "the inventory retired it") if c.name == "a" else None

        def score(self, c: ClusterInfo, _: SchedulingContext) -> float | Failed:
            asked.append(f"score {c.name}")
            return Failed("no data", "unknown") if c.name == "c" else 10.0

        def memo_key(self, ctx: SchedulingContext) -> str:
            return "inventory v1"

    factories = {**discover(), "Inventory": Inventory}
    profile = build_profile("Inventory=1,Capacity", factories)
    fleet = [cluster(n) for n in "abcd"]
    snap = build_snapshot(fleet, {"f": list("abcd")}, 1)
    scheduler = Scheduler(profile)
    decisions = [
        scheduler.schedule(snap, "f", placement(excludeClusters=[x]), demand(), age_s=0)
        for x in ("none", "d", "none", "none")
    ]
    assert [d.clusters for d in decisions] == [["b", "d"], ["b"], ["b", "d"], ["b", "d"]]
    assert decisions[3].verdicts["a"].reason == "retired"
    assert decisions[3].verdicts["c"].reason == "no data"
    # Kept from the second time the key is asked about: each cluster judged in the first
    # decision (a one-off so far) and once more (d only in the third: the second excludes
    # it); the failed score of c is asked each time.
    assert sorted(asked) == sorted(
        [f"filter {n}" for n in "abcdabcd"] + [f"score {n}" for n in "bdbd"] + ["score c"] * 4
    )
    # the next generation asks again (twice: its first decision is a one-off so far)
    asked.clear()
    snap = build_snapshot(fleet, {"f": list("abcd")}, 2, previous=snap)
    for _ in range(3):
        scheduler.schedule(snap, "f", placement(), demand(), age_s=0)
    assert asked.count("score c") == 3
    asked = [a for a in asked if a != "score c"]
    assert sorted(asked) == sorted([f"filter {n}" for n in "abcdabcd"] + ["score b", "score d"] * 2)


# -- properties ----------------------------------------------------------------------------


@st.composite
def fleets(draw: st.DrawFn) -> list[ClusterInfo]:
    count = draw(st.integers(1, 25))
    out = []
    for i in range(count):
        tainted = draw(st.booleans()) and draw(st.booleans())
        out.append(
            cluster(
                f"c{i:02d}",
                layer=draw(st.sampled_from(["a", "b"])),
                region=draw(st.sampled_from(["r1", "r2", "r3"])),
                free_cpu=str(draw(st.integers(0, 8))),
                labels={"env": draw(st.sampled_from(["prod", "dev"]))},
                taints=(Taint(key=NOT_READY_TAINT, effect="NoSchedule"),) if tainted else (),
            )
        )
    return out


placements = st.fixed_dictionaries(
    {},
    optional={
        "layers": st.sampled_from([["a"], ["a", "b"], ["b", "a"]]),
        "maxClusters": st.integers(1, 6),
        "spread": st.fixed_dictionaries(
            {"byField": st.just("region")},
            optional={"minGroups": st.integers(1, 3), "maxGroups": st.integers(3, 4)},
        ),
        "clusterSelector": st.just({"matchLabels": {"env": "prod"}}),
        "replicas": st.sampled_from(
            [
                {"mode": "Divided"},
                {"mode": "Duplicated"},
                {"mode": "Divided", "weights": {"dynamic": "AvailableCapacity"}},
            ]
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(fleets(), placements, st.integers(1, 30), st.randoms(use_true_random=False))
def test_properties(
    clusters: list[ClusterInfo], spec: dict[str, Any], replicas: int, rng: random.Random
) -> None:
    p = placement(**spec)
    d = demand(replicas)
    decision = decide(clusters, p, d)
    if decision.schedulable:
        placed = {x.cluster: x.replicas for x in decision.placed}
        if p.replicas.mode == "Divided":
            assert sum(placed.values()) == replicas  # the whole request, never part of it
        else:
            assert set(placed.values()) == {replicas}
        c = ctx(p, d)
        by_name = {x.name: x for x in clusters}
        for name in placed:  # no chosen cluster fails a filter
            assert all(f.filter(by_name[name], c) is None for f in PROFILE.filters)
        if p.spread:
            groups = {by_name[n].region for n in placed}
            assert len(groups) >= (p.spread.min_groups or 1)
            assert p.spread.max_groups is None or len(groups) <= p.spread.max_groups
        if p.max_clusters:
            assert len(placed) <= p.max_clusters
    shuffled = clusters[:]
    rng.shuffle(shuffled)
    again = decide(shuffled, p, d)
    assert again.placed == decision.placed  # the cluster order changes nothing
    assert again.summary == decision.summary


def test_demand_reads_quantities_as_the_member_api_server_does() -> None:
    # " 1" is one CPU to the API server (JSON white space): it must count, not vanish
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {"resources": {"requests": {"cpu": " 1", "memory": "1e60"}}},
                        {"resources": {"requests": {"cpu": ".", "memory": "1Ki"}}},
                    ]
                }
            },
        },
    }
    d = demand_of([deployment])
    assert d.per_replica["cpu"] == Decimal(1)
    assert d.per_replica["memory"] == Decimal(10**60 + 1024)  # exact
    assert Capacity().filter(cluster("a"), ctx(d=d)) is not None  # 1e60 bytes fit nowhere


def _pod_template(cpu: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def test_every_kind_that_creates_pods_counts() -> None:
    manifests = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "spec": {"replicas": 3, "template": _pod_template("1")},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "spec": {"replicas": 2, "template": _pod_template("100m")},
        },
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": _pod_template("50m")}},
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "spec": {"parallelism": 4, "template": _pod_template("250m")},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "spec": {"jobTemplate": {"spec": {"template": _pod_template("500m")}}},
        },
        {"apiVersion": "v1", "kind": "Pod", **_pod_template("2")},
    ]
    d = demand_of(manifests)
    assert (d.replicas, d.per_replica["cpu"]) == (3, Decimal(1))  # the divisible workload
    # 2 x 100m + 4 x 250m + 1 x 500m + 2
    assert d.fixed["cpu"] == Decimal("3.7")
    assert d.fixed["pods"] == 2 + 4 + 1 + 1
    assert d.per_node["cpu"] == Decimal("0.05")
    assert d.beside_replicas(nodes=10)["cpu"] == Decimal("4.2")


def test_daemonsets_and_jobs_count_against_capacity() -> None:
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "spec": {"template": _pod_template("1")},
    }
    d = demand_of([daemon])
    small = ClusterInfo(
        name="small",
        labels={},
        layer="core",
        ready=True,
        available=MappingProxyType({"cpu": Decimal(3), "pods": Decimal(100)}),
        nodes=4,
    )
    rejected = Capacity().filter(small, ctx(d=d))
    assert rejected is not None
    assert rejected[0] == "insufficient cpu"
    assert "DaemonSets, Jobs, Pods and other workloads need 4 cpu" in rejected[1]


def _unrequested(replicas: int, namespace: str = "shop") -> dict[str, Any]:
    container = {"name": "main", "image": "x"}
    template = {"spec": {"containers": [container]}}
    meta = {"name": "web", "namespace": namespace}
    spec = {"replicas": replicas, "template": template}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def test_limit_range_defaults_count_where_they_apply() -> None:
    """Containers that state no requests get their namespace's LimitRange default on
    each member: the scheduler counts that, cluster by cluster, against the tenant's
    quota and the cluster's room."""
    manifests = [_unrequested(6)]
    base = demand_of(manifests, default_namespace="shop")
    assert base.per_replica == {"pods": 1}
    defaults = {
        "a": {"shop": {"cpu": Decimal("0.5")}},
        "b": {"shop": {"cpu": Decimal("0.25")}},
        "c": {"shop": {"cpu": Decimal("0.5")}, "other": {"cpu": Decimal(4)}},
        "d": {"other": {"cpu": Decimal(4)}},  # not the application's namespace
        "e": None,  # its LimitRanges not listed yet
    }
    d = on_clusters(base, manifests, defaults, "shop")
    assert set(d.on) == {"a", "b", "c"}
    assert d.on["a"].per_replica["cpu"] == Decimal("0.5")
    assert d.on["a"] is d.on["c"]  # the same defaults are reckoned once
    assert ctx(d=d).demand_on("d") is d

    # The tenant has 1 cpu on each: a fits 2 replicas of 500m, b 4 of 250m.
    quota = {name: {"cpu": Decimal(1)} for name in "ab"}
    divided = placement(replicas={"mode": "Divided"})
    decision = decide([cluster("a"), cluster("b")], divided, d, quota=quota)
    assert {p.cluster: p.replicas for p in decision.placed} == {"a": 2, "b": 4}
    # Counted without the defaults, the replicas would overflow the quota on a.
    blind = decide([cluster("a"), cluster("b")], divided, base, quota=quota)
    assert {p.cluster: p.replicas for p in blind.placed} == {"a": 3, "b": 3}
    # Duplicated: all 6 must fit one cluster's quota; neither does.
    duplicated = decide([cluster("a"), cluster("b")], placement(), d, quota=quota)
    assert not duplicated.placed


def test_the_divisible_workload_is_the_same_whatever_the_defaults() -> None:
    stated = _unrequested(2)
    stated["metadata"]["name"] = "stated"
    container = stated["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "100m"}}
    manifests = [stated, _unrequested(5)]
    base = demand_of(manifests, default_namespace="shop")
    with_defaults = demand_of(
        manifests, defaults={"shop": {"cpu": Decimal(1)}}, default_namespace="shop"
    )
    assert base.replicas == with_defaults.replicas == 2
    assert with_defaults.fixed["cpu"] == Decimal(5)  # the other workload, every replica
