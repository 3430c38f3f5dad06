"""Workload health on the members, kept current by watching what Propagator applied.

Per member, one watch per workload kind (Deployments, StatefulSets, DaemonSets, Jobs),
limited to objects carrying the application label. Each change names its application
(from the owner annotation), so the controller can refresh that application's health; the
health itself is read from these caches, with no call to the member.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleet.connection import KubeConnection
from fleet.informer import Informer
from propagator.propagation.health import Health, health_of, worst
from propagator.propagation.resources import APP_ANNOTATION, APP_LABEL, REVISION_ANNOTATION

WATCHED_KINDS = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
)
_KEPT_ANNOTATIONS = (APP_ANNOTATION, REVISION_ANNOTATION)

EventHandler = Callable[[str, str, str], None]
"""Called as handler(cluster, application namespace/name, event) from a watch thread."""


def slim_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """What health needs of a workload: identity, owner, replicas and status."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "generation": meta.get("generation"),
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {k: annotations[k] for k in _KEPT_ANNOTATIONS if k in annotations},
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": obj.get("status") or {},
    }


class WorkloadWatches:
    """The workload watches of every member, rebuilt when a member's connection changes."""

    def __init__(self, on_event: EventHandler) -> None:
        self._on_event = on_event
        self._lock = threading.Lock()
        self._watches: dict[str, tuple[KubeConnection, dict[tuple[str, str], Informer]]] = {}

    def _informers(self, cluster: str, conn: KubeConnection) -> dict[tuple[str, str], Informer]:
        def changed(event: str, old: Any, new: Any) -> None:
            obj = new or old or {}
            owner = ((obj.get("metadata") or {}).get("annotations") or {}).get(APP_ANNOTATION)
            if owner:
                self._on_event(cluster, str(owner), event)

        informers = {}
        for api_version, kind in WATCHED_KINDS:
            informers[api_version, kind] = Informer(
                conn,
                api_version,
                kind,
                changed,
                label_selector=APP_LABEL,
                transform=slim_workload,
            )
        return informers

    def sync(self, connections: Mapping[str, KubeConnection | None]) -> list[Informer]:
        """Match the watches to the members' current connections; returns the new
        informers, which the caller runs (old ones are stopped)."""
        started: list[Informer] = []
        with self._lock:
            for cluster in list(self._watches):
                current, informers = self._watches[cluster]
                if connections.get(cluster) is not current:
                    for informer in informers.values():
                        informer.stop()
                    del self._watches[cluster]
            for cluster, conn in connections.items():
                if conn is None or cluster in self._watches:
                    continue
                informers = self._informers(cluster, conn)
                self._watches[cluster] = (conn, informers)
                started += informers.values()
        return started

    def health(self, cluster: str, objects: Sequence[Mapping[str, Any]], namespace: str) -> Health:
        """The worst health of ``objects`` on ``cluster`` as the watches see them (those
        without a namespace are in ``namespace``); Unknown while a watch has not listed (or
        the member has no connection)."""
        with self._lock:
            watch = self._watches.get(cluster)
        healths: list[Health] = []
        for obj in objects:
            kind = (str(obj.get("apiVersion")), str(obj.get("kind")))
            if kind not in WATCHED_KINDS:
                continue
            informer = watch[1][kind] if watch else None
            if informer is None or not informer.synced.is_set():
                return "Unknown"
            meta = obj.get("metadata") or {}
            live = informer.get(f"{meta.get('namespace') or namespace}/{meta.get('name')}")
            healths.append(health_of(live))
        return worst(healths)

    def stop(self) -> None:
        with self._lock:
            for _, informers in self._watches.values():
                for informer in informers.values():
                    informer.stop()
            self._watches.clear()
