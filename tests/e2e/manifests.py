"""Objects the e2e tests and benchmarks propagate: plain manifests and applications."""

from __future__ import annotations

from typing import Any

GROUP, VERSION, PLURAL = "propagator.io", "v1alpha1", "applicationpropagations"


def deployment(name: str, namespace: str, image: str, replicas: Any = 2) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": image}]},
            },
        },
    }


def service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def autoscaler(
    name: str, namespace: str, low: int, high: int, metric: str | None = None
) -> dict[str, Any]:
    """A HorizontalPodAutoscaler of Deployment ``name``, between ``low`` and ``high``
    replicas: one per 10 of the external ``metric`` (no metric: it never scales)."""
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicas": low,
        "maxReplicas": high,
    }
    if metric is not None:
        target = {"type": "AverageValue", "averageValue": "10"}
        spec["metrics"] = [
            {"type": "External", "external": {"metric": {"name": metric}, "target": target}}
        ]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def config_map(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def application(
    name: str, namespace: str, manifests: list[dict[str, Any]], fleet: str, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ApplicationPropagation",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"fleet": fleet, "resources": {"manifests": manifests}, **spec},
    }
