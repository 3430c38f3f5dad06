"""Per-cluster sync outcomes in words: the Applied summary and one aggregated error."""

from __future__ import annotations

from collections.abc import Mapping

from propagator.conditions import some_of
from propagator.propagation.work import SyncState


class ClusterFailed(Exception):
    """Syncing one cluster failed (after retries when they made sense)."""

    def __init__(self, cluster: str, attempts: int, reason: str) -> None:
        noun = "attempt" if attempts == 1 else "attempts"
        super().__init__(
            f"{cluster}: {reason} after {attempts} {noun}" if attempts else f"{cluster}: {reason}"
        )
        self.cluster = cluster
        self.attempts = attempts
        self.reason = reason


def failures(states: Mapping[str, SyncState]) -> ExceptionGroup[ClusterFailed] | None:
    """Every failed cluster as one ExceptionGroup (None when none failed)."""
    failed = [
        ClusterFailed(cluster, s.attempts, s.error or "failed")
        for cluster, s in sorted(states.items())
        if s.failed
    ]
    if not failed:
        return None
    return ExceptionGroup(f"{len(failed)}/{len(states)} clusters failed", failed)


def applied_summary(states: Mapping[str, SyncState]) -> str:
    """``17/20 clusters applied; 2 failed: member-4: timeout after 3 attempts; ...; 1 in
    progress: member-9 (retrying: 503 ...)``: every failure, the first clusters in
    progress (those retrying first)."""
    applied = sum(s.applied for s in states.values())
    text = f"{applied}/{len(states)} clusters applied"
    group = failures(states)
    if group is not None:
        text += f"; {len(group.exceptions)} failed: " + "; ".join(str(e) for e in group.exceptions)
    pending = [(c, s) for c, s in sorted(states.items()) if not s.applied and not s.failed]
    if pending:
        # Those retrying first: their errors say more than the names of those waiting.
        named = [f"{c} (retrying: {s.error})" for c, s in pending if s.error]
        named += [c for c, s in pending if not s.error]
        text += f"; {len(pending)} in progress: " + some_of(named, ", ")
    return text
