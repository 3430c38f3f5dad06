"""Where an application goes and what each cluster gets, within the tenant's bounds:
place → canary's next state → render → tenant boundary → tenant quota; placed again
without the clusters where it does not run yet and where, as rendered, it asks more than
the tenant's quota leaves (a templated value, an override, a LimitRange default)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from api.common import duration_seconds
from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.canary.driver import CanaryDriver
from propagator.canary.machine import RUNNING
from propagator.canary.plan import CanaryPlan
from propagator.charts.releases import ChartError
from propagator.failover.driver import FailoverDriver, FailoverPass
from propagator.observability.metrics import Metrics
from propagator.propagation.charts import chart_stop
from propagator.propagation.placement import Placer
from propagator.propagation.plan import Given, Plan, Stop
from propagator.propagation.rendering import MovedRender, Renderer
from propagator.propagation.statusnotes import not_applied
from propagator.render.manifests import RenderError
from propagator.rollout.driver import Aim, RolloutDriver, RolloutPlan
from propagator.rollout.machine import CanaryGate
from propagator.tenancy.boundary import check_rendered
from propagator.tenancy.hubquota import QuotaAdmission, QuotaRefusal
from propagator.tenancy.policy import Forbidden, Platform, TenantPolicy
from propagator.work.targets import Target

PLACE_AGAIN_LIMIT = 2
"""How many times an application whose rendering asks more than the tenant's quota leaves
on some clusters is placed again without them before it is refused: each rendering can
show a new one (a templated value, an override, a LimitRange default)."""


@dataclasses.dataclass(frozen=True)
class Chosen:
    """Where the application goes and what each cluster gets: the outcome of placing,
    rendering and checking it within its tenant's bounds."""

    targets: list[Target]
    moved: MovedRender
    canary: CanaryPlan | None
    rollout: RolloutPlan
    over_room: dict[str, str]
    """Clusters it was placed without because, as rendered, it asks more there than the
    tenant's quota leaves."""


class Chooser:
    """Chooses for the applications one reconciler plans."""

    def __init__(
        self,
        hub: KubeConnection,
        platform: Platform,
        admission: QuotaAdmission,
        placer: Placer,
        renderer: Renderer,
        failover: FailoverDriver,
        canary: CanaryDriver,
        rollout: RolloutDriver,
        metrics: Metrics,
    ) -> None:
        self.hub = hub
        self.rollout = rollout
        self.platform = platform
        self.admission = admission
        self.placer = placer
        self.renderer = renderer
        self.failover = failover
        self.canary = canary
        self.metrics = metrics

    async def choose(self, given: Given, step: FailoverPass, plan: Plan) -> Chosen:
        """Place, render and check the application; placed again without the clusters
        where it does not run yet and where, as rendered, it asks more than the tenant's
        quota leaves (a templated value, an override, a LimitRange default). Adds the
        placement's conditions (and failover's decision) to ``plan``."""
        g = given
        app, snapshot, tenant, previous = g.app, g.snapshot, g.tenant, g.previous
        own, planned = self.admission.use(tenant, g.key, snapshot)
        over_room: dict[str, str] = {}
        runs_on = {t.cluster for t in g.running}
        refusal: QuotaRefusal | None = None
        aim = await self._aim(given)
        scheduled = len(plan.conditions)
        for attempt in range(PLACE_AGAIN_LIMIT + 1):
            placed = self.placer.place(
                app, g.objects, snapshot, g.running, tenant, own, planned, step.decision, over_room
            )
            plan.capacity_bound = placed.capacity_bound
            del plan.conditions[scheduled:]  # the last placement's conditions only
            if not placed.targets and refusal is not None:
                # Placed without where it asks too much, nothing is left: refused as it was.
                raise _refused(plan, previous, refusal)
            plan.conditions.extend(placed.conditions)
            if not placed.targets:
                # No fleet, or nothing fits: what runs stays where it is (no apply, no prune).
                _, _, reason, why = next(
                    (c for c in placed.conditions if c[0] == "Scheduled"),
                    ("Scheduled", False, "Unschedulable", "nothing placed"),
                )
                not_applied(plan, previous, reason, why)
                raise Stop([])
            if attempt == 0:
                plan.failover = step.decision.state
                if app.spec.failover.application is not None:
                    plan.unhealthy_after_s = duration_seconds(
                        app.spec.failover.application.unhealthy_after
                    )
                await self.failover.announce(g.obj, step)
            canary = await self._canary(given, placed.targets, step, aim)
            rollout = await self._rollout(given, aim, placed.targets, canary, step)
            moved = await self._render(given, placed.targets, canary, rollout, step)
            await self._check_boundary(g.tenancy, moved, g.namespace)
            refusal = self.admission.check(
                tenant, own, planned, moved.rendered, snapshot, g.namespace
            )
            if refusal is None:
                return Chosen(placed.targets, moved, canary, rollout, over_room)
            again = {c: why for c, why in refusal.over.items() if c not in over_room}
            # Where it runs already, it is not taken away for want of room: refused whole,
            # what runs stays as it is.
            if not again or attempt == PLACE_AGAIN_LIMIT or again.keys() & runs_on:
                raise _refused(plan, previous, refusal)
            over_room.update(again)  # placed again without them
        raise AssertionError("unreachable")  # pragma: no cover

    async def _aim(self, g: Given) -> Aim:
        """The revision this plan rolls out; Stop (retried) when the hub's revisions
        cannot be read."""
        try:
            return await self.rollout.aim(g.app, g.obj, g.objects, g.last)
        except ApiError as exc:
            why = f"revisions: {exc}"
            raise Stop([("Applied", False, "HubError", why)], exc, retry=True) from exc

    async def _canary(
        self, g: Given, targets: Sequence[Target], step: FailoverPass, aim: Aim
    ) -> CanaryPlan | None:
        """The canary's next state, for the revision rolled out; Stop (retried) when the
        hub's stable revision cannot be read."""
        try:
            return await self.canary.begin(
                g.app,
                g.obj,
                aim.target.objects,
                targets,
                g.snapshot,
                g.last,
                g.key,
                step.now,
                aim.target.overrides,
            )
        except ApiError as exc:
            why = f"{exc}"
            raise Stop([("CanaryProgressing", False, "HubError", why)], exc, retry=True) from exc

    async def _rollout(
        self,
        g: Given,
        aim: Aim,
        targets: Sequence[Target],
        canary: CanaryPlan | None,
        step: FailoverPass,
    ) -> RolloutPlan:
        """The revision each cluster is to run; Stop (retried) when a kept revision
        cannot be read."""
        try:
            return await self.rollout.plan(
                aim,
                g.app,
                g.obj,
                targets,
                g.snapshot,
                g.last,
                g.key,
                step.now,
                canary_gate(canary),
                canary.canary_clusters if canary is not None else frozenset(),
            )
        except ApiError as exc:
            why = f"revisions: {exc}"
            raise Stop([("Applied", False, "HubError", why)], exc, retry=True) from exc

    async def _render(
        self,
        g: Given,
        targets: list[Target],
        canary: CanaryPlan | None,
        rollout: RolloutPlan,
        step: FailoverPass,
    ) -> MovedRender:
        """Each target's objects; Stop (not retried: the same inputs fail the same way)
        when a template, a chart, an override or the canary's composition fails (retried
        when a registry or the hub did not answer)."""
        try:
            return await self.renderer.render_moving(
                g.key, g.app, g.snapshot, targets, canary, rollout, self.failover, step
            )
        except RenderError as exc:
            why = f"{exc}; nothing was applied"
            raise Stop([("Applied", False, "RenderFailed", why)], exc) from exc
        except ChartError as exc:
            raise chart_stop(exc) from exc
        except ApiError as exc:  # a chart's credentials or values files could not be read
            why = f"resources: {exc}"
            raise Stop([("Applied", False, "ResolveFailed", why)], exc, retry=True) from exc

    async def _check_boundary(
        self, tenancy: TenantPolicy, moved: MovedRender, namespace: str
    ) -> None:
        """Stop when a rendered object leaves the tenant's boundary (Forbidden), or the
        hub's discovery did not answer (retried, nothing written meanwhile)."""
        try:
            await check_rendered(
                self.hub,
                tenancy,
                self.platform,
                moved.rendered,
                namespace,
                moved.revisions,
                self.admission.interpreters,
            )
        except Forbidden as exc:
            raise forbidden(exc, self.metrics) from exc
        except ApiError as exc:
            why = f"discovery: {exc}"
            raise Stop([("Applied", False, "ResolveFailed", why)], exc, retry=True) from exc


def canary_gate(canary: CanaryPlan | None) -> CanaryGate:
    """Where the canary stands for the waves: none, running (it goes first), done
    (promoted) or failed (its revision rolled back or aborted)."""
    if canary is None:
        return "none"
    state = canary.state
    if state.phase in ("RolledBack", "Aborted") and state.canary == canary.release:
        return "failed"
    return "running" if state.phase in RUNNING and state.phase != "Promoting" else "done"


def forbidden(exc: Forbidden, metrics: Metrics) -> Stop:
    """Refuse the whole application: nothing is applied or pruned anywhere; what an
    earlier allowed plan put on the members stays as it is."""
    metrics.tenant_rejections.labels(exc.policy.tenant or "", "forbidden").inc()
    return Stop([("Applied", False, "Forbidden", f"{exc}; nothing was applied")], exc)


def _refused(plan: Plan, previous: Mapping[str, Any], refusal: QuotaRefusal) -> Stop:
    """Refused for the tenant's quota: what runs stays as it is."""
    plan.conditions.append(("QuotaExceeded", True, refusal.reason, refusal.message))
    not_applied(plan, previous, refusal.reason, refusal.message)
    return Stop([])
