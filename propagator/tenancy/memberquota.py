"""A tenant's limit enforced by each member itself: in every namespace the tenant's
applications write there, a ResourceQuota ``propagator-tenant-<tenant>`` the controller
owns, whose ``hard`` values sum to at most the tenant's limit on that member
(:mod:`propagator.tenancy.shares`). The member's own quota admission then refuses what
would overflow, whatever writes it, however many at once.

Rebalanced (per member and tenant, one at a time) before a sync writes into a namespace
and whenever a quota's use changes or a pod comes or goes there. Lowered values are
written, and taken up by the member's quota controller as the ``status.hard`` its
admission checks, before raised ones are written, so the values in force never sum above
the limit; a quota is in force before the sync writes into its namespace; a raise is
capped by what the other namespaces hold as the member answers at that moment (a quota
lowered below its use evicts nothing, and the cache the split came from may lag). The
use the members report is kept for the TenantQuota status and the metrics.

A member's count can miss pods (:mod:`propagator.tenancy.uncounted`): what the pods its
pod watch holds use beyond a quota's count is held back from the limit before it is
split.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import anyio

from api.quantity import Format, arithmetic, format_quantity, parse_quantities
from kube.connection import apply_creating_namespace
from kube.errors import ApiError
from propagator.runtime.memberregistry import Caches, Member
from propagator.runtime.ownership import Hold, always
from propagator.runtime.shardplan import tenant_key
from propagator.runtime.workqueue import WorkQueue
from propagator.tenancy.namespacelabels import platform_object_name
from propagator.tenancy.quotamath import hard_for, tenant_of
from propagator.tenancy.shares import capped_raise, split_all
from propagator.tenancy.uncounted import held_back, uncounted
from propagator.work.objects import (
    APP_LABEL,
    MEMBER_LABEL,
    TENANT_ANNOTATION,
    app_label_value,
    member_label_value,
)
from propagator.work.table import ClusterWork, WorkTable

log = logging.getLogger(__name__)

RESOURCE_QUOTA = ("v1", "ResourceQuota")
REBALANCE_DEBOUNCE_S = 0.2
TAKEN_UP_POLL_S = 0.02
"""How often the cache is looked at while the member's quota controller takes up a write."""


def quota_name(tenant: str) -> str:
    """The ResourceQuota name for a tenant (names over 63 characters are shortened)."""
    return platform_object_name(tenant)


def namespaces_written(work: ClusterWork) -> set[str]:
    """Member namespaces a work writes namespaced objects into."""
    out = set()
    for obj in work.objects:
        if obj.get("kind") == "Namespace":
            continue
        out.add(str((obj.get("metadata") or {}).get("namespace") or work.namespace))
    return out


@dataclass
class Usage:
    """A tenant's limit and use on one member (from its ResourceQuotas' status)."""

    hard: dict[str, Decimal] = field(default_factory=dict)
    used: dict[str, Decimal] = field(default_factory=dict)

    def exceeded(self) -> list[str]:
        return sorted(r for r, v in self.used.items() if r in self.hard and v > self.hard[r])


class QuotaEnforcer:
    """Keeps the tenant ResourceQuotas on the members (one rebalance per member and
    tenant at a time)."""

    def __init__(
        self,
        quotas: Callable[[], list[dict[str, Any]]],
        namespace_labels: Callable[[str], Mapping[str, str]],
        cluster_labels: Callable[[str], Mapping[str, str] | None],
        table: WorkTable,
        caches: Caches,
        timeout_s: float,
        on_usage: Callable[[str], None],
    ) -> None:
        self.quotas = quotas
        self.namespace_labels = namespace_labels
        self.cluster_labels = cluster_labels
        self.table = table
        self.caches = caches
        self.timeout_s = timeout_s
        self.on_usage = on_usage
        self.usage: dict[tuple[str, str], Usage] = {}
        """(tenant, cluster) -> Usage, as last seen."""
        self.uncounted: dict[tuple[str, str], dict[str, dict[str, Decimal]]] = {}
        """(tenant, cluster) -> per namespace, what its pods use beyond its quota's count,
        by resource, as last seen (none: absent)."""
        self._tenants: dict[tuple[str, str], str] = {}
        """(cluster, namespace) -> the tenant whose quota is there (from the members'
        caches)."""
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self.queue = WorkQueue(max_delay_s=30.0)
        self.hold: Hold = always
        """``hold('tenant/<name>')``: whether the tenant is this replica's (shards)."""
        """``cluster/tenant`` keys to rebalance (a quota's use changed there)."""

    def changed(self, cluster: str, tenant: str) -> None:
        """A tenant ResourceQuota on ``cluster`` changed: rebalance soon (debounced)."""
        self.queue.add_after(f"{cluster}/{tenant}", REBALANCE_DEBOUNCE_S)

    def observed(
        self, cluster: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> None:
        """A ResourceQuota on ``cluster`` changed (a member cache's event): if it is a
        tenant's, rebalance there soon."""
        meta = (new or old or {}).get("metadata") or {}
        tenant = (meta.get("annotations") or {}).get(TENANT_ANNOTATION)
        if not tenant:
            return
        where = (cluster, str(meta.get("namespace")))
        if new is None:
            self._tenants.pop(where, None)
        else:
            self._tenants[where] = str(tenant)
        self.changed(cluster, str(tenant))

    def pods_changed(self, cluster: str, namespace: str) -> None:
        """A pod in ``namespace`` on ``cluster`` came, went or is being deleted: if a
        tenant's quota is there, rebalance soon (the quota's count may miss it)."""
        if (tenant := self._tenants.get((cluster, namespace))) is not None:
            self.changed(cluster, tenant)

    async def run(self, members: Callable[[str], Member | None]) -> None:
        """Rebalance what :meth:`changed` queued, until the queue shuts down."""

        async def rebalance(key: str) -> None:
            cluster, tenant = key.split("/", 1)
            member = members(cluster)
            quota = next((q for q in self.quotas() if q["metadata"]["name"] == tenant), None)
            with self.hold(tenant_key(tenant)) as mine:
                if mine and member is not None and quota is not None:
                    await self.rebalance(member, quota)

        def failed(key: str, exc: Exception) -> bool:
            cluster, tenant = key.split("/", 1)
            log.warning("%s: quota of tenant %s not rebalanced: %s", cluster, tenant, exc)
            return True

        await self.queue.serve(rebalance, (ApiError, TimeoutError), failed)

    def tenant_of_app(self, app: str) -> Mapping[str, Any] | None:
        namespace = app.split("/", 1)[0]
        return tenant_of(self.quotas(), namespace, self.namespace_labels(namespace))

    async def guard(self, member: Member, work: ClusterWork) -> None:
        """Before ``work`` is written to ``member``: the tenant's quotas there cover the
        namespaces it writes (raises ApiError when they cannot be written)."""
        quota = self.tenant_of_app(work.app)
        if quota is not None and not work.removal:
            await self.rebalance(member, quota, namespaces_written(work))
            self.on_usage(str(quota["metadata"]["name"]))  # new plans count in the status

    async def rebalance(
        self, member: Member, quota: Mapping[str, Any], extra: Iterable[str] = ()
    ) -> None:
        """Split the tenant's limit on ``member`` over the namespaces it uses there."""
        tenant = str(quota["metadata"]["name"])
        labels = self.cluster_labels(member.name)
        if labels is None:
            return
        limits = hard_for(quota, member.name, labels)
        lock = self._locks.setdefault((member.name, tenant), anyio.Lock())
        async with lock:
            cache = (await self.caches(member, [RESOURCE_QUOTA], self.timeout_s))[RESOURCE_QUOTA]
            current = {
                str(rq["metadata"]["namespace"]): rq
                for rq in cache.snapshot()
                if (rq["metadata"].get("annotations") or {}).get(TENANT_ANNOTATION) == tenant
            }
            active = set(extra) | self._namespaces(member.name, tenant)
            used = {
                ns: parse_quantities(((current.get(ns) or {}).get("status") or {}).get("used"))
                for ns in active | set(current)
            }
            missing = self._uncounted(member, tenant, limits, used)
            self._record(tenant, member.name, limits, used, missing)
            if not limits:
                return
            # What the member does not count holds room its admission would give again.
            held = held_back(limits, missing.values())
            target = split_all(held, used, active)
            in_force = {
                ns: parse_quantities((rq.get("spec") or {}).get("hard"))
                for ns, rq in current.items()
            }
            await self._write_split(member, tenant, held, target, in_force)

    async def _write_split(
        self,
        member: Member,
        tenant: str,
        limits: Mapping[str, Decimal],
        target: Mapping[str, Mapping[str, Decimal]],
        in_force: dict[str, dict[str, Decimal]],
    ) -> None:
        """Write ``target`` over the quotas ``in_force`` (as the cache saw them)."""
        # Every value that comes down is written before any that goes up: the stored
        # values never sum above the limit, even in between.
        fresh: dict[str, dict[str, Decimal]] = {}
        """Namespace -> use, as the member answered during this rebalance."""
        lowered: dict[str, dict[str, Decimal]] = {}
        for ns, now in list(in_force.items()):
            lower = _lowered(now, target[ns]) if ns in target else now
            if lower != now:
                fresh[ns] = await self._write(member, tenant, ns, lower)
                in_force[ns] = lowered[ns] = lower
        raises = {ns: values for ns, values in target.items() if values != in_force.get(ns)}
        if not raises:
            return
        # The member's admission checks status.hard, which its quota controller copies
        # from what we wrote: until it has, a raise could let both namespaces fill up.
        await self._taken_up(member, tenant, lowered)
        # The cache may be behind: a namespace it saw below its use can already hold
        # more. Raises are capped by what the member says the others hold right now —
        # the lowered ones too: until their lower value was taken up, they admitted
        # against the old one after their write's answer gave the use.
        for ns in (set(in_force) - set(fresh)) | set(lowered):
            fresh[ns] = await self._read_used(member, tenant, ns)
        created: dict[str, dict[str, Decimal]] = {}
        for ns, values in raises.items():
            capped = capped_raise(limits, ns, values, in_force, fresh)
            if capped != values:
                log.info("%s: quota of tenant %s in %s held at %s", member.name, tenant, ns, capped)
            if capped != in_force.get(ns):
                if ns not in in_force:
                    created[ns] = capped
                fresh[ns] = await self._write(member, tenant, ns, capped)
                in_force[ns] = capped
        # A quota whose status the member has yet to fill in limits nothing there.
        await self._taken_up(member, tenant, created)

    async def _taken_up(
        self, member: Member, tenant: str, written: Mapping[str, Mapping[str, Decimal]]
    ) -> None:
        """Return once the member's quota controller has taken up ``written`` (namespace
        -> hard as written) as the quotas' status.hard, which its admission checks; raises
        a retryable ApiError naming the namespaces after the timeout."""
        if not written:
            return
        name = quota_name(tenant)
        waiting = sorted(written)
        with anyio.move_on_after(self.timeout_s):
            while True:
                cache = (await self.caches(member, [RESOURCE_QUOTA], self.timeout_s))[
                    RESOURCE_QUOTA
                ]
                waiting = [
                    ns for ns in waiting if not _enforces(cache.get(f"{ns}/{name}"), written[ns])
                ]
                if not waiting:
                    return
                await anyio.sleep(TAKEN_UP_POLL_S)
        raise ApiError(
            member.name,
            f"the member's quota controller has not taken up the quota of tenant {tenant} in "
            f"{', '.join(waiting)} within {self.timeout_s:g}s (is its kube-controller-manager "
            "running?)",
            retryable=True,
        )

    def _namespaces(self, cluster: str, tenant: str) -> set[str]:
        """Namespaces the tenant's applications write on ``cluster`` (from the work)."""
        out: set[str] = set()
        for app in self.table.apps_on(cluster):
            work = self.table.get(app, cluster)
            quota = self.tenant_of_app(app)
            if work is not None and quota is not None and quota["metadata"]["name"] == tenant:
                out |= namespaces_written(work)
        return out

    def _uncounted(
        self,
        member: Member,
        tenant: str,
        limits: Mapping[str, Decimal],
        used: Mapping[str, Mapping[str, Decimal]],
    ) -> dict[str, dict[str, Decimal]]:
        """What the pods in the namespaces of ``used`` use beyond what the member's quotas
        there count (:func:`propagator.tenancy.uncounted.uncounted`), logged once per
        change."""
        monitor = member.monitor
        out = {} if monitor is None else uncounted(limits, used, monitor.quota_usage)
        if self.uncounted.get((tenant, member.name), {}) != out:
            if out:
                log.info(
                    "%s: what pods of tenant %s use that the member's quotas do not count"
                    " (held back from its limit until they do): %s",
                    member.name,
                    tenant,
                    "; ".join(
                        f"{ns}: " + ", ".join(f"{r} {written(r, v)}" for r, v in sorted(m.items()))
                        for ns, m in sorted(out.items())
                    ),
                )
            self.uncounted[tenant, member.name] = out
        return out

    def _record(
        self,
        tenant: str,
        cluster: str,
        limits: dict[str, Decimal],
        used: Mapping[str, Mapping[str, Decimal]],
        missing: Mapping[str, Mapping[str, Decimal]],
    ) -> None:
        total: dict[str, Decimal] = {}
        with arithmetic():
            for per_namespace in (*used.values(), *missing.values()):
                for resource, value in per_namespace.items():
                    total[resource] = total.get(resource, Decimal(0)) + value
        usage = Usage(dict(limits), total)
        if self.usage.get((tenant, cluster)) != usage:
            self.usage[tenant, cluster] = usage
            self.on_usage(tenant)

    async def _read_used(self, member: Member, tenant: str, namespace: str) -> dict[str, Decimal]:
        """The use a tenant quota reports on the member now (none if it is gone)."""
        try:
            rq = await member.connection.get(
                *RESOURCE_QUOTA, name=quota_name(tenant), namespace=namespace
            )
        except ApiError as exc:
            if exc.not_found:
                return {}
            raise
        return parse_quantities((rq.get("status") or {}).get("used"))

    async def _write(
        self, member: Member, tenant: str, namespace: str, hard: Mapping[str, Decimal]
    ) -> dict[str, Decimal]:
        """Write a tenant quota; returns the use the member's answer reports."""
        rq = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {
                "name": quota_name(tenant),
                "namespace": namespace,
                "labels": {
                    APP_LABEL: app_label_value("tenant", tenant),
                    MEMBER_LABEL: member_label_value(member.name),
                },
                "annotations": {TENANT_ANNOTATION: tenant},
            },
            "spec": {"hard": {r: written(r, v) for r, v in sorted(hard.items())}},
        }
        answer = await apply_creating_namespace(member.connection, rq)
        log.info("%s: quota of tenant %s in %s: %s", member.name, tenant, namespace, hard)
        return parse_quantities((answer.get("status") or {}).get("used"))


def written(resource: str, value: Decimal) -> str:
    """A quantity as a quota value: memory and storage in binary units."""
    binary = "memory" in resource or "storage" in resource
    return format_quantity(value, Format.BINARY_SI if binary else Format.DECIMAL_SI)


def _enforces(rq: Mapping[str, Any] | None, hard: Mapping[str, Decimal]) -> bool:
    """Whether a cached quota's status.hard (what the member's admission checks) is
    within ``hard`` for every resource of it."""
    status = parse_quantities(((rq or {}).get("status") or {}).get("hard"))
    return all(r in status and status[r] <= v for r, v in hard.items())


def _lowered(now: Mapping[str, Decimal], target: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """``now`` with every value that ``target`` lowers already lowered (a resource with no
    limit yet counts as unlimited: its limit is a lowering)."""
    return {r: min(now[r], v) if r in now else v for r, v in target.items()}
