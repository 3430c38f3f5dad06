"""The status of an ApplicationPropagation from its plan and the member syncs' results:
placement, a line per cluster, ``Applied``, ``QuotaExceeded`` from the members and
``Available``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube.informer import cache_key
from propagator.canary.driver import canary_status
from propagator.conditions import by_message, iso
from propagator.failover.decisions import unhealthy_since
from propagator.failover.state import unhealthy_clocks
from propagator.propagation.plan import MemberAccess, Plan
from propagator.propagation.results import applied_summary, failed_on, failures
from propagator.propagation.statusbuilder import ClusterLine, StatusBuilder, availability
from propagator.work.table import SyncState, WorkTable
from propagator.work.targets import Target
from propagator.work.workloadhealth import HEALTHS, WorkloadHealth


def plan_status(
    obj: dict[str, Any], plan: Plan, table: WorkTable, members: MemberAccess, now: float
) -> dict[str, Any]:
    """The status of ``obj`` for ``plan`` with the current sync states, at ``now`` (epoch
    seconds)."""
    builder = StatusBuilder(obj, iso(now))
    for condition in plan.conditions:
        builder.condition(*condition)
    failover = plan.failover
    if failover.rebalanced is not None:
        builder.status["rebalanced"] = failover.rebalanced
    if failover.evicted or builder.status.get("evicted"):
        builder.status["evicted"] = failover.evicted_status()  # [] clears it (a merge patch)
    if plan.targets:
        builder.status["placement"] = [_placed(t) for t in plan.targets]
        _cluster_status(obj, plan, table, members, builder, now)
    canary = canary_status(plan, members, obj["metadata"].get("namespace", "default"))
    if canary is not None:
        builder.status["canary"] = canary
    return builder.build()


def _cluster_status(
    obj: dict[str, Any],
    plan: Plan,
    table: WorkTable,
    members: MemberAccess,
    builder: StatusBuilder,
    now: float,
) -> None:
    """Per-cluster lines, ``Applied``, ``Available`` and ``propagatedKinds``."""
    key = cache_key(obj)
    namespace = obj["metadata"].get("namespace", "default")
    previous = {c["name"]: c for c in builder.previous.get("clusters") or []}
    target_states: dict[str, SyncState] = {}
    lines = []
    clocks = unhealthy_clocks(builder.previous)
    for t in plan.targets:
        state = table.state(key, t.cluster) or SyncState(plan.revisions[t.cluster])
        target_states[t.cluster] = state
        health = members.health(t.cluster, plan.rendered[t.cluster], namespace)
        if state.carried and health == "Unknown":  # the caches have not listed yet
            health = _reported_health(previous.get(t.cluster)) or health
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
            )
        )
    removal = {
        c: s for c in plan.removed if (s := table.state(key, c)) is not None and not s.applied
    }
    lines += [
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
    builder.clusters(lines, len(plan.targets))
    blocking = {c: s for c, s in removal.items() if c not in plan.unanswered}
    done = not blocking and all(s.applied for s in target_states.values())
    # Kinds leave the list only once no cluster may hold them (evicted ones included).
    settled = done and not removal and not plan.leaving()
    builder.status["propagatedKinds"] = sorted(plan.desired_kinds if settled else plan.kinds)
    message = applied_summary(target_states)
    removal_failures = failures({c: s for c, s in blocking.items() if s.failed})
    if removal_failures is not None:
        message += "; not yet removed from " + failed_on(removal_failures)
    if done:
        reason = "Applied"
    elif any(s.conflict for s in target_states.values()):
        reason = "Conflict"
    elif any(s.failed for s in (*target_states.values(), *blocking.values())):
        reason = "ApplyFailed"
    else:
        reason = "Applying"
    builder.condition("Applied", done, reason, message)
    if not any(c[0] == "QuotaExceeded" for c in plan.conditions):
        over = [(c, str(s.error)) for c, s in sorted(target_states.items()) if s.quota_exceeded]
        over += [
            (t.cluster, refusal)
            for t in plan.targets
            for refusal in members.quota_refusals(t.cluster, plan.rendered[t.cluster], namespace)
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
    available, why, text = availability(lines, plan.rendered)
    builder.condition("Available", available, why, text)


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
