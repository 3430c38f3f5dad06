"""Recording what an application wants on each cluster in the work table, and queueing
the member syncs whose work changed."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import SpanContext

from propagator.conditions import some_of
from propagator.work.members import SyncQueues
from propagator.work.release import Release
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable

log = logging.getLogger(__name__)
LOGGED_CLUSTERS = 5
"""Clusters a log line names before it says how many more."""
REMOVAL = "removal"
"""The revision of the work that removes an application from a cluster."""


@dataclass(frozen=True)
class Written:
    """How one plan's objects are written on every cluster."""

    uid: str
    """The application's UID, stamped on what it owns."""
    policy: SyncPolicy
    kinds: frozenset[str]
    """Every kind the application propagates (now or before): what its prune looks at."""
    adopt: bool
    """``conflictResolution: Adopt``: objects someone else made are taken over."""
    trace_parent: SpanContext | None
    release: Release = field(default_factory=Release)
    """The fields left to the members once an object exists there."""
    heal_drift: bool = True
    """``driftPolicy: Heal``."""
    heal: str = ""
    """A ``kubectl propagator sync`` request not yet acted on everywhere."""
    held: frozenset[str] = frozenset()
    """Clusters that get no writes (suspended)."""
    suspended: bool = False
    """``spec.suspend``: no writes anywhere, removals included."""


def works_for(
    key: str,
    written: Written,
    clusters: Sequence[str],
    rendered: Mapping[str, Sequence[dict[str, Any]]],
    revisions: Mapping[str, str],
    removed: Sequence[str],
) -> dict[str, ClusterWork]:
    """The work per cluster: the ``rendered`` objects on the ``clusters`` the application
    goes to, its removal from the ``removed`` ones."""
    w = written
    works = {
        cluster: ClusterWork(
            key,
            cluster,
            tuple(rendered[cluster]),
            revisions[cluster],
            w.kinds,
            w.policy,
            w.uid,
            w.adopt,
            w.release,
            w.heal_drift,
            w.heal,
            cluster in w.held,
            trace_parent=w.trace_parent,
        )
        for cluster in clusters
    }
    for cluster in removed:
        works[cluster] = ClusterWork(
            key,
            cluster,
            (),
            REMOVAL,
            w.kinds,
            w.policy,
            w.uid,
            suspended=w.suspended,
            trace_parent=w.trace_parent,
        )
    return works


class WorkRecorder:
    """Writes the work table for the reconcile and queues the syncs it needs."""

    def __init__(self, table: WorkTable, queues: SyncQueues, recheck_after_s: float) -> None:
        """``recheck_after_s``: how long an applied cluster's work waits before it is
        synced again unchanged (the resync)."""
        self.table = table
        self.queues = queues
        self.recheck_after_s = recheck_after_s

    def leaving(self, key: str, previous: Mapping[str, Any], wanted: set[str]) -> list[str]:
        """Clusters the application was on and is not wanted on, minus those it is known
        to be gone from."""
        was_on = {c["name"] for c in previous.get("clusters") or []}
        was_on |= {p["cluster"] for p in previous.get("placement") or []}
        was_on |= set(self.table.works_of(key))
        leaving = []
        for cluster in sorted(was_on - wanted):
            work, state = self.table.get(key, cluster), self.table.state(key, cluster)
            if work is not None and work.removal and state is not None and state.applied:
                continue  # removed already
            leaving.append(cluster)
        return leaving

    def record(
        self,
        key: str,
        works: Mapping[str, ClusterWork],
        reported: Mapping[str, tuple[str, int]] | None = None,
    ) -> bool:
        """Record the work; queue the member syncs it needs. Returns whether any was
        queued. ``reported``: what the status of an earlier controller shows applied (the
        first plan since this one started)."""
        due = self.table.set_work(
            key,
            works,
            now=time.monotonic(),
            recheck_after_s=self.recheck_after_s,
            reported=reported,
        )
        # One line per change of the work (not per object, nor for the resync's rechecks:
        # a state not yet tried is new work).
        changed = [c for c in due if (s := self.table.state(key, c)) and s.tried_at is None]
        if changed:
            log.info(
                "%s: syncing %d clusters (%s)",
                key,
                len(changed),
                some_of(changed, ", ", LOGGED_CLUSTERS),
            )
        queued = False
        for cluster in due:
            why = self.queues.enqueue(cluster, key)
            if why is None:
                queued = True
                continue
            self.table.record_unreachable(key, cluster, why)
        return queued


def reported(status: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """By cluster, the revision ``status`` shows applied there and the attempts it took."""
    out = {}
    for line in status.get("clusters") or []:
        if not isinstance(line, Mapping) or line.get("applied") is not True:
            continue
        name, revision, attempts = line.get("name"), line.get("revision"), line.get("attempts")
        if isinstance(name, str) and isinstance(revision, str):
            out[name] = (revision, attempts if isinstance(attempts, int) and attempts > 0 else 0)
    return out
