"""The controller's Prometheus metrics (every name starts with ``propagator_``)."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    """One registry per controller process (tests make their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.cluster_ready = Gauge(
            "propagator_cluster_ready",
            "1 when the member cluster is Ready, else 0",
            ["cluster"],
            registry=r,
        )
        self.member_probes = Counter(
            "propagator_member_probes_total",
            "Member /readyz probes by result (ok, failed)",
            ["cluster", "result"],
            registry=r,
        )
        self.status_writes = Counter(
            "propagator_status_writes_total",
            "Writes of status or health taints to the hub, by kind",
            ["kind"],
            registry=r,
        )
        self.snapshot_generation = Gauge(
            "propagator_fleet_snapshot_generation",
            "Generation of the current fleet snapshot",
            registry=r,
        )
        self.snapshot_clusters = Gauge(
            "propagator_fleet_snapshot_clusters",
            "Member clusters in the current snapshot",
            registry=r,
        )

    def forget_cluster(self, cluster: str) -> None:
        """Drop a removed member's series."""
        with contextlib.suppress(KeyError):
            self.cluster_ready.remove(cluster)
