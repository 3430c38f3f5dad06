"""Per-cluster sync outcomes in words: the Applied summary and one aggregated error."""

from __future__ import annotations

from collections.abc import Mapping

from propagator.conditions import by_message, some_of
from propagator.work.table import SyncState


class ClusterFailed(Exception):
    """Syncing one cluster failed (after retries when they made sense)."""

    def __init__(self, cluster: str, attempts: int, reason: str) -> None:
        noun = "attempt" if attempts == 1 else "attempts"
        self.detail = f"{reason} after {attempts} {noun}" if attempts else reason
        """What failed and how often, without the cluster's name."""
        super().__init__(f"{cluster}: {self.detail}")
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


def failed_on(group: ExceptionGroup[ClusterFailed]) -> str:
    """The failures of ``group`` by error, the clusters sharing one named before it
    (:func:`propagator.conditions.by_message`): ``member-4: timeout after 3 attempts``."""
    pairs = [(e.cluster, e.detail) for e in group.exceptions if isinstance(e, ClusterFailed)]
    return by_message(pairs, "errors")


def applied_summary(states: Mapping[str, SyncState]) -> str:
    """``17/20 clusters applied; 2 failed: member-4: timeout after 3 attempts; ...; 1 in
    progress: member-9 (retrying: 503 ...)``: the failures by error (:func:`failed_on`),
    the first clusters in progress (those retrying first)."""
    applied = sum(s.applied for s in states.values())
    text = f"{applied}/{len(states)} clusters applied"
    group = failures(states)
    if group is not None:
        text += f"; {len(group.exceptions)} failed: " + failed_on(group)
    pending = [(c, s) for c, s in sorted(states.items()) if not s.applied and not s.failed]
    if pending:
        # Those retrying first: their errors say more than the names of those waiting.
        named = [f"{c} (retrying: {s.error})" for c, s in pending if s.error]
        named += [c for c, s in pending if not s.error]
        text += f"; {len(pending)} in progress: " + some_of(named, ", ")
    return text
