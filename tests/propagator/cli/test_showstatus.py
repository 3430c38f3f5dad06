"""kubectl propagator status: an application in one view."""

from __future__ import annotations

from typing import Any

from propagator.cli.kubectl import main
from propagator.cli.showstatus import status_text

APP: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"fleet": "prod", "canary": {"steps": [{"weight": 50}]}},
    "status": {
        "ready": "1/2",
        "conditions": [
            {"type": "Applied", "status": "False", "reason": "ApplyFailed", "message": "1/2"},
            {"type": "QuotaExceeded", "status": "False", "reason": "WithinQuota", "message": "ok"},
        ],
        "placement": [{"cluster": "a", "replicas": 3}, {"cluster": "b", "replicas": 1}],
        "clusters": [
            {"name": "a", "applied": True, "health": "Healthy", "attempts": 1},
            {
                "name": "b",
                "applied": False,
                "health": "Unknown",
                "attempts": 3,
                "lastError": "x" * 500,
            },
        ],
        "canary": {"phase": "Succeeded", "message": "first release"},
        "evicted": [
            {"cluster": "c", "reason": "ApplicationUnhealthy", "since": "2026-12-01T10:00:00Z"}
        ],
    },
}


def test_one_view_of_conditions_clusters_canary_and_evictions() -> None:
    lines = status_text(APP).splitlines()
    assert lines[0] == "applicationpropagation.propagator.io/web in shop: fleet prod, 1/2 ready"
    assert lines[1] == "  Applied=False ApplyFailed: 1/2"
    assert lines[2] == "  QuotaExceeded=False WithinQuota: ok"
    assert lines[3].split() == [
        "CLUSTER",
        "APPLIED",
        "HEALTH",
        "REPLICAS",
        "ATTEMPTS",
        "MESSAGE",
    ]
    assert lines[4].split() == ["a", "yes", "Healthy", "3", "1", "-"]
    assert lines[5].split()[:5] == ["b", "no", "Unknown", "1", "3"]
    assert lines[5].endswith("x" * 120 + "…")  # a long error is cut on its line
    assert lines[6] == "canary: Succeeded: first release"
    assert lines[7] == "kept off c: ApplicationUnhealthy since 2026-12-01T10:00:00Z"


def test_reported_drift_and_what_is_kept_on_delete_are_shown() -> None:
    app: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"fleet": "prod", "driftPolicy": "Report"},
        "status": {
            "clusters": [
                {
                    "name": "a",
                    "applied": True,
                    "health": "Healthy",
                    "drift": {
                        "objects": 1,
                        "names": ["v1 ConfigMap shop/settings"],
                        "since": "2026-12-07T10:00:00Z",
                    },
                }
            ],
            "keptOnDelete": ["v1 PersistentVolumeClaim shop/data"],
        },
    }
    lines = status_text(app).splitlines()
    assert (
        "drift on a since 2026-12-07T10:00:00Z: 1 object(s) left as changed there: "
        "v1 ConfigMap shop/settings"
    ) in lines
    assert lines[-1] == "kept on delete: v1 PersistentVolumeClaim shop/data"


def test_why_a_cluster_is_not_healthy_and_the_combined_fields_are_shown() -> None:
    app: dict[str, Any] = {
        "metadata": {"name": "pool", "namespace": "shop"},
        "spec": {"fleet": "prod"},
        "status": {
            "clusters": [
                {
                    "name": "a",
                    "applied": True,
                    "health": "Degraded",
                    "healthMessage": "WorkerPool shop/pool: worker crashed",
                },
                {
                    "name": "b",
                    "applied": True,
                    "health": "Healthy",
                    "healthMessage": "no health rule for ConfigMap: healthy once applied",
                },
            ],
            "objects": [
                {
                    "kind": "WorkerPool",
                    "namespace": "shop",
                    "name": "pool",
                    "fields": {"readyWorkers": 4},
                    "clusters": 2,
                }
            ],
        },
    }
    lines = status_text(app).splitlines()
    assert lines[2].endswith("WorkerPool shop/pool: worker crashed")
    assert lines[3].split()[-1] == "-"  # a healthy cluster's note is not a problem
    assert lines[4] == "WorkerPool shop/pool: readyWorkers=4 (2 clusters)"


def test_an_application_not_planned_yet() -> None:
    fresh = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"fleet": "prod"}}
    assert (
        status_text(fresh)
        == "applicationpropagation.propagator.io/web in shop: fleet prod, nothing ready"
    )


def test_bad_input_is_refused_before_the_hub_is_asked(capsys: Any) -> None:
    assert main(["status", "Web", "-n", "shop"]) == 2
    assert "status: NAME 'Web': not an object name" in capsys.readouterr().err
