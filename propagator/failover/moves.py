"""Graceful moves (pure): replicas that leave a cluster — evicted, rebalanced, failed back —
are not removed before their replacement is Available, as Karmada's graceful eviction does.

A cluster the application leaves keeps what runs there; a cluster that only loses some of
its replicas (``Divided``) keeps the replicas it had. Both last until the application is
applied and Healthy on every cluster that takes the replicas over, or until the failover
grace period passes; then the cluster is emptied or scaled down. A placement change the
user makes (a new selector, fewer replicas) is not a move: it applies at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from api.failover import EvictionReason
from propagator.failover.decisions import Eviction, seconds
from propagator.work.targets import Target


@dataclass(frozen=True)
class Move:
    """Replicas leaving one cluster gracefully."""

    cluster: str
    reason: EvictionReason
    since: float
    """When the move started (epoch seconds): the grace period counts from here."""
    message: str
    replicas: int | None
    """Replicas kept there meanwhile (None: everything as it is)."""
    lost: float | None = None
    """When an unreachable cluster was lost (for the failover duration)."""


@dataclass(frozen=True)
class Cause:
    """Why this plan moves replicas that are not evicted: a rebalance or a failback."""

    reason: EvictionReason
    message: str


def graceful_moves(
    before: Mapping[str, int | None],
    after: Mapping[str, int | None],
    carried: Mapping[str, Move],
    cause: Cause | None,
    evicted: Mapping[str, Eviction],
    immediate: Collection[str],
    grace_s: float,
    now: float,
) -> dict[str, Move]:
    """The moves in progress once the application goes from ``before`` to ``after``
    (replicas per cluster; None for ``Duplicated``): those ``carried`` from the last plan
    that still keep something, and the new ones — clusters left or shrunk because they are
    ``evicted`` (each for its own reason) or because of ``cause``. ``immediate`` clusters
    (application failover with purgeMode Immediately) get none."""
    until = f"until replaced (Available), at most gracePeriod {seconds(grace_s)}"
    moves = {}
    for name, move in carried.items():
        if name in immediate:
            continue
        if name in after and not _keeps_more(move.replicas, after[name]):
            continue  # placed there again with as much as it keeps
        moves[name] = move
    for name, had in sorted(before.items()):
        if name in moves or name in immediate:
            continue
        eviction = evicted.get(name)
        reason: EvictionReason
        if eviction is not None:
            reason, why = eviction.reason, eviction.message
        elif cause is not None:
            reason, why = cause.reason, cause.message
        else:
            continue
        lost = eviction.since if eviction and eviction.reason == "ClusterUnreachable" else None
        if name not in after:
            moves[name] = Move(name, reason, now, f"{why}: stays {until}", had, lost)
        elif _keeps_more(had, after[name]):
            kept = f"{why}: keeps {had} replicas (placed {after[name]}) {until}"
            moves[name] = Move(name, reason, now, kept, had)
    return moves


def _keeps_more(kept: int | None, placed: int | None) -> bool:
    return kept is not None and placed is not None and placed < kept


def release(
    moves: Mapping[str, Move], replaced: bool, grace_s: float, now: float
) -> tuple[dict[str, Move], dict[str, Move]]:
    """(still kept, released): every move once the replacement is Available
    (``replaced``), else those older than the grace period."""
    if replaced:
        return {}, dict(moves)
    kept = {n: m for n, m in moves.items() if now - m.since < grace_s}
    return kept, {n: m for n, m in moves.items() if n not in kept}


def grace_left(moves: Mapping[str, Move], grace_s: float, now: float) -> float | None:
    """Seconds until the oldest move's grace period passes (None without moves)."""
    if not moves:
        return None
    return max(0.0, min(m.since for m in moves.values()) + grace_s - now)


def with_kept_replicas(targets: Sequence[Target], moves: Mapping[str, Move]) -> list[Target]:
    """``targets`` with the replicas the moves keep where those are more than placed."""
    out = []
    for t in targets:
        move = moves.get(t.cluster)
        if move is not None and _keeps_more(move.replicas, t.replicas):
            t = dataclasses.replace(t, replicas=move.replicas)
        out.append(t)
    return out
