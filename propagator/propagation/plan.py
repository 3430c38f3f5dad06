"""What one application reconcile decided, kept until the next; what it tells the worker
(:class:`Result`, or :class:`Requeue`); how a step stops it (:class:`Stop`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.application import SYNC_ANNOTATION, ApplicationPropagation
from fleet.snapshot import FleetSnapshot
from propagator.canary.plan import CanaryPlan
from propagator.charts.releases import ChartResolution
from propagator.failover.state import FailoverState
from propagator.rollout.driver import RolloutPlan
from propagator.tenancy.policy import TenantPolicy
from propagator.work.targets import Target

Condition = tuple[str, bool | None, str, str]


@dataclass(frozen=True)
class Given:
    """What one reconcile works from: the application as cached and as validated, the
    objects it propagates, the fleet as the snapshot shows it, its last plan and status,
    where it runs, and its tenant."""

    obj: dict[str, Any]
    key: str
    app: ApplicationPropagation
    objects: list[dict[str, Any]]
    snapshot: FleetSnapshot
    previous: Mapping[str, Any]
    """The status the cached object holds."""
    last: Plan | None
    running: Sequence[Target]
    tenant: Mapping[str, Any] | None
    """Its TenantQuota (None: no tenant)."""
    tenancy: TenantPolicy

    @property
    def namespace(self) -> str:
        return str(self.app.metadata.get("namespace", "default"))


@dataclass(frozen=True)
class Result:
    """What the worker does next with a key that reconciled (as controller-runtime's
    ``Result``): refresh its status after ``refresh_after_s``, plan it again after
    ``replan_after_s``. A failure the status reports and that no retry would mend (an
    invalid spec, a refusal) is a Result too: the application waits for a change."""

    refresh_after_s: float | None = None
    replan_after_s: float | None = None
    """Plan again after this long (a toleration or a grace period runs out)."""


class Requeue(Exception):
    """A reconcile that failed for a reason a retry may mend (the hub did not answer), the
    status written already: the key comes back after the work queue's backoff."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Stop(Exception):
    """A step of the reconcile stopped the plan: the conditions it adds to the status,
    what went wrong (None: nothing to log, e.g. unschedulable), and whether to retry."""

    def __init__(
        self,
        conditions: list[Condition],
        cause: BaseException | None = None,
        *,
        retry: bool = False,
    ) -> None:
        super().__init__(str(cause) if cause is not None else "stopped")
        self.conditions = conditions
        self.cause = cause
        self.retry = retry


@dataclass
class Plan:
    """One reconcile's decision, kept for status refreshes until the next one."""

    generation: int | None
    conditions: list[Condition] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    rendered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    revisions: dict[str, str] = field(default_factory=dict)
    desired_kinds: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)
    """Clusters the application is being removed from."""
    unanswered: dict[str, str] = field(default_factory=dict)
    """Those of ``removed`` that do not answer, with why: their removal waits for them and
    does not hold ``Applied`` back."""
    failover: FailoverState = field(default_factory=FailoverState)
    """Rebalance acted on, clusters kept off, replicas moving gracefully."""
    unhealthy_after_s: float | None = None
    """Application failover's toleration (None: off, no clock kept)."""
    canary: CanaryPlan | None = None
    """The canary's state and clusters (None: the application has no canary)."""
    rollout: RolloutPlan | None = None
    """The revision each cluster is to run, and the rollout's state (None: not planned
    that far)."""
    charts: list[ChartResolution] = field(default_factory=list)
    """How the application's charts resolved (empty: it has none, or not resolved yet)."""
    heal: str = ""
    """The ``kubectl propagator sync`` request the member syncs act on ("": none)."""
    capacity_bound: bool = True
    """Whether a change of the clusters' capacity alone is to plan it again: not when the
    clusters it holds carry it all, nor when it is configuration alone (nothing creates
    pods) going to every cluster that passes the filters — a cluster it could not go to
    for want of a pod's room takes it at the next plan for another reason (the resync at
    the latest); where it runs, its own room is counted back, so none ever removes it."""

    def leaving(self) -> list[str]:
        """Clusters the application left that keep what runs there until it is replaced."""
        placed = {t.cluster for t in self.targets}
        return sorted(c for c in self.failover.moves if c not in placed)


def heal_asked(obj: Mapping[str, Any]) -> str:
    """The ``kubectl propagator sync`` request on ``obj`` not yet acted on everywhere
    (its ``propagator.io/sync`` annotation, unless ``status.synced`` says it was), or ""."""
    asked = ((obj.get("metadata") or {}).get("annotations") or {}).get(SYNC_ANNOTATION)
    if not isinstance(asked, str) or asked == (obj.get("status") or {}).get("synced"):
        return ""
    return asked
