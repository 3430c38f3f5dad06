"""The canary within an application reconcile, with its I/O: its next state from what the
canary clusters show and the metric checks, the stable revision kept on the hub, the
Events and the metrics. The decisions are :mod:`propagator.canary.machine`, what each
cluster runs :mod:`propagator.canary.running` (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from opentelemetry import trace

from api.application import ApplicationPropagation, Override
from api.charts import is_chart_release
from api.rollout import CANARY_ACTION_ANNOTATION
from api.selectors import selects
from fleet.snapshot import FleetSnapshot
from kube.connection import KubeConnection
from propagator.canary.analysis import Analysis
from propagator.canary.copies import (
    SplitKinds,
    is_canary_copy,
    kind_key_of,
    name_of,
    template_of,
)
from propagator.canary.machine import (
    CanaryState,
    Rollback,
    Seen,
    action_of,
    advance,
    due_in,
    recorded_action,
)
from propagator.canary.plan import CanaryPlan
from propagator.canary.revisions import Source, StableRevisions, release_of, source_of
from propagator.canary.running import unsupported
from propagator.interpreter.registry import Interpreters
from propagator.observability.events import record_event
from propagator.observability.metrics import Metrics
from propagator.work.members import MemberView
from propagator.work.table import WorkTable
from propagator.work.targets import Planned, Target

tracer = trace.get_tracer("propagator")


class CanaryPlanned(Planned, Protocol):
    """What the canary reads of the last plan."""

    @property
    def canary(self) -> CanaryPlan | None: ...


PHASES = ("Progressing", "Paused", "Promoting", "Succeeded", "RolledBack", "Aborted")


def templates_differ(stable: Source, latest: Source, kinds: SplitKinds) -> bool:
    """Whether a workload both revisions have runs another pod template in the latest,
    or the overrides changed (they may patch a template)."""
    if stable.get("overrides") != latest.get("overrides"):
        return True

    def templates(source: Source) -> dict[tuple[str, str, str], Any]:
        # A chart's pod templates are known only once rendered: its release (version,
        # digest, values) stands for them.
        return {
            (*kind_key_of(w), name_of(w)): w
            if is_chart_release(w)
            else template_of(w, kinds[kind_key_of(w)])
            for w in source.get("workloads") or []
            if kind_key_of(w) in kinds or is_chart_release(w)
        }

    before = templates(stable)
    return any(before.get(k, t) != t for k, t in templates(latest).items())


class CanaryDriver:
    """Runs the canaries of the applications one reconciler plans."""

    def __init__(
        self,
        hub: KubeConnection,
        table: WorkTable,
        view: MemberView,
        metrics: Metrics,
        analysis: Analysis,
        interpreters: Interpreters,
    ) -> None:
        self.hub, self.table, self.view, self.metrics = hub, table, view, metrics
        self.revisions = StableRevisions(hub)
        self.analysis = analysis
        self.interpreters = interpreters

    def forget(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        self.revisions.forget(namespace, name)
        self.analysis.forget(key)

    # -- the next state -------------------------------------------------------------------

    async def begin(
        self,
        app: ApplicationPropagation,
        obj: Mapping[str, Any],
        objects: Sequence[Mapping[str, Any]],
        targets: Sequence[Target],
        snapshot: FleetSnapshot,
        last: CanaryPlanned | None,
        key: str,
        now: float,
        overrides: Sequence[Override] | None = None,
    ) -> CanaryPlan | None:
        """The canary of this plan (None without ``spec.canary``): its next state, from what
        the last plan's clusters show and the metric checks measured now (nothing is
        written: see :meth:`commit`). ``objects`` and ``overrides`` (default: the spec's)
        are the revision rolled out. Raises ApiError (the hub)."""
        canary = app.spec.canary
        if canary is None:
            return None
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        before = last.canary.state if last is not None and last.canary is not None else None
        if before is None:
            before = CanaryState.from_status((obj.get("status") or {}).get("canary"))
        kinds = self._split_kinds(objects, targets, snapshot)
        latest = source_of(
            objects,
            [
                o.model_dump(by_alias=True, exclude_none=True)
                for o in (app.spec.overrides if overrides is None else overrides)
            ],
            kinds,
        )
        release = release_of(latest)
        before, stable = await self._stable(namespace, name, before, release)
        clusters = frozenset(
            t.cluster
            for t in targets
            if canary.cluster_selector is None
            or (
                t.cluster in snapshot.clusters
                and selects(canary.cluster_selector, snapshot.clusters[t.cluster].labels)
            )
        )
        seen = None
        if last is not None and last.canary is not None and last.canary.state == before:
            seen = self.seen(key, last)  # what the clusters show of the state planned last
        finding = None
        checks = canary.analysis.metrics
        if checks and before is not None and before.phase in ("Progressing", "Paused"):
            labels = {
                c: dict(snapshot.clusters[c].labels) for c in clusters if c in snapshot.clusters
            }
            with tracer.start_as_current_span("canary analysis"):
                finding = await self.analysis.measure(key, namespace, before, checks, labels, now)
        value = (meta.get("annotations") or {}).get(CANARY_ACTION_ANNOTATION)
        action, problem = action_of(value, before.last_action if before else None)
        state, rollback = advance(
            before,
            canary,
            release,
            lambda: stable is None or templates_differ(stable, latest, kinds),
            clusters,
            seen,
            action,
            now,
            finding,
        )
        if value and recorded_action(value) != (before.last_action if before else None):
            state = dataclasses.replace(
                state, last_action=recorded_action(value), message=problem or state.message
            )
        return CanaryPlan(
            canary,
            state,
            clusters,
            release,
            None if state.stable == release else stable,
            unsupported(objects, kinds, self.interpreters.divides),
            before,
            rollback,
            latest,
            kinds,
        )

    def _split_kinds(
        self,
        objects: Sequence[Mapping[str, Any]],
        targets: Sequence[Target],
        snapshot: FleetSnapshot,
    ) -> SplitKinds:
        """The kinds of ``objects`` a canary runs as two copies, by their rules (with a
        chart among them, whose objects are known only once rendered: of every kind the
        targets serve)."""
        keys = {kind_key_of(o) for o in objects}
        if any(is_chart_release(o) for o in objects):
            for t in targets:
                if (cluster := snapshot.clusters.get(t.cluster)) is not None:
                    keys |= cluster.api_enablements
        out = {}
        for key in sorted(keys):
            if (fields := self.interpreters.canary_fields(*key)) is not None:
                out[key] = fields
        return out

    async def _stable(
        self, namespace: str, name: str, before: CanaryState | None, release: str
    ) -> tuple[CanaryState | None, Source | None]:
        """The stable revision's source from the hub, when the state names one other than
        ``release``; a state whose stable revision is no longer there says so."""
        if before is None or before.stable is None or before.stable == release:
            return before, None
        stable = await self.revisions.get(namespace, name, before.stable)
        if stable is None:  # deleted from the hub: nothing to render the stable copy from
            before = dataclasses.replace(
                before,
                stable=None,
                message=f"stable revision {before.stable} is no longer on the hub",
            )
        return before, stable

    async def commit(self, obj: Mapping[str, Any], plan: CanaryPlan, now: float) -> None:
        """Once the plan goes ahead (rendered, within the tenant's bounds): keep a new stable
        revision on the hub, and the Events and metrics of the move. Raises ApiError."""
        state, before = plan.state, plan.before
        new_stable = state.stable == plan.release and (
            before is None or before.stable != plan.release
        )
        if new_stable and plan.latest is not None:
            await self.revisions.put(obj, plan.release, plan.latest)
        await self._announce(obj, before, state, plan.rollback, len(plan.spec.steps), now)

    def seen(self, key: str, plan: CanaryPlanned) -> dict[str, Seen]:
        """What each cluster of ``plan`` shows of it: applied or not, and the health of its
        stable and canary copies from the member's caches."""
        namespace = key.partition("/")[0]
        out = {}
        for t in plan.targets:
            rendered = plan.rendered.get(t.cluster) or []
            state = self.table.state(key, t.cluster)
            applied = (
                state is not None
                and state.applied
                and state.revision == plan.revisions.get(t.cluster)
            )
            kinds = plan.canary.kinds if plan.canary is not None else {}
            workloads = [o for o in rendered if kind_key_of(o) in kinds]
            copies = [o for o in workloads if is_canary_copy(o, kinds)]
            stable = [o for o in workloads if not is_canary_copy(o, kinds)]
            out[t.cluster] = Seen(
                applied,
                self.view.health(t.cluster, stable, namespace),
                self.view.health(t.cluster, copies, namespace) if copies else None,
            )
        return out

    def due(self, key: str, plan: CanaryPlanned, now: float) -> float | None:
        """After a status refresh: plan again at once when what the clusters show moves the
        canary on, else when its pause or deadline ends (None: nothing is due)."""
        if plan.canary is None or not plan.canary.state.running:
            return None
        s, canary = plan.canary.state, plan.canary.spec
        checks = canary.analysis.metrics
        finding = None
        if checks:
            finding = self.analysis.finding(key, s, checks, plan.canary.canary_clusters)
        moved, _ = advance(
            s,
            canary,
            plan.canary.release,
            lambda: True,
            plan.canary.canary_clusters,
            self.seen(key, plan),
            None,
            now,
            finding,
        )
        if not moved.at_same_stage(s) or moved.phase != s.phase:
            return 0.0
        due = [due_in(moved, canary, now), self.analysis.next_due(key, checks, now)]
        return min((d for d in due if d is not None), default=None)

    # -- status, events, metrics ----------------------------------------------------------

    async def _announce(
        self,
        obj: Mapping[str, Any],
        before: CanaryState | None,
        after: CanaryState,
        rollback: Rollback | None,
        steps: int,
        now: float,
    ) -> None:
        """Metrics, Events, and a span for each step that ended (its whole duration)."""
        meta = obj["metadata"]
        labels = (meta.get("namespace", "default"), meta["name"])
        if (
            before is not None
            and before.running
            and before.step_started_at is not None
            and (before.step, before.canary, before.phase)
            != (after.step, after.canary, after.phase)
        ):
            span = tracer.start_span(
                "canary step",
                start_time=int(before.step_started_at * 1e9),
                attributes={
                    "application": "/".join(labels),
                    "step": before.step,
                    "weight": before.weight,
                    "revision": before.canary or "",
                    "next": after.phase,
                },
            )
            span.end(end_time=int(max(now, before.step_started_at) * 1e9))
        self.metrics.canary_weight.labels(*labels).set(after.weight if after.running else 0)
        for phase in PHASES:
            self.metrics.canary_phase.labels(*labels, phase).set(1 if phase == after.phase else 0)
        if before is not None and before.at_same_stage(after) and before.phase == after.phase:
            return
        if rollback is not None:
            self.metrics.canary_rollbacks.labels(rollback.reason).inc()
            await record_event(self.hub, obj, "Warning", "CanaryRolledBack", after.message)
        elif after.phase in ("Progressing",) and (
            before is None
            or before.step != after.step
            or before.canary != after.canary
            or before.phase != after.phase
        ):
            await record_event(
                self.hub,
                obj,
                "Normal",
                "CanaryStep",
                f"step {after.step + 1} of {steps}: weight {after.weight} on the canary "
                f"clusters (revision {after.canary})",
            )
        elif after.phase != (before.phase if before else None) and after.phase != "Progressing":
            reason = {"Paused": "CanaryPaused", "Promoting": "CanaryPromoting"}.get(
                after.phase, f"Canary{after.phase}"
            )
            kind = "Warning" if after.phase in ("Aborted",) else "Normal"
            await record_event(self.hub, obj, kind, reason, after.message)
