"""Workload watches: the slim cached copy still judges health; unknown until listed."""

from __future__ import annotations

from typing import Any

from propagator.propagation.health import health_of
from propagator.propagation.resources import APP_ANNOTATION, REVISION_ANNOTATION
from propagator.propagation.workloads import WorkloadWatches, slim_workload


def _deployment(ready: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "generation": 2,
            "resourceVersion": "9",
            "annotations": {
                APP_ANNOTATION: "shop/web",
                REVISION_ANNOTATION: "abc",
                "other": "x" * 1000,
            },
            "managedFields": [{"manager": "propagator"}],
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"image": "big"}]}}},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": 2,
            "availableReplicas": ready,
        },
    }


def test_the_slim_copy_keeps_what_health_and_ownership_need() -> None:
    for ready in (1, 2):
        full = _deployment(ready)
        slim = slim_workload(full)
        assert health_of(slim) == health_of(full)
    assert "managedFields" not in slim["metadata"]
    assert slim["metadata"]["annotations"] == {
        APP_ANNOTATION: "shop/web",
        REVISION_ANNOTATION: "abc",
    }
    assert slim["spec"] == {"replicas": 2}


def test_health_is_unknown_without_a_listed_watch_and_ignores_other_kinds() -> None:
    watches = WorkloadWatches(lambda *_: None)
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert watches.health("m1", [config], "shop") == "Healthy"  # nothing to wait for
    assert watches.health("m1", [_deployment(2)], "shop") == "Unknown"
