"""The failover part of an application reconcile, with its I/O: the decision and the
health it needs, the Events and metrics it causes, the graceful moves to render and their
release, and when the application must be planned again.

The decisions themselves are pure (:mod:`propagator.failover.decisions`,
:mod:`propagator.failover.state`, :mod:`propagator.failover.moves`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from api.application import ApplicationPropagation
from api.common import duration_seconds
from api.failover import REBALANCE_ANNOTATION
from fleet.snapshot import FleetSnapshot
from kube.connection import KubeConnection
from propagator.failover.decisions import next_change, unhealthy_due
from propagator.failover.moves import (
    Move,
    grace_left,
    graceful_moves,
    release,
)
from propagator.failover.state import (
    FailoverDecision,
    FailoverState,
    decide,
    unhealthy_clocks,
)
from propagator.observability.events import record_event
from propagator.observability.metrics import Metrics
from propagator.work.members import MemberView
from propagator.work.table import WorkTable
from propagator.work.targets import Planned, Target

DEADLINE_MARGIN_S = 0.5
"""Planned again this long after a toleration, failback or grace period runs out."""
OVERDUE_RECHECK_S = 10.0
"""An application unhealthy beyond its toleration and not moved (unhealthy everywhere) is
looked at again this often."""


class FailoverPlanned(Planned, Protocol):
    """What failover reads of the last plan."""

    @property
    def failover(self) -> FailoverState: ...
    @property
    def unhealthy_after_s(self) -> float | None: ...


@dataclass(frozen=True)
class FailoverPass:
    """One reconcile's failover: what the last plan carried, where the application ran,
    and this plan's decision."""

    carried: FailoverState
    before: dict[str, int | None]
    """Replicas per cluster where it ran (None: Duplicated)."""
    decision: FailoverDecision
    grace_s: float
    now: float


class FailoverDriver:
    """The failover of the applications one reconciler plans."""

    def __init__(
        self, hub: KubeConnection, table: WorkTable, view: MemberView, metrics: Metrics
    ) -> None:
        self.hub = hub
        self.table = table
        self.view = view
        self.metrics = metrics

    def begin(
        self,
        app: ApplicationPropagation,
        last: FailoverPlanned | None,
        previous: Mapping[str, Any],
        running: Sequence[Target],
        snapshot: FleetSnapshot,
        now: float,
    ) -> FailoverPass:
        """The failover decision for ``app`` running on ``running`` given its last plan
        (None after a restart: the status ``previous`` says what it carried)."""
        carried = last.failover if last is not None else FailoverState.from_status(previous)
        before = {t.cluster: t.replicas for t in running}
        failover = app.spec.failover
        namespace = app.metadata.get("namespace", "default")
        healths = {}
        if failover.application is not None and last is not None:
            healths = {
                t.cluster: self.view.health(t.cluster, last.rendered[t.cluster], namespace)
                for t in last.targets
            }
        decision = decide(
            failover,
            carried,
            list(before),
            snapshot,
            healths,
            unhealthy_clocks(previous),
            (app.metadata.get("annotations") or {}).get(REBALANCE_ANNOTATION),
            now,
        )
        grace_s = duration_seconds(failover.grace_period)
        return FailoverPass(carried, before, decision, grace_s, now)

    @staticmethod
    def moves(step: FailoverPass, targets: Sequence[Target]) -> dict[str, Move]:
        """The replicas that move gracefully off the clusters they ran on (evicted,
        rebalanced, failed back): kept there until their replacement is Available."""
        d = step.decision
        return graceful_moves(
            step.before,
            {t.cluster: t.replicas for t in targets},
            step.carried.moves,
            d.cause,
            d.evicted,
            d.immediate,
            step.grace_s,
            step.now,
        )

    @staticmethod
    def settle(
        step: FailoverPass, moves: Mapping[str, Move], replaced: bool
    ) -> tuple[dict[str, Move], dict[str, Move]]:
        """The moves kept and those released: all of them once the application is
        ``replaced`` where it goes, each once its grace period is over."""
        return release(moves, replaced, step.grace_s, step.now)

    def observe_released(self, step: FailoverPass, released: Mapping[str, Move]) -> None:
        """The time from losing a cluster to its replacement being Available."""
        for move in released.values():
            if move.lost is not None:
                self.metrics.failover_duration.observe(max(0.0, step.now - move.lost))

    def replaced(
        self,
        key: str,
        targets: Sequence[Target],
        rendered: Mapping[str, Sequence[Mapping[str, Any]]],
        revisions: Mapping[str, str],
        namespace: str,
        moving: Collection[str],
    ) -> bool:
        """Whether the application is applied, at the revision planned, and Healthy on
        every target that is not ``moving``: the replicas that move may go."""
        for t in targets:
            if t.cluster in moving:
                continue
            state = self.table.state(key, t.cluster)
            if state is None or not state.applied or state.revision != revisions[t.cluster]:
                return False
            if self.view.health(t.cluster, rendered[t.cluster], namespace) != "Healthy":
                return False
        return True

    async def announce(self, obj: dict[str, Any], step: FailoverPass) -> None:
        """Events and metrics for the evictions, failbacks and rebalance of ``step``."""
        decision = step.decision
        for eviction in decision.evicted.values():
            if eviction.cluster in step.carried.moves or eviction.cluster in step.carried.evicted:
                continue  # announced when it was evicted (an earlier plan did not stick)
            metric = "unreachable" if eviction.reason == "ClusterUnreachable" else "unhealthy"
            self.metrics.evictions.labels(eviction.cluster, metric).inc()
            how = (
                "removed at once"
                if eviction.cluster in decision.immediate
                else "removed once the replacement is Available"
                + (" and it answers" if eviction.reason == "ClusterUnreachable" else "")
            )
            await record_event(
                self.hub,
                obj,
                "Warning",
                "Evicted",
                f"placed again without {eviction.cluster}: {eviction.message}; what runs there "
                f"is {how}",
            )
        for cluster in decision.returning:
            await record_event(
                self.hub,
                obj,
                "Normal",
                "FailedBack",
                f"{cluster} has been Ready for failbackAfter: placed again from scratch "
                "(failback WhenReady)",
            )
        if decision.rebalance is not None:
            await record_event(
                self.hub,
                obj,
                "Normal",
                "Rebalanced",
                f"placed again from scratch ({REBALANCE_ANNOTATION}={decision.rebalance})",
            )

    @staticmethod
    def next_plan(
        app: ApplicationPropagation,
        step: FailoverPass,
        plan: FailoverPlanned,
        snapshot: FleetSnapshot,
    ) -> float | None:
        """Seconds until ``plan`` must be made again although nothing else changes: a
        toleration, a failback period or a grace period runs out (a replacement turning
        Available asks from the status refresh, :meth:`refresh_due`)."""
        failover = app.spec.failover
        left = grace_left(plan.failover.moves, step.grace_s, step.now)
        waits = [left] if left is not None else []
        due = next_change(
            [t.cluster for t in plan.targets],
            [n for n, e in plan.failover.evicted.items() if e.reason == "ClusterUnreachable"],
            snapshot,
            duration_seconds(failover.cluster_unreachable_after),
            duration_seconds(failover.failback_after) if failover.failback == "WhenReady" else None,
            step.now,
        )
        if due is not None:
            waits.append(due)
        return min(waits) + DEADLINE_MARGIN_S if waits else None

    def refresh_due(
        self, key: str, plan: FailoverPlanned, status: Mapping[str, Any], namespace: str, now: float
    ) -> float | None:
        """After a status refresh of ``plan`` (``status`` as just built): plan again at once
        when its moving replicas are replaced, or when an application failover toleration
        runs out; None when nothing is due."""
        moving = plan.failover.moves
        if (
            moving
            and plan.targets
            and self.replaced(key, plan.targets, plan.rendered, plan.revisions, namespace, moving)
        ):
            return 0.0
        if plan.unhealthy_after_s is None:
            return None
        due = unhealthy_due(unhealthy_clocks(status), plan.unhealthy_after_s, now)
        if due is None:
            return None
        return due + DEADLINE_MARGIN_S if due > 0 else OVERDUE_RECHECK_S
