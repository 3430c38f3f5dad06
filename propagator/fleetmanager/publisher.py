"""Publishing the fleet snapshot: a new generation when the fleet looks different, a
confirmation that the current one still holds otherwise."""

from __future__ import annotations

import logging
from typing import Any

from fleet.snapshot import ClusterInfoCache
from fleet.snapshotstore import SnapshotStore
from propagator.observability.metrics import Metrics

# The fleet manager's logger, as before the publisher had a module of its own.
log = logging.getLogger("propagator.fleetmanager.manager")


class SnapshotPublisher:
    """Publishes what the hub holds of the members and Fleets into ``store``."""

    def __init__(self, store: SnapshotStore, metrics: Metrics) -> None:
        self.store = store
        self.metrics = metrics
        self._infos = ClusterInfoCache()

    def publish(self, members: list[dict[str, Any]], fleets: dict[str, list[str]]) -> None:
        infos = {info.name: info for info in self._infos.infos(members)}
        current = self.store.current()
        same_fleets = {k: frozenset(v) for k, v in fleets.items()} == dict(current.fleets)
        if dict(current.clusters) == infos and same_fleets and current.generation:
            self.store.confirm()
            return
        snapshot = self.store.publish(infos.values(), fleets)
        self.metrics.snapshot_generation.set(snapshot.generation)
        ready = sum(i.ready for i in infos.values())
        self.metrics.snapshot_clusters.set(len(infos))
        self.metrics.snapshot_ready_clusters.set(ready)
        log.info("fleet snapshot %d: %d clusters, %d ready", snapshot.generation, len(infos), ready)
