"""The status of an ApplicationPropagation from its plan and the member syncs' results:
placement, a line per cluster, ``Applied``, ``QuotaExceeded`` from the members and
``Available``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube.keys import cache_key
from propagator.canary.running import canary_status
from propagator.conditions import by_message, iso
from propagator.failover.decisions import unhealthy_since
from propagator.failover.state import unhealthy_clocks
from propagator.interpreter.aggregate import combine_objects
from propagator.interpreter.health import HEALTHS, WorkloadHealth
from propagator.propagation.charts import CHARTS_CONDITION, chart_status, charts_by_cluster
from propagator.propagation.ownership import kept
from propagator.propagation.plan import Plan
from propagator.propagation.results import applied_summary, failed_on, failures
from propagator.propagation.selected import brings
from propagator.propagation.statusbuilder import ClusterLine, StatusBuilder, availability
from propagator.rollout.status import rollout_status
from propagator.tenancy.policy import describe
from propagator.work.members import MemberView
from propagator.work.table import SyncState, WorkTable
from propagator.work.targets import Target

KEPT_LISTED = 100
"""Objects kept on delete that ``status.keptOnDelete`` names."""
OBJECTS_COMBINED = 100
"""Objects whose fields ``status.objects`` combines across clusters (the first, by
apiVersion, kind, namespace and name)."""


def plan_status(
    obj: dict[str, Any], plan: Plan, table: WorkTable, view: MemberView, now: float
) -> dict[str, Any]:
    """The status of ``obj`` for ``plan`` with the current sync states, at ``now`` (epoch
    seconds)."""
    builder = StatusBuilder(obj, iso(now))
    for condition in plan.conditions:
        builder.condition(*condition)
    if not brings(obj):
        builder.drop("Dependencies")
    charted = bool(((obj.get("spec") or {}).get("resources") or {}).get("charts"))
    if not charted:
        builder.drop(CHARTS_CONDITION)
    failover = plan.failover
    if failover.rebalanced is not None:
        builder.status["rebalanced"] = failover.rebalanced
    if failover.evicted or builder.status.get("evicted"):
        builder.status["evicted"] = failover.evicted_status()  # [] clears it (a merge patch)
    if plan.targets:
        builder.status["placement"] = [_placed(t) for t in plan.targets]
        _cluster_status(obj, plan, table, view, builder, now)
    marked = {describe(o) for objs in plan.rendered.values() for o in objs if kept(o)}
    if marked or builder.status.get("keptOnDelete"):
        builder.status["keptOnDelete"] = sorted(marked)[:KEPT_LISTED]  # [] clears it
    if plan.rollout is not None:
        builder.status["rollout"] = rollout_status(plan.rollout)
    if plan.charts or (not charted and builder.status.get("charts")):
        # [] clears it; kept as it was while a chart cannot be resolved
        builder.status["charts"] = [chart_status(c) for c in plan.charts]
    if plan.canary is not None:
        namespace = obj["metadata"].get("namespace", "default")
        builder.status["canary"] = canary_status(
            plan.canary, plan.targets, plan.rendered, view, namespace
        )
    return builder.build()


def _cluster_status(
    obj: dict[str, Any],
    plan: Plan,
    table: WorkTable,
    view: MemberView,
    builder: StatusBuilder,
    now: float,
) -> None:
    """Per-cluster lines, ``Applied``, ``QuotaExceeded``, ``Available`` and
    ``propagatedKinds``."""
    key = cache_key(obj)
    namespace = obj["metadata"].get("namespace", "default")
    previous = {c["name"]: c for c in builder.previous.get("clusters") or []}
    lines, states = _target_lines(key, namespace, plan, table, view, builder, now)
    removal = {
        c: s for c in plan.removed if (s := table.state(key, c)) is not None and not s.applied
    }
    lines += _leaving_lines(plan, removal, previous)
    builder.clusters(lines, len(plan.targets))
    builder.status["objects"] = combine_objects(  # [] clears it (a merge patch)
        ((o.api_version, o.kind, o.namespace, o.name), dict(o.fields), dict(o.aggregates))
        for line in lines
        for o in line.objects
    )[:OBJECTS_COMBINED]
    _applied(builder, plan, states, removal)
    if plan.heal and all(s.healed == plan.heal for s in states.values()):
        builder.status["synced"] = plan.heal
    if not any(c[0] == "QuotaExceeded" for c in plan.conditions):
        _member_quota(builder, plan, states, view, namespace)
    available, why, text = availability(lines, plan.rendered)
    builder.condition("Available", available, why, text)


def _target_lines(
    key: str,
    namespace: str,
    plan: Plan,
    table: WorkTable,
    view: MemberView,
    builder: StatusBuilder,
    now: float,
) -> tuple[list[ClusterLine], dict[str, SyncState]]:
    """A line per target cluster, and its sync state."""
    previous = {c["name"]: c for c in builder.previous.get("clusters") or []}
    states: dict[str, SyncState] = {}
    lines = []
    clocks = unhealthy_clocks(builder.previous)
    charts = charts_by_cluster(plan.rollout, [t.cluster for t in plan.targets])
    for t in plan.targets:
        state = table.state(key, t.cluster) or SyncState(plan.revisions[t.cluster])
        states[t.cluster] = state
        judged = view.judge(t.cluster, plan.rendered[t.cluster], namespace)
        health, message = judged.health, judged.message
        if state.carried and health == "Unknown":  # the caches have not listed yet
            reported = _reported_health(previous.get(t.cluster))
            if reported is not None:
                health = reported
                message = str((previous.get(t.cluster) or {}).get("healthMessage") or "")
        since = None
        if plan.unhealthy_after_s is not None:
            since = unhealthy_since(health, clocks.get(t.cluster), now)
        lines.append(
            ClusterLine(
                t.cluster,
                state.applied,
                health,
                state.attempts,
                state.error,
                plan.revisions[t.cluster]
                if state.applied
                else (previous.get(t.cluster) or {}).get("revision"),
                iso(since) if since is not None else None,
                plan.failover.move_status(t.cluster),
                message,
                judged.objects,
                state.drift,
                iso(state.drift_since) if state.drift_since is not None else None,
                plan.rollout.assignment.get(t.cluster) if plan.rollout else None,
                plan.rollout.grouping.index_of(t.cluster) if plan.rollout else None,
                plan.rollout is not None and t.cluster in plan.rollout.held,
                charts.get(t.cluster, ()),
            )
        )
    return lines, states


def _leaving_lines(
    plan: Plan, removal: Mapping[str, SyncState], previous: Mapping[str, Mapping[str, Any]]
) -> list[ClusterLine]:
    """A line per cluster the application is being removed from, and per cluster it
    left that keeps what runs there until it is replaced."""
    lines = [
        ClusterLine(
            c,
            False,
            "Unknown",
            s.attempts,
            _removing(plan.unanswered.get(c), s.error),
            (previous.get(c) or {}).get("revision"),
        )
        for c, s in removal.items()
    ]
    lines += [
        ClusterLine(
            c,
            False,
            "Unknown",
            0,
            None,
            (previous.get(c) or {}).get("revision"),
            evicting=plan.failover.move_status(c),
        )
        for c in plan.leaving()
    ]
    return lines


def _applied(
    builder: StatusBuilder,
    plan: Plan,
    states: Mapping[str, SyncState],
    removal: Mapping[str, SyncState],
) -> None:
    """``Applied`` and ``propagatedKinds``."""
    blocking = {c: s for c, s in removal.items() if c not in plan.unanswered}
    done = not blocking and all(s.applied for s in states.values())
    # Kinds leave the list only once no cluster may hold them (evicted ones included).
    settled = done and not removal and not plan.leaving()
    builder.status["propagatedKinds"] = sorted(plan.desired_kinds if settled else plan.kinds)
    message = applied_summary(states)
    removal_failures = failures({c: s for c, s in blocking.items() if s.failed})
    if removal_failures is not None:
        message += "; not yet removed from " + failed_on(removal_failures)
    if done:
        reason = "Applied"
    elif any(s.conflict for s in states.values()):
        reason = "Conflict"
    elif any(s.failed for s in (*states.values(), *blocking.values())):
        reason = "ApplyFailed"
    else:
        reason = "Applying"
    builder.condition("Applied", done, reason, message)


def _member_quota(
    builder: StatusBuilder,
    plan: Plan,
    states: Mapping[str, SyncState],
    view: MemberView,
    namespace: str,
) -> None:
    """``QuotaExceeded`` from the members: writes their quotas refused, and workloads
    whose pods they refuse."""
    over = [(c, str(s.error)) for c, s in sorted(states.items()) if s.quota_exceeded]
    over += [
        (t.cluster, refusal)
        for t in plan.targets
        for refusal in view.quota_refusals(t.cluster, plan.rendered[t.cluster], namespace)
    ]
    if over:
        builder.condition(
            "QuotaExceeded",
            True,
            "QuotaExceeded",
            "refused by the member's quota on " + by_message(over, "refusals"),
        )
    else:
        builder.condition("QuotaExceeded", False, "WithinQuota", "within the quota")


def _reported_health(line: Mapping[str, Any] | None) -> WorkloadHealth | None:
    """The health a status line shows, if it is one."""
    health = (line or {}).get("health")
    return next((h for h in HEALTHS if h == health), None)


def _removing(unanswered: str | None, error: str | None) -> str:
    if unanswered is not None:
        return f"removing once it answers: {unanswered}" + (f" ({error})" if error else "")
    return f"removing: {error}" if error else "removing"


def _placed(target: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"cluster": target.cluster}
    if target.layer:
        out["layer"] = target.layer
    if target.replicas is not None:
        out["replicas"] = target.replicas
    if target.score is not None:
        out["score"] = target.score
    return out
