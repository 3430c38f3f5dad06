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


def test_an_applications_clusters_are_counted_by_health_until_it_is_forgotten() -> None:
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
    anyio.run(writes.status, app, status)
    assert hub.patches == [{"status": status}]

    def count(health: str) -> float | None:
        return metrics.registry.get_sample_value(
            "propagator_application_clusters",
            {"namespace": "shop", "application": "web", "health": health},
        )

    assert (count("Healthy"), count("Degraded"), count("Progressing")) == (2, 1, 0)
    writes.forget("shop/web")
    assert count("Healthy") is None
