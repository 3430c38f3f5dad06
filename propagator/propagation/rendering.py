"""The render step of a reconcile: each target cluster's objects, rendered in the bounded
worker unless the application's last renders had the same inputs; with a canary, as its
state has each cluster run them; with graceful moves, keeping the replicas that move
until they may go."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from api.application import ApplicationPropagation, Override
from api.charts import is_chart_release
from fleet.snapshot import FleetSnapshot
from kube.connection import KubeConnection
from propagator.canary.copies import compose
from propagator.canary.plan import CanaryPlan
from propagator.canary.running import compose_clusters, stable_request
from propagator.charts.releases import ChartReleases
from propagator.failover.driver import FailoverDriver, FailoverPass
from propagator.failover.moves import Move, with_kept_replicas
from propagator.interpreter.registry import Interpreters
from propagator.observability.metrics import Metrics
from propagator.render.helm import ChartRenderer
from propagator.render.manifests import ApplicationRef
from propagator.render.memo import RenderMemo
from propagator.render.worker import RenderTarget, render_bounded
from propagator.rollout.driver import RolloutPlan
from propagator.work.autoscalers import divide_autoscalers
from propagator.work.objects import revision_of
from propagator.work.release import scale_fields
from propagator.work.targets import Target

tracer = trace.get_tracer("propagator")
Rendered = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class MovedRender:
    """The objects per target with the replicas the moves still keep."""

    rendered: Rendered
    revisions: dict[str, str]
    kept: dict[str, Move]
    """The moves still in progress."""


class Renderer:
    """Renders the applications one reconciler plans, remembering their last renders."""

    def __init__(
        self,
        timeout_s: float,
        max_bytes: int,
        metrics: Metrics,
        interpreters: Interpreters,
        hub: KubeConnection,
        charts: ChartReleases,
        renderer: ChartRenderer,
    ) -> None:
        self.memo = RenderMemo(
            functools.partial(
                render_bounded, timeout_s=timeout_s, max_bytes=max_bytes, renderer=renderer
            )
        )
        self.metrics = metrics
        self.interpreters = interpreters
        self.hub = hub
        self.charts = charts

    def forget(self, key: str) -> None:
        self.memo.forget(key)

    async def render_moving(
        self,
        key: str,
        app: ApplicationPropagation,
        snapshot: FleetSnapshot,
        targets: list[Target],
        canary: CanaryPlan | None,
        rollout: RolloutPlan,
        failover: FailoverDriver,
        step: FailoverPass,
    ) -> MovedRender:
        """Render ``targets`` (each the revision the rollout has it run) keeping the
        replicas that move gracefully, and release the moves that may go (the replacement
        Available, or the grace period over); raises RenderError."""
        namespace = app.metadata.get("namespace", "default")
        moves = failover.moves(step, targets)
        rendered = await self.render(
            key, app, snapshot, with_kept_replicas(targets, moves), rollout, canary
        )
        revisions = _revisions(rendered)
        replaced = failover.replaced(key, targets, rendered, revisions, namespace, set(moves))
        kept, released = failover.settle(step, moves, replaced)
        if any(m.cluster in revisions and m.replicas is not None for m in released.values()):
            # a cluster that kept replicas now scales down to its placement
            rendered = await self.render(
                key, app, snapshot, with_kept_replicas(targets, kept), rollout, canary
            )
            revisions = _revisions(rendered)
        if replaced:
            failover.observe_released(step, released)
        return MovedRender(rendered, revisions, kept)

    async def render(
        self,
        key: str,
        app: ApplicationPropagation,
        snapshot: FleetSnapshot,
        targets: list[Target],
        rollout: RolloutPlan,
        canary: CanaryPlan | None = None,
    ) -> Rendered:
        """The objects for each target cluster, of the revision the rollout has it run,
        rendered in a bounded worker unless the application's last renders had the same
        inputs (with a canary: as its state has each cluster of the revision rolled out
        run them); raises RenderError at the first problem."""
        shared = app.spec.placement.replicas.mode != "Duplicated"  # Divided, Aggregated
        ref = ApplicationRef(app.metadata["name"], app.metadata.get("namespace", "default"))
        target = rollout.target_revision
        fields = (
            scale_fields(
                target.objects, self.interpreters, served_by(snapshot, targets, target.objects)
            )
            if shared
            else ()
        )
        revisions = (target, *rollout.others)
        charted = any(is_chart_release(o) for r in revisions for o in r.objects)
        facts = _facts(snapshot, targets, shared, fields, charted)
        runs = {c: rollout.assignment.get(c, target.number) for c in facts}
        with self.metrics.timed("render"), tracer.start_as_current_span("render"):
            rendered: Rendered = {}
            for revision in revisions:
                clusters = [facts[c] for c, n in runs.items() if n == revision.number]
                if clusters:
                    rendered |= await self._render(
                        key, ref, revision.objects, revision.overrides, clusters
                    )
            if shared:
                shares = {t.cluster: t.replicas or 0 for t in targets}
                rendered = divide_autoscalers(rendered, shares, fields)
            if canary is None:
                return rendered
            latest = {c: o for c, o in rendered.items() if runs[c] == target.number}
            request = stable_request(canary, latest)
            stable: Rendered = {}
            if request is not None:
                stable = await self._render(
                    key,
                    ref,
                    request.workloads,
                    request.overrides,
                    [facts[c] for c in request.clusters],
                )
            composed = compose_clusters(canary, latest, stable)
            # A cluster the rollout has not reached runs its revision whole, as the
            # stable track (its Service selects it as before).
            for cluster, objects in rendered.items():
                if cluster not in composed:
                    composed[cluster] = compose(objects, {}, "latest", 0, canary.kinds)
            return composed

    async def _render(
        self,
        key: str,
        ref: ApplicationRef,
        objects: Sequence[Mapping[str, Any]],
        overrides: Sequence[Override],
        clusters: Sequence[RenderTarget],
    ) -> Rendered:
        """One revision's objects for ``clusters``, its charts given their archives and
        values files first; raises RenderError, ChartError or ApiError (the hub)."""
        materialized = await self.charts.materialize(objects, ref.namespace, self.hub)
        return await self.memo.render(key, materialized, overrides, clusters, ref)


def _facts(
    snapshot: FleetSnapshot,
    targets: Sequence[Target],
    shared: bool,
    fields: tuple[tuple[str, str, str], ...],
    charted: bool,
) -> dict[str, RenderTarget]:
    """What a template may read of each target cluster (its replicas when the application
    divides them, and where they are written; for charts, its Kubernetes version and what
    it serves)."""
    facts = {}
    for t in targets:
        c = snapshot.clusters[t.cluster]
        replicas = t.replicas if shared else None
        facts[t.cluster] = RenderTarget(
            c.name,
            dict(c.labels),
            c.layer,
            c.region,
            c.zone,
            c.provider,
            replicas,
            fields,
            c.kubernetes_version if charted else None,
            api_versions(c.api_enablements) if charted else (),
        )
    return facts


def served_by(
    snapshot: FleetSnapshot, targets: Iterable[Target], objects: Iterable[Mapping[str, Any]]
) -> set[tuple[str, str]]:
    """(apiVersion, kind) any of ``targets`` serves: the kinds a chart among ``objects`` may
    render (none without a chart)."""
    out: set[tuple[str, str]] = set()
    if not any(is_chart_release(o) for o in objects):
        return out
    for t in targets:
        cluster = snapshot.clusters.get(t.cluster)
        if cluster is not None:
            out |= cluster.api_enablements
    return out


def api_versions(enablements: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """``group/version`` and ``group/version/Kind`` of what a cluster serves, as Helm's
    ``--api-versions`` takes them (sorted: equal sets render once)."""
    out = set()
    for api_version, kind in enablements:
        out.add(api_version)
        out.add(f"{api_version}/{kind}")
    return tuple(sorted(out))


def _revisions(rendered: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, str]:
    return {c: revision_of(objs) for c, objs in rendered.items()}
