from __future__ import annotations

from typing import Any, cast

import anyio

from kube.connection import KubeConnection
from propagator.observability.metrics import Metrics
from propagator.propagation.appwrites import ApplicationWrites


class _Hub:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def merge_patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.patches.append(args[3])
        return {}


def test_the_applications_clusters_are_counted_by_health_until_forgotten() -> None:
    metrics, hub = Metrics(), _Hub()
    writes = ApplicationWrites(cast(KubeConnection, hub), metrics)
    app: dict[str, Any] = {"metadata": {"name": "web", "namespace": "shop"}}
    status = {
        "clusters": [
            {"name": "a", "health": "Healthy"},
            {"name": "b", "health": "Degraded"},
            {"name": "c", "health": "Healthy"},
        ]
    }
    other: dict[str, Any] = {"metadata": {"name": "api", "namespace": "shop"}}
    anyio.run(writes.status, app, status)
    anyio.run(writes.status, other, {"clusters": [{"name": "a", "health": "Healthy"}]})
    assert hub.patches[0] == {"status": status}

    def count(health: str) -> float | None:
        return metrics.registry.get_sample_value(
            "propagator_application_clusters", {"health": health}
        )

    assert (count("Healthy"), count("Degraded"), count("Progressing")) == (3, 1, 0)
    status["clusters"][1]["health"] = "Healthy"  # web recovered on b
    anyio.run(writes.status, app, status)
    assert (count("Healthy"), count("Degraded")) == (4, 0)
    writes.forget("shop/web")
    assert (count("Healthy"), count("Degraded")) == (1, 0)
