"""The hand-written health Propagator had before interpreter rules (Deployment,
StatefulSet, DaemonSet, Job; anything else Healthy): the baseline ``bench.health``
measures the built-in rules against, and the oracle their unit test checks them with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from propagator.interpreter.health import WorkloadHealth


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
