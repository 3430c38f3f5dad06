"""Workload health on a member, from an object's status, as Kubernetes tools judge it.

Deployments, StatefulSets, DaemonSets and Jobs are judged by their conditions and ready
counts; anything else is Healthy once it exists (there is nothing to wait for).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the type only: judging health reads caches, it does no I/O
    from kube.informer import Informer

WorkloadHealth = Literal["Healthy", "Progressing", "Degraded", "Unknown"]
_ORDER: dict[WorkloadHealth, int] = {"Healthy": 0, "Unknown": 1, "Progressing": 2, "Degraded": 3}
HEALTHS: tuple[WorkloadHealth, ...] = tuple(_ORDER)


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def _observed(obj: Mapping[str, Any]) -> bool:
    generation = (obj.get("metadata") or {}).get("generation")
    observed = (obj.get("status") or {}).get("observedGeneration")
    return generation is None or observed is None or observed >= generation


def _deployment(obj: Mapping[str, Any]) -> WorkloadHealth:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    progressing = _condition(status, "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        return "Degraded"
    want = spec.get("replicas", 1)
    if (
        _observed(obj)
        and status.get("updatedReplicas", 0) >= want
        and status.get("availableReplicas", 0) >= want
        and status.get("replicas", 0) <= want
    ):
        return "Healthy"
    return "Progressing"


def _rolled_out(obj: Mapping[str, Any], want: int, ready: str, updated: str) -> WorkloadHealth:
    status = obj.get("status") or {}
    if _observed(obj) and status.get(ready, 0) >= want and status.get(updated, want) >= want:
        return "Healthy"
    return "Progressing"


def _statefulset(obj: Mapping[str, Any]) -> WorkloadHealth:
    want = (obj.get("spec") or {}).get("replicas", 1)
    return _rolled_out(obj, want, "readyReplicas", "updatedReplicas")


def _daemonset(obj: Mapping[str, Any]) -> WorkloadHealth:
    want = (obj.get("status") or {}).get("desiredNumberScheduled", 0)
    return _rolled_out(obj, want, "numberReady", "updatedNumberScheduled")


def _job(obj: Mapping[str, Any]) -> WorkloadHealth:
    status = obj.get("status") or {}
    failed = _condition(status, "Failed")
    if failed and failed.get("status") == "True":
        return "Degraded"
    complete = _condition(status, "Complete")
    if complete and complete.get("status") == "True":
        return "Healthy"
    return "Progressing"


_JUDGES = {
    ("apps/v1", "Deployment"): _deployment,
    ("apps/v1", "StatefulSet"): _statefulset,
    ("apps/v1", "DaemonSet"): _daemonset,
    ("batch/v1", "Job"): _job,
}


def health_of(obj: Mapping[str, Any] | None) -> WorkloadHealth:
    """The health of one live object (None: it is not there yet; being deleted: it is
    going away, whatever its status still says)."""
    if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Progressing"
    judge = _JUDGES.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    return judge(obj) if judge else "Healthy"


def worst(healths: Iterable[WorkloadHealth]) -> WorkloadHealth:
    """A cluster's health: its least healthy object (Healthy when there is none)."""
    return max(healths, key=_ORDER.__getitem__, default="Healthy")


WORKLOAD_KINDS = frozenset(_JUDGES)
"""(apiVersion, kind) of the objects whose health is judged by their status."""


def cluster_health(
    cache: Callable[[str, str], Informer | None] | None,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
    applied: Callable[[tuple[str, str, str, str]], int | None] = lambda _: None,
) -> WorkloadHealth:
    """The worst health of ``objects`` as the member's watch caches (``cache(apiVersion,
    kind)``) hold them (objects without a namespace are in ``namespace``); Unknown while a
    cache has not listed, or without a member (``cache`` None). ``applied(key)``: the
    generation the member answered the controller's last write of an object with — a
    cached copy older than that has not seen the write (its status says nothing of it):
    Progressing."""
    healths: list[WorkloadHealth] = []
    for obj in objects:
        kind = (str(obj.get("apiVersion")), str(obj.get("kind")))
        if kind not in WORKLOAD_KINDS:
            continue
        informer = cache(*kind) if cache else None
        if informer is None or not informer.synced:
            return "Unknown"
        meta = obj.get("metadata") or {}
        where = meta.get("namespace") or namespace
        live = informer.get(f"{where}/{meta.get('name')}")
        written = applied((kind[0], kind[1], where, str(meta.get("name"))))
        seen = ((live or {}).get("metadata") or {}).get("generation")
        if live is not None and written is not None and isinstance(seen, int) and seen < written:
            healths.append("Progressing")
            continue
        healths.append(health_of(live))
    return worst(healths)


def quota_refusals(
    cache: Callable[[str, str], Informer | None] | None,
    objects: Sequence[Mapping[str, Any]],
    namespace: str,
) -> list[str]:
    """Deployments among ``objects`` whose pods the member's quota refuses (their
    ``ReplicaFailure`` condition: "exceeded quota", or "failed quota" for a container
    without the requests a quota needs), each as ``Deployment ns/name: <message>``."""
    found = []
    for obj in objects:
        if (obj.get("apiVersion"), obj.get("kind")) != ("apps/v1", "Deployment") or not cache:
            continue
        informer = cache("apps/v1", "Deployment")
        meta = obj.get("metadata") or {}
        where = f"{meta.get('namespace') or namespace}/{meta.get('name')}"
        live = informer.get(where) if informer is not None else None
        failure = _condition((live or {}).get("status") or {}, "ReplicaFailure")
        message = str((failure or {}).get("message") or "")
        if (failure or {}).get("status") == "True" and " quota" in message:
            found.append(f"Deployment {where}: {message[:300]}")
    return found
