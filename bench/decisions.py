"""Run N scheduler decisions of ``bench.scheduler``'s fleets and placements, untimed: for an
instruction counter, whose counts (unlike seconds) repeat exactly on a shared machine.
Instructions per decision = (count with N decisions - count with 0) / N, e.g.

    for n in 0 1000; do PYTHONHASHSEED=0 valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null python -m bench.decisions Duplicated 100 $n 2>&1 |
        grep Collected; done

(a fixed hash seed: dicts and sets are laid out alike in every run, so counts repeat).

    python -m bench.decisions PLACEMENT CLUSTERS DECISIONS
"""

from __future__ import annotations

import sys

from bench.fleetgen import member_clusters
from bench.scheduler import FLEET, PLACEMENTS, POOL, WORKLOAD
from fleet.snapshot import ClusterInfoCache, build_snapshot
from propagator.scheduler import DEFAULT_PLUGINS, Scheduler, build_profile, demand_of

WARM_UP = 50


def main(argv: list[str]) -> None:
    if (
        len(argv) != 3
        or argv[0] not in PLACEMENTS
        or not argv[1].isdigit()
        or not argv[2].isdigit()
    ):
        raise SystemExit(
            f"usage: python -m bench.decisions {{{'|'.join(PLACEMENTS)}}} CLUSTERS DECISIONS"
        )
    placement, clusters, decisions = PLACEMENTS[argv[0]], int(argv[1]), int(argv[2])
    members = member_clusters(clusters)
    snapshot = build_snapshot(
        ClusterInfoCache().infos(members), {FLEET: [m["metadata"]["name"] for m in members]}, 1
    )
    scheduler = Scheduler(build_profile(DEFAULT_PLUGINS))
    demand = demand_of([WORKLOAD])
    pool = [placement.model_copy(update={"exclude_clusters": [f"absent-{i}"]}) for i in range(POOL)]
    for i in range(WARM_UP + decisions):
        scheduler.schedule(snapshot, FLEET, pool[i % POOL], demand, age_s=0.0)


if __name__ == "__main__":
    main(sys.argv[1:])
