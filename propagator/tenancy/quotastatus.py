"""The TenantQuota status: the tenant's limit and use on every member where it has
quotas, as the members' own ResourceQuotas report it, and ``Exceeded``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from api.common import API_VERSION
from api.quantity import arithmetic
from api.tenantquota import TenantQuotaStatus
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.conditions import WrittenStatuses, by_message, condition, now_iso
from propagator.observability.metrics import Metrics
from propagator.runtime.ownership import Hold, always
from propagator.runtime.shardplan import tenant_key
from propagator.runtime.statuswrites import status_not_written
from propagator.runtime.workqueue import WorkQueue
from propagator.tenancy.memberquota import Usage, written

log = logging.getLogger(__name__)

STATUS_DEBOUNCE_S = 1.0


def tenant_status(quota: Mapping[str, Any], usage: Mapping[str, Usage], now: str) -> dict[str, Any]:
    """The status of ``quota`` from its use per cluster (validated against the API)."""
    previous = quota.get("status") or {}
    clusters = [
        {
            "name": cluster,
            "hard": {r: written(r, v) for r, v in sorted(u.hard.items())},
            "used": {r: written(r, v) for r, v in sorted(u.used.items()) if r in u.hard},
        }
        for cluster, u in sorted(usage.items())
    ]
    over = [(c, ", ".join(u.exceeded())) for c, u in sorted(usage.items()) if u.exceeded()]
    exceeded = condition(
        "Exceeded",
        bool(over),
        "Exceeded" if over else "WithinLimits",
        "over the limit on " + by_message(over, "sets of resources")
        if over
        else f"within the limits on {len(clusters)} cluster(s)",
        quota["metadata"].get("generation"),
        previous.get("conditions"),
        now,
    )
    status = {
        "observedGeneration": quota["metadata"].get("generation"),
        "clusters": clusters,
        "conditions": [exceeded],
    }
    if busiest := _busiest(usage):
        status["busiest"] = busiest
    TenantQuotaStatus.model_validate(status)
    return status


def _busiest(usage: Mapping[str, Usage]) -> str:
    """``cpu 600m/1 on member-1, pods 4/6 on member-2``: per resource, the cluster where the
    largest share of the limit is used (ties: the first by name)."""
    parts = []
    for resource in sorted({r for u in usage.values() for r in u.hard}):
        limited = sorted(c for c, u in usage.items() if resource in u.hard)
        cluster = max(limited, key=lambda c: _share(usage[c], resource))
        u = usage[cluster]
        used = written(resource, u.used.get(resource, Decimal(0)))
        parts.append(f"{resource} {used}/{written(resource, u.hard[resource])} on {cluster}")
    return ", ".join(parts)[:1024]


def _share(usage: Usage, resource: str) -> Decimal:
    limit = usage.hard[resource]
    with arithmetic():
        return usage.used.get(resource, Decimal(0)) / limit if limit else Decimal(0)


def with_planned(
    usage: Mapping[str, Usage], planned: Mapping[str, Mapping[str, Decimal]]
) -> dict[str, Usage]:
    """Per cluster, the larger of the use the members report and what the tenant's plans
    ask (scheduled and not applied yet), for the limited resources."""
    out = {}
    for cluster, u in usage.items():
        asked = planned.get(cluster, {})
        used = dict(u.used)
        for resource in u.hard:
            used[resource] = max(u.used.get(resource, Decimal(0)), asked.get(resource, Decimal(0)))
        out[cluster] = Usage(u.hard, used)
    return out


class TenantStatusWriter:
    """Writes a tenant's status (and its metrics) a moment after its use changed."""

    def __init__(
        self,
        hub: KubeConnection,
        quotas: Callable[[], list[dict[str, Any]]],
        usage: Mapping[tuple[str, str], Usage],
        metrics: Metrics,
        planned: Callable[[str], Mapping[str, Mapping[str, Decimal]]],
    ) -> None:
        self.planned = planned
        self.hub = hub
        self.quotas = quotas
        self.usage = usage
        self.metrics = metrics
        self.queue = WorkQueue(max_delay_s=30.0)
        self.hold: Hold = always
        """``hold('tenant/<name>')``: whether the tenant is this replica's (shards)."""
        self.statuses = WrittenStatuses()

    def changed(self, tenant: str) -> None:
        self.queue.add_after(tenant, STATUS_DEBOUNCE_S)

    async def run(self) -> None:
        await self.queue.serve(self._write, (ApiError,), status_not_written("TenantQuota", log))

    async def _write(self, tenant: str) -> None:
        with self.hold(tenant_key(tenant)) as mine:
            if mine:
                await self._write_mine(tenant)

    async def _write_mine(self, tenant: str) -> None:
        quota = next((q for q in self.quotas() if q["metadata"]["name"] == tenant), None)
        if quota is None:
            self.statuses.forget(tenant)
            return
        usage = with_planned(
            {c: u for (t, c), u in self.usage.items() if t == tenant}, self.planned(tenant)
        )
        for cluster, u in usage.items():
            for resource, value in u.hard.items():
                labels = (tenant, cluster, resource)
                self.metrics.tenant_quota_hard.labels(*labels).set(float(value))
                used = u.used.get(resource, Decimal(0))
                self.metrics.tenant_quota_used.labels(*labels).set(float(used))
        status = tenant_status(self.statuses.as_held(tenant, quota), usage, now_iso())
        if not self.statuses.changed(tenant, quota, status):
            return
        self.metrics.status_writes.labels("TenantQuota status").inc()
        await self.hub.merge_patch(
            API_VERSION, "TenantQuota", tenant, {"status": status}, subresource="status"
        )
        self.statuses.written(tenant, quota, status)
