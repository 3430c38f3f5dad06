"""What the reconcile writes to an ApplicationPropagation on the hub: its status (only
when it changed from what the hub holds) and its finalizers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from api.common import API_VERSION
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.keys import cache_key
from propagator.conditions import WrittenStatuses
from propagator.interpreter.health import HEALTHS
from propagator.observability.metrics import Metrics
from propagator.propagation.statusbuilder import checked


class ApplicationWrites:
    """Status and finalizer writes of the applications one reconciler plans."""

    def __init__(self, hub: KubeConnection, metrics: Metrics) -> None:
        self.hub = hub
        self.metrics = metrics
        self.statuses = WrittenStatuses()
        self._healths: dict[str, Counter[str]] = {}
        """Per application, its clusters by health in its last status."""
        self._totals: Counter[str] = Counter()

    def as_held(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with the status the hub holds (see :class:`WrittenStatuses`)."""
        return self.statuses.as_held(key, obj)

    def forget(self, key: str) -> None:
        self.statuses.forget(key)
        self._count(key, Counter())

    async def status(self, obj: dict[str, Any], status: dict[str, Any]) -> None:
        """Write ``status`` unless the hub holds it already; an application deleted
        meanwhile has nothing to report. Counts its clusters by health. Raises ApiError."""
        meta, key = obj["metadata"], cache_key(obj)
        self._count(key, Counter(str(c.get("health")) for c in status.get("clusters") or []))
        if not self.statuses.changed(key, obj, status):
            return
        checked(status)
        self.metrics.status_writes.labels("ApplicationPropagation status").inc()
        try:
            await self.hub.merge_patch(
                API_VERSION,
                "ApplicationPropagation",
                meta["name"],
                {"status": status},
                namespace=meta.get("namespace"),
                subresource="status",
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
        else:
            self.statuses.written(key, obj, status)

    def _count(self, key: str, healths: Counter[str]) -> None:
        """Count ``key``'s clusters by health in the totals (an empty Counter: it is gone)."""
        before = self._healths.pop(key, Counter())
        if healths:
            self._healths[key] = healths
        if before == healths:
            return
        self._totals.subtract(before)
        self._totals.update(healths)
        for health in HEALTHS:
            self.metrics.application_clusters.labels(health).set(self._totals[health])

    async def finalizers(self, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace the finalizers, only if the object is unchanged since it was read."""
        meta = obj["metadata"]
        guarded = {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}
        await self.hub.merge_patch(
            API_VERSION,
            "ApplicationPropagation",
            meta["name"],
            {"metadata": guarded},
            namespace=meta.get("namespace"),
        )
