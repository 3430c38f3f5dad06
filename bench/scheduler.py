"""Scheduler decisions per second and latency, against a naive full scan in the same run.

Fleets of 10 to 10,000 synthetic clusters (3 layers, 5 regions, some taints, varied
capacity); a Duplicated and a Divided placement, both layered, with a label selector and a
spread. Every decision gets a placement of its own (a pool of 4,096 that differ in an
excluded cluster no fleet has, cycled; no decision is served from an earlier one). They
share one template (tolerations, preferences, layers, demand), as the applications of a
platform team do, so the built-ins' answers the scheduler keeps per snapshot generation
and memo key serve them; the "cold" columns time decisions that each have their own
toleration and CPU request, for which nothing kept applies. The naive baseline puts every
cluster of the fleet through every plugin (no index, no early exit) and then selects the
same way. The same decisions are timed again with the application already placed (its
first decision as the current placement, as the controller passes it on every later
pass). One thread: one core.

    python -m bench.scheduler [--quick] [--json]
"""

from __future__ import annotations

import time
from typing import Any

from api.placement import Placement
from api.taints import Toleration
from bench.fleetgen import member_clusters
from bench.report import arguments, emit, percentile
from fleet.snapshot import ClusterInfoCache, FleetSnapshot, build_snapshot
from propagator.scheduler import DEFAULT_PLUGINS, Scheduler, build_profile, demand_of
from propagator.scheduler.pluginregistry import Profile
from propagator.scheduler.select import select
from propagator.scheduler.types import Demand, SchedulingContext

SIZES = (10, 100, 1_000, 10_000)
POOL = 4096
"""Distinct placements per size and mode, cycled through."""
FLEET = "bench"
REPLICAS = 12
WORKLOAD = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": REPLICAS,
        "template": {
            "spec": {
                "containers": [{"resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]
            }
        },
    },
}
BASE = {
    "layers": ["high-performance", "edge"],
    "clusterSelector": {"matchLabels": {"env": "prod"}},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "preferred": [{"weight": 50, "selector": {"matchLabels": {"tier": "gold"}}}],
    "spread": {"byField": "region", "minGroups": 2},
}
PLACEMENTS = {
    "Duplicated": Placement.model_validate({**BASE, "maxClusters": 10}),
    "Divided": Placement.model_validate(
        {**BASE, "replicas": {"mode": "Divided", "weights": {"dynamic": "AvailableCapacity"}}}
    ),
}


def naive_decision(
    snapshot: FleetSnapshot, profile: Profile, placement: Placement, demand: Demand
) -> list[str]:
    """Every cluster of the fleet through every plugin, then the same selection."""
    ctx = SchedulingContext(
        placement, demand, None, {layer: i for i, layer in enumerate(placement.layers)}
    )
    for layer in placement.layers:
        feasible = []
        for name in snapshot.fleet(FLEET):
            c = snapshot.clusters[name]
            rejected = [f.filter(c, ctx) for f in profile.filters]
            in_layer = c.layer == layer
            score = sum(p.score(c, ctx) * w for p, w in profile.scores)
            if in_layer and not any(rejected):
                feasible.append((-score, name, c))
        feasible.sort(key=lambda f: (f[0], f[1]))
        chosen = select([c for _, _, c in feasible], placement).chosen
        if chosen:
            return [c.name for c in chosen]
    return []


def _requesting(cpu: str) -> dict[str, Any]:
    """The benchmark's workload with its own CPU request."""
    container = {"resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
    return {
        **WORKLOAD,
        "spec": {"replicas": REPLICAS, "template": {"spec": {"containers": [container]}}},
    }


def _run(fn: Any, min_decisions: int, min_seconds: float) -> list[float]:
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_decisions or time.perf_counter() - start < min_seconds:
        t = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t) / 1e6)
    return samples


def measure(count: int, name: str, placement: Placement, quick: bool) -> dict[str, Any]:
    members = member_clusters(count)
    snapshot = build_snapshot(
        ClusterInfoCache().infos(members), {FLEET: [m["metadata"]["name"] for m in members]}, 1
    )
    profile = build_profile(DEFAULT_PLUGINS)
    scheduler = Scheduler(profile)
    demand = demand_of([WORKLOAD])
    seconds = 0.4 if quick else 2.0

    pool = [placement.model_copy(update={"exclude_clusters": [f"absent-{i}"]}) for i in range(POOL)]
    turn = iter(range(10**12))

    def decide() -> Any:
        each = pool[next(turn) % POOL]
        return scheduler.schedule(snapshot, FLEET, each, demand, age_s=0.0)

    decision = decide()
    current = {p.cluster: p.replicas for p in decision.placed}

    def decide_placed() -> Any:
        each = pool[next(turn) % POOL]
        return scheduler.schedule(
            snapshot, FLEET, each, demand, age_s=0.0, current=current, application="uid"
        )

    assert {p.cluster: p.replicas for p in decide_placed().placed} == current  # steady
    # Each its own template: a toleration of a taint no cluster has, and a CPU request
    # (250m and a few millionths of a CPU: as large as the shared one).
    cold_pool = [
        (
            placement.model_copy(
                update={
                    "tolerations": [
                        *placement.tolerations,
                        Toleration(key=f"t-{i}", operator="Exists"),
                    ]
                }
            ),
            demand_of([_requesting(f"{250_000 + i}u")]),
        )
        for i in range(POOL)
    ]

    def decide_cold() -> Any:
        each, cold_demand = cold_pool[next(turn) % POOL]
        return scheduler.schedule(snapshot, FLEET, each, cold_demand, age_s=0.0)

    fast = _run(decide, 50, seconds)
    cold = _run(decide_cold, 50, seconds)
    placed = _run(decide_placed, 50, seconds)
    naive = _run(
        lambda: naive_decision(snapshot, profile, pool[next(turn) % POOL], demand), 5, seconds / 2
    )
    decisions_per_s = len(fast) / (sum(fast) / 1000)
    cold_per_s = len(cold) / (sum(cold) / 1000)
    naive_per_s = len(naive) / (sum(naive) / 1000)
    placed_per_s = len(placed) / (sum(placed) / 1000)
    return {
        "clusters": count,
        "placement": name,
        "decisions_per_s": round(decisions_per_s, 1),
        "p50_ms": round(percentile(fast, 50), 4),
        "p99_ms": round(percentile(fast, 99), 4),
        "naive_decisions_per_s": round(naive_per_s, 1),
        "speedup": round(decisions_per_s / naive_per_s, 2),
        "cold_decisions_per_s": round(cold_per_s, 1),
        "cold_p99_ms": round(percentile(cold, 99), 4),
        "cold_speedup": round(cold_per_s / naive_per_s, 2),
        "placed_decisions_per_s": round(placed_per_s, 1),
        "placed_p99_ms": round(percentile(placed, 99), 4),
        "placed_ratio": round(placed_per_s / decisions_per_s, 2),
        "placed": len(decision.placed),
    }


COLUMNS = [
    ("clusters", "clusters"),
    ("placement", "placement"),
    ("decisions_per_s", "decisions/s"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("naive_decisions_per_s", "naive decisions/s"),
    ("speedup", "speed-up"),
    ("cold_decisions_per_s", "cold: decisions/s"),
    ("cold_p99_ms", "cold: p99 ms"),
    ("cold_speedup", "cold: speed-up"),
    ("placed_decisions_per_s", "placed: decisions/s"),
    ("placed_p99_ms", "placed: p99 ms"),
    ("placed_ratio", "placed/fresh"),
    ("placed", "placed"),
]


def main() -> None:
    args = arguments(__doc__)
    rows = [
        measure(count, name, placement, args.quick)
        for count in SIZES
        for name, placement in PLACEMENTS.items()
    ]
    if args.json:  # exactly the documented keys
        rows = [{k: v for k, v in row.items() if k != "placed"} for row in rows]
    emit(rows, COLUMNS, args.json)


if __name__ == "__main__":
    main()
