"""What failover carries from one plan to the next — the rebalance acted on, the clusters
the application is kept off, the moves in progress — and one plan's failover decision.

The last plan carries the state; the status keeps it across controller restarts
(:meth:`FailoverState.from_status` reads it back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from api.common import duration_seconds
from api.failover import EvictionReason, Failover
from fleet.snapshot import FleetSnapshot, epoch_of
from propagator.conditions import iso
from propagator.failover.decisions import (
    EvictedFor,
    Eviction,
    evictions,
    failing_back,
    unhealthy_evictions,
)
from propagator.failover.moves import Cause, Move
from propagator.interpreter.health import WorkloadHealth

_REASONS = get_args(EvictionReason)


@dataclass(frozen=True)
class Evicted:
    """A cluster the application is kept off."""

    cluster: str
    reason: EvictedFor
    since: float


@dataclass
class FailoverState:
    rebalanced: str | None = None
    """The propagator.io/rebalance value last acted on."""
    evicted: dict[str, Evicted] = field(default_factory=dict)
    moves: dict[str, Move] = field(default_factory=dict)

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> FailoverState:
        """The state an earlier controller wrote (unreadable entries are skipped)."""
        evicted = {}
        for entry in status.get("evicted") or []:
            since = epoch_of(entry.get("since")) if isinstance(entry, Mapping) else None
            if since is not None and entry.get("reason") in (
                "ClusterUnreachable",
                "ApplicationUnhealthy",
            ):
                name = str(entry.get("cluster"))
                evicted[name] = Evicted(name, entry["reason"], since)
        moves = {}
        for line in status.get("clusters") or []:
            move = line.get("evicting") if isinstance(line, Mapping) else None
            if not isinstance(move, Mapping) or move.get("reason") not in _REASONS:
                continue
            since = epoch_of(move.get("since"))
            if since is None:
                continue
            name, replicas = str(line.get("name")), move.get("replicas")
            moves[name] = Move(
                name,
                move["reason"],
                since,
                str(move.get("message") or ""),
                replicas if isinstance(replicas, int) else None,
            )
        rebalanced = status.get("rebalanced")
        return cls(rebalanced if isinstance(rebalanced, str) else None, evicted, moves)

    def evicted_status(self) -> list[dict[str, Any]]:
        return [
            {"cluster": e.cluster, "reason": e.reason, "since": iso(e.since)}
            for _, e in sorted(self.evicted.items())
        ]

    def move_status(self, cluster: str) -> dict[str, Any] | None:
        move = self.moves.get(cluster)
        if move is None:
            return None
        out: dict[str, Any] = {
            "reason": move.reason,
            "since": iso(move.since),
            "message": move.message[:1024],
        }
        if move.replicas is not None:
            out["replicas"] = move.replicas
        return out


def unhealthy_clocks(status: Mapping[str, Any]) -> dict[str, float]:
    """Application failover's clock per cluster, as the status holds it."""
    out = {}
    for line in status.get("clusters") or []:
        since = epoch_of(line.get("unhealthySince")) if isinstance(line, Mapping) else None
        if since is not None:
            out[str(line.get("name"))] = since
    return out


@dataclass(frozen=True)
class FailoverDecision:
    """One plan's failover: where not to place the application, and why replicas move."""

    evicted: dict[str, Eviction]
    """Clusters evicted now (placed there, and beyond a toleration)."""
    returning: list[str]
    """Clusters failed back to now."""
    rebalance: str | None
    """A rebalance value to act on now."""
    state: FailoverState
    """The state once this plan is made (its moves are the carried ones until the
    placement is known)."""
    immediate: frozenset[str]
    """Evicted clusters whose objects are removed at once (purgeMode Immediately)."""

    @property
    def fresh(self) -> bool:
        """Placed from scratch (a rebalance or a failback)."""
        return self.rebalance is not None or bool(self.returning)

    @property
    def away(self) -> set[str]:
        """Clusters to place the application without."""
        return set(self.evicted) | set(self.state.evicted)

    @property
    def cause(self) -> Cause | None:
        """Why clusters that are not evicted lose replicas in this plan."""
        if self.rebalance is not None:
            return Cause("Rebalance", f"rebalance {self.rebalance!r}")
        if self.returning:
            return Cause("Failback", f"failback to {', '.join(self.returning)}")
        return None


def decide(
    failover: Failover,
    state: FailoverState,
    placed: Sequence[str],
    snapshot: FleetSnapshot,
    healths: Mapping[str, WorkloadHealth],
    unhealthy: Mapping[str, float],
    asked: str | None,
    now: float,
) -> FailoverDecision:
    """The failover decision for an application ``placed`` on these clusters, with its
    health on each (``healths``) and the application failover clocks (``unhealthy``);
    ``asked``: its rebalance annotation."""
    evicted = evictions(placed, snapshot, duration_seconds(failover.cluster_unreachable_after), now)
    app = failover.application
    if app is not None:
        candidates = {c: h for c, h in healths.items() if c not in evicted}
        after_s = duration_seconds(app.unhealthy_after)
        evicted |= unhealthy_evictions(candidates, unhealthy, after_s, now)
    rebalance = asked if asked is not None and asked != state.rebalanced else None
    when_ready = failover.failback == "WhenReady"

    def stays_away(e: Evicted) -> bool:
        if rebalance is not None:
            return False  # from scratch: every cluster may take it again
        return when_ready if e.reason == "ClusterUnreachable" else app is not None

    kept = {name: e for name, e in state.evicted.items() if stays_away(e)}
    returning = []
    if when_ready:
        away = [n for n, e in sorted(kept.items()) if e.reason == "ClusterUnreachable"]
        returning = failing_back(away, snapshot, duration_seconds(failover.failback_after), now)
    for name in returning:
        del kept[name]
    for eviction in evicted.values():
        if eviction.reason == "ApplicationUnhealthy" or when_ready:
            kept.setdefault(eviction.cluster, Evicted(eviction.cluster, eviction.reason, now))
    immediate = frozenset(
        n
        for n, e in evicted.items()
        if e.reason == "ApplicationUnhealthy"
        and app is not None
        and app.purge_mode == "Immediately"
    )
    next_state = FailoverState(rebalance or state.rebalanced, kept, dict(state.moves))
    return FailoverDecision(evicted, returning, rebalance, next_state, immediate)
