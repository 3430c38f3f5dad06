"""The Event that says a cluster's objects drifted and were left so."""

from __future__ import annotations

from collections.abc import Sequence

from kube.connection import KubeConnection
from propagator.conditions import some_of
from propagator.observability.events import record_event
from propagator.work.table import ClusterWork


async def drift_event(hub: KubeConnection, work: ClusterWork, names: Sequence[str]) -> None:
    """A Warning Event on ``work``'s application: ``names`` drifted on its cluster and
    are left so (``driftPolicy: Report``)."""
    app = {"metadata": {"name": work.name, "namespace": work.namespace, "uid": work.uid}}
    message = (
        f"{len(names)} object(s) changed on {work.cluster} and left so (driftPolicy: "
        f"Report; kubectl propagator sync heals them): {some_of(list(names), ', ', 5)}"
    )
    await record_event(hub, app, "Warning", "DriftDetected", message)
