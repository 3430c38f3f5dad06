"""The controller's Prometheus metrics (every name starts with ``propagator_``).

The registry's constructor is long: it declares every metric (name, help, labels,
buckets), a table rather than logic.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass
class Timing:
    """One timed operation; set ``failed`` when it failed without raising."""

    failed: bool = False


class Metrics:
    """One registry per controller process (tests make their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.canary_weight = Gauge(
            "propagator_canary_weight",
            "Canary weight (percent of replicas on the canary copy) per application",
            ["namespace", "application"],
            registry=r,
        )
        self.canary_phase = Gauge(
            "propagator_canary_phase",
            "1 for the phase each application's canary is in, 0 for the others",
            ["namespace", "application", "phase"],
            registry=r,
        )
        self.canary_rollbacks = Counter(
            "propagator_canary_rollbacks_total",
            "Canaries rolled back by themselves, by reason (ProgressDeadline, Degraded)",
            ["reason"],
            registry=r,
        )
        self.rollout_wave = Gauge(
            "propagator_rollout_wave",
            "The wave (1-based) each application with waves is rolling out; its number of "
            "waves once complete",
            ["namespace", "application"],
            registry=r,
        )
        self.rollout_updated = Gauge(
            "propagator_rollout_clusters_updated",
            "Clusters each application with waves has taken to the revision it rolls out",
            ["namespace", "application"],
            registry=r,
        )
        self.rollout_phase = Gauge(
            "propagator_rollout_phase",
            "1 for the phase each application's rollout with waves is in, 0 for the others",
            ["namespace", "application", "phase"],
            registry=r,
        )
        self.rollout_halts = Counter(
            "propagator_rollout_halts_total",
            "Rollouts halted at a wave, by reason (ProgressDeadline, Degraded, Failed, "
            "CanaryRolledBack)",
            ["reason"],
            registry=r,
        )
        self.rollout_wave_seconds = Histogram(
            "propagator_rollout_wave_duration_seconds",
            "From a wave's start to its passing (healthy for its minimum time)",
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=r,
        )
        self.application_clusters = Gauge(
            "propagator_application_clusters",
            "Every application's clusters, by the application's health there (its objects "
            "judged by their kinds' interpreter rules); one series per health, whatever "
            "the number of applications (each one's is in its status)",
            ["health"],
            registry=r,
        )
        self.rule_failures = Counter(
            "propagator_interpreter_rule_failures_total",
            "Interpreter rule evaluations that failed on a member's object, by kind "
            "(group/kind) and reason (error: a missing field, a wrong type, over the "
            "iteration budget; slow: over the time limit, the kind paused)",
            ["kind", "reason"],
            registry=r,
        )
        self.evictions = Counter(
            "propagator_evictions_total",
            "Applications placed again without a cluster, by cluster and reason",
            ["cluster", "reason"],
            registry=r,
        )
        self.failover_duration = Histogram(
            "propagator_failover_duration_seconds",
            "From a cluster no longer Ready to the replacement Available (its removal released)",
            buckets=(5, 10, 30, 60, 120, 300, 600, 1200, 3600),
            registry=r,
        )
        self.leader = Gauge(
            "propagator_leader",
            "1 on a replica that acts (the leader, or a shard holding buckets), 0 on a standby",
            registry=r,
        )
        self.shard_buckets = Gauge(
            "propagator_shard_buckets",
            "Buckets of the work this replica holds (of 128; all of them without sharding)",
            registry=r,
        )
        self.shard_designated = Gauge(
            "propagator_shard_designated_buckets",
            "Buckets the shard assignment gives this replica (it holds them once their last "
            "holder has let them go)",
            registry=r,
        )
        self.shard_replicas = Gauge(
            "propagator_shard_replicas",
            "Replicas this one sees renewing their Lease (itself included)",
            registry=r,
        )
        self.shard_applications = Gauge(
            "propagator_shard_applications",
            "ApplicationPropagations this replica handles now",
            registry=r,
        )
        self.shard_members = Gauge(
            "propagator_shard_member_clusters",
            "Member clusters this replica probes and writes the status of",
            registry=r,
        )
        self.shard_handoffs = Counter(
            "propagator_shard_handoffs_total",
            "Buckets this replica took (gained) or let go (released)",
            ["direction"],
            registry=r,
        )
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
        self.snapshot_ready_clusters = Gauge(
            "propagator_fleet_snapshot_ready_clusters",
            "Member clusters Ready in the current snapshot (the scheduler's view)",
            registry=r,
        )

        # -- propagation ---------------------------------------------------------------
        self.propagation_duration = Histogram(
            "propagator_propagation_duration_seconds",
            "Duration of propagation operations (reconcile, schedule, render, apply, prune, "
            "cleanup) by status (success, failure)",
            ["operation", "status"],
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.operations_in_flight = Gauge(
            "propagator_propagation_operations_in_flight",
            "Member cluster operations running now (bounded by PROPAGATOR_MAX_CONCURRENCY)",
            registry=r,
        )
        self.applies = Counter(
            "propagator_applies_total",
            "Applications applied to a member cluster, by result (applied, failed, conflict)",
            ["cluster", "result"],
            registry=r,
        )
        self.member_writes = Counter(
            "propagator_member_writes_total",
            "Objects written to member clusters, by operation (apply, delete)",
            ["cluster", "operation"],
            registry=r,
        )
        self.work_writes = Counter(
            "propagator_work_writes_total",
            "Works written on the hub for Pull members' agents, by operation (apply, delete)",
            ["cluster", "operation"],
            registry=r,
        )
        self.agent_heartbeats = Counter(
            "propagator_agent_heartbeats_total",
            "Heartbeats a Pull member's agent wrote to the hub (its Lease renewed)",
            registry=r,
        )
        self.agent_works = Gauge(
            "propagator_agent_works",
            "Works a Pull member's agent holds, by state (applied, failed, pending, refused)",
            ["state"],
            registry=r,
        )
        self.drift_detected = Counter(
            "propagator_drift_detected_total",
            "Objects found changed or deleted on a member cluster and left so "
            "(driftPolicy: Report)",
            ["cluster"],
            registry=r,
        )
        self.drift_heals = Counter(
            "propagator_drift_heals_total",
            "Objects re-applied on a member cluster because they were changed or deleted there",
            ["cluster"],
            registry=r,
        )
        self.tenant_quota_hard = Gauge(
            "propagator_tenant_quota_hard",
            "A tenant's limit on a member cluster, per resource",
            ["tenant", "cluster", "resource"],
            registry=r,
        )
        self.tenant_quota_used = Gauge(
            "propagator_tenant_quota_used",
            "What a tenant uses on a member cluster (its ResourceQuotas' use), per resource",
            ["tenant", "cluster", "resource"],
            registry=r,
        )
        self.tenant_rejections = Counter(
            "propagator_tenant_quota_rejections_total",
            "Applications refused for their tenant: reason forbidden (an object outside the "
            "tenant's boundary), quota (no room) or requests-missing (a container the quota "
            "cannot count)",
            ["tenant", "reason"],
            registry=r,
        )
        self.retries = Counter(
            "propagator_apply_retries_total",
            "Retries of a retryable failure on a member cluster",
            ["cluster"],
            registry=r,
        )
        self.circuit_state = Gauge(
            "propagator_circuit_state",
            "Circuit breaker of a member cluster: 0 closed, 1 half-open, 2 open",
            ["cluster"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "propagator_workqueue_depth", "Applications waiting to be reconciled", registry=r
        )
        self.member_sync_depth = Gauge(
            "propagator_member_sync_queue_depth",
            "Member syncs (application, cluster) waiting, across every member's queue",
            registry=r,
        )
        self.reconciles = Counter(
            "propagator_reconciles_total",
            "Reconciles of an ApplicationPropagation, by result (success, error)",
            ["result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "propagator_reconcile_errors_total",
            "Reconciles that ended in an error, by reason",
            ["reason"],
            registry=r,
        )
        self.scheduling_duration = Histogram(
            "propagator_scheduling_duration_seconds",
            "Duration of one scheduling decision",
            buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5),
            registry=r,
        )
        self.scheduling_results = Counter(
            "propagator_scheduling_results_total",
            "Scheduling decisions by result (scheduled, unschedulable, fleet-not-found)",
            ["result"],
            registry=r,
        )
        self.scheduling_stage_duration = Histogram(
            "propagator_scheduling_stage_duration_seconds",
            "Time one scheduling decision spent per stage (filter, score, select, assign)",
            ["stage"],
            buckets=(0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05),
            registry=r,
        )
        self.scheduler_full_scans = Counter(
            "propagator_scheduler_full_scans_total",
            "Scheduling decisions that scanned fresh cluster data instead of a stale snapshot",
            registry=r,
        )

    @contextlib.contextmanager
    def timed(self, operation: str) -> Iterator[Timing]:
        """Observe the block's duration in the propagation histogram, as a failure if it
        raises or sets ``failed``."""
        timing = Timing()
        started = time.perf_counter()
        try:
            yield timing
        except BaseException:
            timing.failed = True
            raise
        finally:
            status = "failure" if timing.failed else "success"
            self.propagation_duration.labels(operation, status).observe(
                time.perf_counter() - started
            )

    def forget_cluster(self, cluster: str) -> None:
        """Drop a removed member's series."""
        for gauge in (self.cluster_ready, self.circuit_state):
            with contextlib.suppress(KeyError):
                gauge.remove(cluster)
