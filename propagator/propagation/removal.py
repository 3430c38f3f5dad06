"""An application being deleted: what it propagated removed from every cluster, then its
finalizer taken off — unless a removal failed and the application is not annotated to
leave what remains (orphan)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from api.application import ORPHAN_ANNOTATION, ApplicationPropagation
from api.finalizerpolicy import FINALIZER
from kube.errors import ApiError
from propagator.conditions import now_iso
from propagator.propagation.appwrites import ApplicationWrites
from propagator.propagation.results import applied_summary, failures
from propagator.propagation.statusbuilder import StatusBuilder
from propagator.propagation.workrecord import REMOVAL, WorkRecorder
from propagator.work.members import MemberView
from propagator.work.objects import kinds_of
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable

log = logging.getLogger(__name__)


class Removal:
    """Removes deleted applications from their clusters."""

    def __init__(
        self,
        table: WorkTable,
        view: MemberView,
        writes: ApplicationWrites,
        work: WorkRecorder,
        sync_defaults: SyncPolicy,
    ) -> None:
        self.table = table
        self.view = view
        self.writes = writes
        self.work = work
        self.sync_defaults = sync_defaults

    async def remove(self, obj: dict[str, Any], key: str) -> bool:
        """Record the removal from every cluster the application is on (the member syncs
        report back here); once they are done, take the finalizer off. Returns whether the
        application is gone from the controller's concern (its state may be forgotten)."""
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return False
        status = obj.get("status") or {}
        clusters = {c["name"] for c in status.get("clusters") or []} | {
            p["cluster"] for p in status.get("placement") or []
        }
        clusters |= set(self.table.works_of(key))
        manifests = ((obj.get("spec") or {}).get("resources") or {}).get("manifests") or []
        kinds = frozenset(set(status.get("propagatedKinds") or []) | kinds_of(manifests))
        gone = sorted(c for c in clusters if not self.view.known(c))
        if gone:
            log.warning("%s: %s are no longer MemberClusters; left as they are", key, gone)
        try:
            rollout = ApplicationPropagation.model_validate(obj).spec.rollout
        except ValidationError:
            rollout = None  # the controller's defaults
        policy = SyncPolicy.of(rollout, self.sync_defaults)
        uid = str(meta.get("uid", ""))
        works = {
            c: ClusterWork(key, c, (), REMOVAL, kinds, policy, uid)
            for c in sorted(clusters - set(gone))
        }
        self.work.record(key, works)
        if self.table.pending(key):
            return False  # removals in flight: their results come back here
        return await self._finish(obj, key)

    async def _finish(self, obj: dict[str, Any], key: str) -> bool:
        """Every removal is done: the finalizer off, or ``CleanupFailed`` in the status."""
        meta = obj["metadata"]
        states = self.table.states_of(key)
        failed = failures(states)
        orphan = (meta.get("annotations") or {}).get(ORPHAN_ANNOTATION) == "true"
        if failed is not None and not orphan:
            builder = StatusBuilder(self.writes.as_held(key, obj), now_iso())
            builder.condition(
                "Applied",
                False,
                "CleanupFailed",
                "deleting: "
                + applied_summary(states).split("; ", 1)[-1]
                + f" (annotate {ORPHAN_ANNOTATION}=true to leave them)",
            )
            await self.writes.status(obj, builder.build())
            return False
        if failed is not None:
            orphaned = [c for c, s in sorted(states.items()) if s.failed]
            log.warning("%s: orphaned on %s", key, ", ".join(orphaned))
        rest = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            await self.writes.finalizers(obj, rest)
        except ApiError as exc:
            if not exc.not_found:
                raise
        log.info("%s: removed from %d clusters", key, len(states))
        return True
