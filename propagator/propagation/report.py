"""The status of an ApplicationPropagation from its plan and the member syncs' results:
placement, a line per cluster, ``Applied``, ``QuotaExceeded`` from the members and
``Available``."""

from __future__ import annotations

from typing import Any

from fleet.informer import cache_key
from propagator.propagation.plan import MemberAccess, Plan
from propagator.propagation.results import applied_summary, failures
from propagator.propagation.status import ClusterState, StatusBuilder, availability
from propagator.propagation.targets import Target
from propagator.propagation.work import SyncState, WorkTable


def plan_status(
    obj: dict[str, Any], plan: Plan, table: WorkTable, members: MemberAccess, now: str
) -> dict[str, Any]:
    """The status of ``obj`` for ``plan`` with the current sync states."""
    builder = StatusBuilder(obj, now)
    for condition in plan.conditions:
        builder.condition(*condition)
    if plan.rebalanced is not None:
        builder.status["rebalanced"] = plan.rebalanced
    if plan.evicted_from or builder.status.get("evicted"):
        builder.status["evicted"] = plan.evicted_from  # [] clears it (a merge patch)
    if plan.targets:
        builder.status["placement"] = [_placed(t) for t in plan.targets]
        _cluster_status(obj, plan, table, members, builder)
    return builder.build()


def _cluster_status(
    obj: dict[str, Any],
    plan: Plan,
    table: WorkTable,
    members: MemberAccess,
    builder: StatusBuilder,
) -> None:
    """Per-cluster lines, ``Applied``, ``Available`` and ``propagatedKinds``."""
    key = cache_key(obj)
    namespace = obj["metadata"].get("namespace", "default")
    previous = {c["name"]: c for c in builder.previous.get("clusters") or []}
    target_states: dict[str, SyncState] = {}
    lines = []
    for t in plan.targets:
        state = table.state(key, t.cluster) or SyncState(plan.revisions[t.cluster])
        target_states[t.cluster] = state
        lines.append(
            ClusterState(
                t.cluster,
                state.applied,
                members.health(t.cluster, plan.rendered[t.cluster], namespace),
                state.attempts,
                state.error,
                plan.revisions[t.cluster]
                if state.applied
                else (previous.get(t.cluster) or {}).get("revision"),
            )
        )
    removal = {
        c: s for c in plan.removed if (s := table.state(key, c)) is not None and not s.applied
    }
    lines += [
        ClusterState(
            c,
            False,
            "Unknown",
            s.attempts,
            _removing(plan.evicting.get(c), s.error),
            (previous.get(c) or {}).get("revision"),
        )
        for c, s in removal.items()
    ]
    lines += [
        ClusterState(
            c,
            False,
            "Unknown",
            0,
            f"evicting: {why}; removed once the replacement is Available and it answers",
            (previous.get(c) or {}).get("revision"),
        )
        for c, why in sorted(plan.holding.items())
    ]
    builder.clusters(lines, len(plan.targets))
    blocking = {c: s for c, s in removal.items() if c not in plan.evicting}
    done = not blocking and all(s.applied for s in target_states.values())
    # Kinds leave the list only once no cluster may hold them (evicted ones included).
    settled = done and not removal and not plan.holding
    builder.status["propagatedKinds"] = sorted(plan.desired_kinds if settled else plan.kinds)
    message = applied_summary(target_states)
    removal_failures = failures({c: s for c, s in blocking.items() if s.failed})
    if removal_failures is not None:
        message += "; not yet removed from " + "; ".join(
            str(e) for e in removal_failures.exceptions
        )
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
        over = [f"{c}: {s.error}" for c, s in sorted(target_states.items()) if s.quota_exceeded]
        over += [
            f"{t.cluster}: {refusal}"
            for t in plan.targets
            for refusal in members.quota_refusals(t.cluster, plan.rendered[t.cluster], namespace)
        ]
        if over:
            builder.condition(
                "QuotaExceeded",
                True,
                "QuotaExceeded",
                "refused by the member's quota on " + "; ".join(over),
            )
        else:
            builder.condition("QuotaExceeded", False, "WithinQuota", "within the quota")
    available, why, text = availability(lines, plan.rendered)
    builder.condition("Available", available, why, text)


def _removing(evicted: str | None, error: str | None) -> str:
    if evicted is not None:
        return f"evicting: {evicted}; removed once it answers" + (f" ({error})" if error else "")
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
