"""One reconcile of one ApplicationPropagation: resolve, schedule, render, fan out (apply
and prune), health, status — or, once it is being deleted, clean up and let it go.

A cluster whose objects were applied (or read back and found equal) at a revision is not
contacted again for that revision until the resync period has passed, so a reconcile with
nothing to change sends nothing to the members. After a restart every cluster is read back
once: what is already there is not written again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from opentelemetry import trace
from pydantic import ValidationError

from api.application import ORPHAN_ANNOTATION, ApplicationPropagation
from api.common import API_VERSION
from api.rollout import Rollout
from fleet.connection import ApiError, KubeConnection
from fleet.discovery import UnknownKind
from fleet.informer import key_of
from fleet.member import MemberMonitor
from fleet.snapshot import FleetSnapshot, SnapshotStore
from propagator.fleetmanager.status import now_iso, status_changed
from propagator.observability.metrics import Metrics
from propagator.propagation import fanout
from propagator.propagation.membersync import MemberSync
from propagator.propagation.prune import kinds_of
from propagator.propagation.render import ApplicationRef, RenderError, render_for_cluster
from propagator.propagation.resources import resolve, revision_of
from propagator.propagation.status import ClusterState, StatusBuilder, availability
from propagator.propagation.targets import Target, targets_of
from propagator.propagation.workloads import WorkloadWatches
from propagator.scheduler import Scheduler, demand_of
from propagator.settings import Settings
from propagator.tenancy import quota

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")

FINALIZER = "propagator.io/cleanup"
"""Holds a deleted application until what it propagated is removed from the members."""


@dataclass(frozen=True)
class Outcome:
    """What the worker does next with the key: retry with backoff, or not."""

    retry: bool
    error: BaseException | None = None


class Reconciler:
    """Reconciles ApplicationPropagations (several at once, one per key)."""

    def __init__(
        self,
        hub: KubeConnection,
        settings: Settings,
        store: SnapshotStore,
        scheduler: Scheduler,
        member: Callable[[str], MemberMonitor | None],
        quotas: Callable[[], list[dict[str, Any]]],
        namespace_labels: Callable[[str], Mapping[str, str]],
        workloads: WorkloadWatches,
        metrics: Metrics,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        self.hub = hub
        self.store = store
        self.scheduler = scheduler
        self.quotas = quotas
        self.namespace_labels = namespace_labels
        self.workloads = workloads
        self.metrics = metrics
        self.members = MemberSync(settings, member, metrics, limiter)

    # -- hub writes -----------------------------------------------------------------------

    def _write_status(self, obj: Mapping[str, Any], status: dict[str, Any]) -> None:
        if not status_changed(obj.get("status"), status):
            return
        self.metrics.status_writes.labels("ApplicationPropagation status").inc()
        meta = obj["metadata"]
        try:
            self.hub.merge_patch(
                API_VERSION,
                "ApplicationPropagation",
                meta["name"],
                {"status": status},
                namespace=meta.get("namespace"),
                subresource="status",
            )
        except ApiError as exc:
            if not exc.not_found:  # deleted meanwhile: nothing to report
                raise

    def _set_finalizers(self, obj: Mapping[str, Any], finalizers: list[str]) -> None:
        """Replace the finalizers, only if the object is unchanged since it was read."""
        meta = obj["metadata"]
        guarded = {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}
        self.hub.merge_patch(
            API_VERSION,
            "ApplicationPropagation",
            meta["name"],
            {"metadata": guarded},
            namespace=meta.get("namespace"),
        )

    # -- the reconcile --------------------------------------------------------------------

    async def reconcile(self, obj: dict[str, Any]) -> Outcome:
        """Bring the members in line with ``obj`` (the cached ApplicationPropagation) and
        write its status once."""
        key = key_of(obj)
        with (
            self.metrics.timed("reconcile") as timing,
            tracer.start_as_current_span("reconcile", attributes={"application": key}),
        ):
            if obj["metadata"].get("deletionTimestamp"):
                outcome = await self._finalize(obj, key)
            else:
                outcome = await self._reconcile(obj, key)
            if outcome.error is not None:
                log.warning("%s: %s", key, outcome.error)
            timing.failed = outcome.retry
        return outcome

    async def _reconcile(self, obj: dict[str, Any], key: str) -> Outcome:
        meta = obj["metadata"]
        builder = StatusBuilder(obj, now_iso())
        try:
            app = ApplicationPropagation.model_validate(obj)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            builder.condition("Scheduled", False, "InvalidSpec", problems)
            return await self._report(obj, builder, Outcome(False, ValueError(problems)))
        if FINALIZER not in (meta.get("finalizers") or []):
            await anyio.to_thread.run_sync(
                self._set_finalizers, obj, [*(meta.get("finalizers") or []), FINALIZER]
            )
        try:
            objects = await anyio.to_thread.run_sync(resolve, app, self.hub)
        except (ApiError, UnknownKind) as exc:
            builder.condition("Applied", False, "ResolveFailed", f"resources: {exc}")
            return await self._report(obj, builder, Outcome(True, exc))
        snapshot = self.store.current()
        targets = self._place(app, objects, snapshot, builder)
        if not targets:
            # No fleet, or nothing fits: what runs stays where it is (no apply, no prune).
            return await self._report(obj, builder, Outcome(False))
        try:
            rendered = self._render(app, objects, snapshot, targets)
        except RenderError as exc:
            builder.condition("Applied", False, "RenderFailed", f"{exc}; nothing was applied")
            return await self._report(obj, builder, Outcome(False, exc))
        group = await self._sync(key, app, rendered, targets, builder)
        return await self._report(obj, builder, Outcome(group is not None, group))

    async def _report(
        self, obj: dict[str, Any], builder: StatusBuilder, outcome: Outcome
    ) -> Outcome:
        """Write the status (if it changed) and pass the outcome on."""
        await anyio.to_thread.run_sync(self._write_status, obj, builder.build())
        return outcome

    def _place(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        builder: StatusBuilder,
    ) -> list[Target]:
        """Schedule, and keep what is placed under NoSchedule; sets ``Scheduled`` (and
        ``placement`` when there are targets)."""
        if app.spec.fleet not in snapshot.fleets:
            known = ", ".join(sorted(snapshot.fleets)) or "none"
            self.metrics.scheduling_results.labels("fleet-not-found").inc()
            builder.condition(
                "Scheduled",
                False,
                "FleetNotFound",
                f"spec.fleet {app.spec.fleet!r} is not a Fleet (fleets: {known})",
            )
            return []
        namespace = app.metadata.get("namespace", "default")
        tenant = quota.tenant_of(self.quotas(), namespace, self.namespace_labels(namespace))
        remaining = (
            quota.remaining(tenant, {n: c.labels for n, c in snapshot.clusters.items()})
            if tenant
            else None
        )
        with tracer.start_as_current_span("schedule"):
            t0 = time.perf_counter()
            decision = self.scheduler.schedule(
                snapshot,
                app.spec.fleet,
                app.spec.placement,
                demand_of(objects),
                remaining,
                age_s=self.store.age_s(),
            )
            self.metrics.scheduling_duration.observe(time.perf_counter() - t0)
        self.metrics.scheduling_results.labels(
            "scheduled" if decision.schedulable else "unschedulable"
        ).inc()
        targets = targets_of(
            decision,
            builder.previous.get("placement") or [],
            snapshot,
            app.spec.placement.tolerations,
        )
        kept = [f"{t.cluster} ({t.kept})" for t in targets if t.kept]
        builder.condition(
            "Scheduled",
            decision.schedulable,
            "Scheduled" if decision.schedulable else "Unschedulable",
            decision.summary + (f"; kept where already placed: {', '.join(kept)}" if kept else ""),
        )
        if app.spec.canary is not None:
            builder.condition(
                "CanaryProgressing",
                False,
                "NotSupportedYet",
                "this controller version does not run canary steps: the manifests are "
                "applied to every placed cluster as they are",
            )
        if targets:
            builder.status["placement"] = [_placed(t) for t in targets]
        return targets

    def _render(
        self,
        app: ApplicationPropagation,
        objects: list[dict[str, Any]],
        snapshot: FleetSnapshot,
        targets: list[Target],
    ) -> dict[str, list[dict[str, Any]]]:
        """The objects for each target cluster; raises RenderError at the first problem."""
        divided = app.spec.placement.replicas.mode == "Divided"
        ref = ApplicationRef(app.metadata["name"], app.metadata.get("namespace", "default"))
        with self.metrics.timed("render"), tracer.start_as_current_span("render"):
            return {
                t.cluster: render_for_cluster(
                    objects,
                    app.spec.overrides,
                    snapshot.clusters[t.cluster],
                    ref,
                    t.replicas if divided else None,
                )
                for t in targets
            }

    async def _sync(
        self,
        key: str,
        app: ApplicationPropagation,
        rendered: dict[str, list[dict[str, Any]]],
        targets: list[Target],
        builder: StatusBuilder,
    ) -> ExceptionGroup[fanout.ClusterFailed] | None:
        """Apply and prune where something may differ, remove from clusters the application
        left; sets the per-cluster lines, ``Applied`` and ``Available``. Returns every
        failure of the pass as one group."""
        previous = builder.previous
        now = time.monotonic()
        revisions = {c: revision_of(objs) for c, objs in rendered.items()}
        desired_kinds = set().union(*(kinds_of(o) for o in rendered.values()))
        kinds = desired_kinds | set(previous.get("propagatedKinds") or [])
        previous_clusters = {c["name"]: c for c in previous.get("clusters") or []}
        removed = sorted(set(previous_clusters) - set(rendered))
        work: dict[str, Sequence[dict[str, Any]]] = {
            c: objs
            for c, objs in rendered.items()
            if not self.members.is_known(key, c, revisions[c], now)
        }
        work.update({c: [] for c in removed})
        synced = await self.members.fan_out(key, app.spec.rollout, work, kinds)
        results = {r.cluster: r for r in synced}
        for cluster, result in results.items():
            if not result.applied:
                continue
            if cluster in rendered:
                self.members.remember(key, cluster, revisions[cluster], now)
            else:
                self.members.forget(key, cluster)

        namespace = app.metadata.get("namespace", "default")
        states = []
        applied_results = []
        for t in targets:
            before = previous_clusters.get(t.cluster) or {}
            # Not in the results: known applied at this revision.
            result = results.get(t.cluster) or fanout.ClusterResult(
                t.cluster, True, int(before.get("attempts", 1))
            )
            applied_results.append(result)
            states.append(
                ClusterState(
                    t.cluster,
                    result.applied,
                    self.workloads.health(t.cluster, rendered[t.cluster], namespace),
                    result.attempts,
                    result.error,
                    revisions[t.cluster] if result.applied else before.get("revision"),
                )
            )
        removal_failures = [results[c] for c in removed if not results[c].applied]
        states += [
            ClusterState(
                r.cluster,
                False,
                "Unknown",
                r.attempts,
                f"removing: {r.error}",
                previous_clusters[r.cluster].get("revision"),
            )
            for r in removal_failures
        ]
        builder.clusters(states, len(targets))
        everything_done = all(r.applied for r in results.values())
        builder.status["propagatedKinds"] = sorted(desired_kinds if everything_done else kinds)
        message = fanout.applied_summary(applied_results)
        removal_group = fanout.failures(removal_failures)
        if removal_group is not None:
            message += "; not yet removed from " + "; ".join(
                str(e) for e in removal_group.exceptions
            )
        all_applied = all(r.applied for r in applied_results) and removal_group is None
        builder.condition(
            "Applied", all_applied, "Applied" if all_applied else "ApplyFailed", message
        )
        available, reason, text = availability(states, rendered)
        builder.condition("Available", available, reason, text)
        return fanout.failures(list(results.values()))

    async def _finalize(self, obj: dict[str, Any], key: str) -> Outcome:
        """Remove what the application propagated from every cluster, then its finalizer."""
        meta = obj["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            return Outcome(False)
        status = obj.get("status") or {}
        clusters = {c["name"] for c in status.get("clusters") or []} | {
            p["cluster"] for p in status.get("placement") or []
        }
        manifests = ((obj.get("spec") or {}).get("resources") or {}).get("manifests") or []
        kinds = set(status.get("propagatedKinds") or []) | kinds_of(manifests)
        gone = sorted(c for c in clusters if self.members.member(c) is None)
        if gone:
            log.warning("%s: %s are no longer MemberClusters; left as they are", key, gone)
        try:
            rollout: Rollout | None = ApplicationPropagation.model_validate(obj).spec.rollout
        except ValidationError:
            rollout = None  # the controller's defaults
        results = await self.members.fan_out(
            key, rollout, {c: [] for c in sorted(clusters - set(gone))}, kinds
        )
        failed = [r for r in results if not r.applied]
        orphan = (meta.get("annotations") or {}).get(ORPHAN_ANNOTATION) == "true"
        if failed and not orphan:
            builder = StatusBuilder(obj, now_iso())
            builder.condition(
                "Applied",
                False,
                "CleanupFailed",
                "deleting: "
                + fanout.applied_summary(results).split("; ", 1)[-1]
                + f" (annotate {ORPHAN_ANNOTATION}=true to leave them)",
            )
            return await self._report(obj, builder, Outcome(True, fanout.failures(results)))
        if failed:
            log.warning("%s: orphaned on %s", key, ", ".join(r.cluster for r in failed))
        rest = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            await anyio.to_thread.run_sync(self._set_finalizers, obj, rest)
        except ApiError as exc:
            if not exc.not_found:
                raise
        self.members.forget(key)
        log.info("%s: removed from %d clusters", key, len(results))
        return Outcome(False)


def _placed(target: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster": target.cluster}
    if target.layer:
        out["layer"] = target.layer
    if target.replicas is not None:
        out["replicas"] = target.replicas
    if target.score is not None:
        out["score"] = target.score
    return out
