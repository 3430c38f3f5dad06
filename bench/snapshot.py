"""Fleet snapshot rebuild: time and memory for 10 to 10,000 synthetic clusters.

A full rebuild reads every MemberCluster (``cluster_info``) and indexes them
(``build_snapshot``); an incremental one (what the fleet manager does after one member
changed) re-reads only that member through ``ClusterInfoCache`` and moves it in the
previous generation's indexes. The
scheduler's columns are built on a snapshot's first decision: from scratch, and — what a
decision after one member's change pays — from the previous generation's columns. The
baseline, measured in the same run, is ``copy.deepcopy`` of the same hub objects: the cost
of merely copying what the hub returned.

    python -m bench.snapshot [--quick] [--json]
"""

from __future__ import annotations

import copy
import gc
import time
import tracemalloc
from typing import Any

from bench.fleetgen import member_clusters
from bench.report import arguments, emit, percentile
from fleet.columns import Columns
from fleet.snapshot import ClusterInfoCache, build_snapshot, cluster_info

SIZES = (10, 100, 1_000, 10_000)


def _timed(fn: Any, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def measure(count: int, repeats: int) -> dict[str, Any]:
    members = member_clusters(count)
    fleets = {"all": [m["metadata"]["name"] for m in members]}

    def rebuild() -> Any:
        return build_snapshot([cluster_info(m) for m in members], fleets, generation=1)

    cache = ClusterInfoCache()
    latest = build_snapshot(cache.infos(members), fleets, generation=1)
    changed = iter(range(10**9))

    def incremental() -> Any:
        nonlocal latest
        members[0]["metadata"]["resourceVersion"] = f"changed-{next(changed)}"
        latest = build_snapshot(
            cache.infos(members), fleets, latest.generation + 1, previous=latest
        )
        return latest

    rebuild()  # warm up
    samples = _timed(rebuild, repeats)
    incremental_samples = _timed(incremental, repeats)
    base = build_snapshot(cache.infos(members), fleets, generation=3)
    columns_samples = _timed(lambda: Columns(base.clusters), repeats)

    def columns_after_one_change() -> Any:
        previous = build_snapshot(cache.infos(members), fleets, generation=4)
        previous.columns  # noqa: B018  # built by an earlier decision
        members[0]["metadata"]["resourceVersion"] = f"changed-{next(changed)}"
        start = time.perf_counter()
        build_snapshot(cache.infos(members), fleets, 5, previous=previous).columns  # noqa: B018
        return time.perf_counter() - start

    columns_update = [columns_after_one_change() * 1000 for _ in range(repeats)]
    baseline = _timed(lambda: copy.deepcopy(members), max(3, repeats // 2))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    snapshot = rebuild()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(snapshot.clusters) == count
    p50 = percentile(samples, 50)
    return {
        "clusters": count,
        "rebuild_p50_ms": p50,
        "rebuild_p99_ms": percentile(samples, 99),
        "rebuilds_per_s": 1000 / p50,
        "incremental_p50_ms": percentile(incremental_samples, 50),
        "incremental_p99_ms": percentile(incremental_samples, 99),
        "columns_p50_ms": percentile(columns_samples, 50),
        "columns_1_changed_p50_ms": percentile(columns_update, 50),
        "memory_mib": retained / 2**20,
        "bytes_per_cluster": retained // count,
        "deepcopy_p50_ms": percentile(baseline, 50),
        "ratio_to_deepcopy": p50 / percentile(baseline, 50),
    }


COLUMNS = [
    ("clusters", "clusters"),
    ("rebuild_p50_ms", "rebuild p50 ms"),
    ("rebuild_p99_ms", "p99 ms"),
    ("rebuilds_per_s", "rebuilds/s"),
    ("incremental_p50_ms", "1-changed p50 ms"),
    ("incremental_p99_ms", "1-changed p99 ms"),
    ("columns_p50_ms", "columns p50 ms"),
    ("columns_1_changed_p50_ms", "1-changed + columns p50 ms"),
    ("memory_mib", "snapshot MiB"),
    ("bytes_per_cluster", "B/cluster"),
    ("deepcopy_p50_ms", "deepcopy p50 ms"),
    ("ratio_to_deepcopy", "rebuild/deepcopy"),
]


def main() -> None:
    args = arguments(__doc__)
    rows = []
    for count in SIZES:
        repeats = max(3, (20 if args.quick else 100) * 100 // max(count, 100))
        rows.append(measure(count, repeats))
    emit(rows, COLUMNS, args.json)


if __name__ == "__main__":
    main()
