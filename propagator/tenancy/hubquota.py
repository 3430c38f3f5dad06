"""The tenant's quota on the hub, for one application's plan: the room it is scheduled in,
and the last check of what was rendered before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.snapshot import FleetSnapshot
from propagator.conditions import by_message
from propagator.interpreter.registry import Interpreters
from propagator.observability.metrics import Metrics
from propagator.tenancy.accounting import Use, UseCache, over_room, planned_use
from propagator.tenancy.limits import LimitDefaults, requests_missing
from propagator.tenancy.quotamath import hard_for, remaining, tenant_of
from propagator.work.table import WorkTable

Rendered = Mapping[str, list[dict[str, Any]]]
"""cluster -> the objects rendered for it."""


@dataclass(frozen=True)
class QuotaRefusal:
    """Why the rendered application does not fit its tenant's quota (nothing is written)."""

    reason: str
    """``QuotaExceeded`` (no room) or ``RequestsMissing`` (a container the quota cannot
    count)."""
    message: str
    over: Mapping[str, str] = field(default_factory=dict)
    """QuotaExceeded: per cluster, the first resource short there."""


class QuotaAdmission:
    """Counts a tenant's applications together: what their last plans ask per cluster, and
    whether a new rendering fits what is left."""

    def __init__(
        self,
        quotas: Callable[[], list[dict[str, Any]]],
        namespace_labels: Callable[[str], Mapping[str, str]],
        table: WorkTable,
        limits: LimitDefaults,
        metrics: Metrics,
        interpreters: Interpreters,
    ) -> None:
        self.quotas = quotas
        self.namespace_labels = namespace_labels
        self.table = table
        self.limits = limits
        self.metrics = metrics
        self.interpreters = interpreters
        self._use_cache = UseCache(limits, interpreters)

    def tenant_of(self, namespace: str) -> Mapping[str, Any] | None:
        """The TenantQuota that owns the hub namespace, if any."""
        return tenant_of(self.quotas(), namespace, self.namespace_labels(namespace))

    def use(
        self, tenant: Mapping[str, Any] | None, app: str, snapshot: FleetSnapshot
    ) -> tuple[Use, Use]:
        """What ``app``'s last plan and those of all its tenant's applications ask per
        cluster (nothing without a tenant)."""
        if tenant is None:
            return {}, {}
        own = planned_use(self.table, [app], snapshot, self._use_cache)
        return own, self.tenant_plans(str(tenant["metadata"]["name"]), snapshot)

    def tenant_plans(self, tenant: str, snapshot: FleetSnapshot) -> Use:
        """What the last plans of a tenant's applications ask per cluster, together."""
        quotas = self.quotas()
        namespaces = {app.split("/", 1)[0] for app in self.table.apps()}
        same = {
            ns
            for ns in namespaces
            if (tenant_of(quotas, ns, self.namespace_labels(ns)) or {})
            .get("metadata", {})
            .get("name")
            == tenant
        }
        apps = [app for app in self.table.apps() if app.split("/", 1)[0] in same]
        return planned_use(self.table, apps, snapshot, self._use_cache)

    def check(
        self,
        tenant: Mapping[str, Any] | None,
        own: Use,
        planned: Use,
        rendered: Rendered,
        snapshot: FleetSnapshot,
        namespace: str,
    ) -> QuotaRefusal | None:
        """Whether what was rendered (a templated ``replicas`` or ``cpu`` known at last,
        LimitRange defaults applied) fits the tenant's remaining quota on each cluster,
        and states every request its quota needs. None when it does."""
        if tenant is None:
            return None
        name = str(tenant["metadata"]["name"])
        labels = {c: snapshot.clusters[c].labels for c in rendered if c in snapshot.clusters}
        missing = [
            (cluster, problem)
            for cluster, objects in sorted(rendered.items())
            if cluster in labels and (defaults := self.limits.of(cluster)) is not None
            for problem in requests_missing(
                objects,
                {k.removeprefix("requests.") for k in hard_for(tenant, cluster, labels[cluster])},
                defaults,
                namespace,
                self.interpreters,
            )
        ]
        if missing:
            self.metrics.tenant_rejections.labels(name, "requests-missing").inc()
            return QuotaRefusal(
                "RequestsMissing",
                f"tenant {name}'s quota limits what these containers leave unstated, and no "
                "LimitRange of their namespace gives a default: "
                f"{by_message(missing, 'problems')}; nothing was applied",
            )
        room = remaining(tenant, labels, own, planned)
        if over := over_room(rendered, room, snapshot, self.limits, namespace, self.interpreters):
            self.metrics.tenant_rejections.labels(name, "quota").inc()
            return QuotaRefusal(
                "QuotaExceeded",
                "as rendered, it asks more than the tenant's quota leaves on "
                f"{by_message(over, 'shortfalls')}; nothing was applied",
                dict(over),
            )
        return None
