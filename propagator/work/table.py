"""What each application wants on each cluster, and how each cluster's sync went.

The application reconcile records a :class:`ClusterWork` per (application, cluster); the
member syncs record a :class:`SyncState` per (application, cluster). :class:`WorkTable`
owns both and says which clusters need a sync when the work changes. In memory only:
after a restart every cluster is synced once, against the member caches (what is
already there is not written again); until its sync reports, a cluster the application's
status shows applied at the same revision counts as applied (the status does not flip to
"in progress" and back at each restart).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import SpanContext

from api.common import duration_seconds
from api.rollout import (
    DEFAULT_RETRY_ATTEMPTS,
    DEFAULT_RETRY_BACKOFF_S,
    DEFAULT_RETRY_MAX_BACKOFF_S,
    Rollout,
)
from kube.keys import KindKey
from kube.retry import backoff_delay
from propagator.work.objects import Owner
from propagator.work.release import Release


@dataclass(frozen=True)
class SyncPolicy:
    """An application's rollout knobs under the controller's caps."""

    attempts: int = DEFAULT_RETRY_ATTEMPTS
    """Retries of a retryable failure after the first try, before the cluster counts as
    failed (it is still retried afterwards, less often)."""
    backoff_s: float = DEFAULT_RETRY_BACKOFF_S
    max_backoff_s: float = DEFAULT_RETRY_MAX_BACKOFF_S
    timeout_s: float = 30.0
    max_failures: int | None = None
    max_concurrency: int = 10

    @classmethod
    def of(cls, rollout: Rollout | None, defaults: SyncPolicy) -> SyncPolicy:
        """``rollout``'s knobs, ``defaults``' where it leaves one unset; its concurrency
        never above ``defaults``' (the controller's cap)."""
        retry = rollout.retry if rollout else None
        s = defaults
        return cls(
            attempts=s.attempts if retry is None or retry.attempts is None else int(retry.attempts),
            backoff_s=duration_seconds(retry.backoff) if retry and retry.backoff else s.backoff_s,
            max_backoff_s=duration_seconds(retry.max_backoff)
            if retry and retry.max_backoff
            else s.max_backoff_s,
            timeout_s=s.timeout_s
            if rollout is None or rollout.timeout_seconds is None
            else float(rollout.timeout_seconds),
            max_failures=rollout.max_failures if rollout else None,
            max_concurrency=min(
                (rollout.max_concurrency if rollout else None) or s.max_concurrency,
                s.max_concurrency,
            ),
        )

    def delay(self, retry: int, retry_after_s: float | None) -> float:
        """Wait before retry number ``retry`` (1-based), by the project's backoff rule."""
        return backoff_delay(retry, self.backoff_s, self.max_backoff_s, retry_after_s)


@dataclass(frozen=True, slots=True)
class ClusterWork:
    """What one application wants on one cluster."""

    app: str
    """namespace/name of the application."""
    cluster: str
    objects: tuple[dict[str, Any], ...]
    """The rendered objects; empty: remove everything the application has there."""
    revision: str
    prune_kinds: frozenset[str]
    """``apiVersion/kind`` of everything the application may have left there."""
    policy: SyncPolicy
    uid: str = ""
    """The application's UID, stamped on its objects."""
    adopt: bool = False
    """Take over objects that exist without a stamp (conflictResolution: Adopt)."""
    release: Release = field(default_factory=Release)
    """The fields left to the member once an object exists there."""
    heal_drift: bool = True
    """Re-apply what drifted (``driftPolicy: Heal``); else only report it, healed by a
    new revision or ``heal``."""
    heal: str = ""
    """A ``kubectl propagator sync`` request not yet acted on everywhere: drift is healed
    once under it."""
    suspended: bool = False
    """No writes (``spec.suspend``, a suspended cluster): what differs is only reported
    as drift."""
    trace_parent: SpanContext | None = field(default=None, compare=False)
    """The span of the reconcile that asked for this work: the cluster's sync joins its
    trace. Not part of what the work is (a new reconcile of the same work changes nothing)."""

    @property
    def owner(self) -> Owner:
        return Owner(self.namespace, self.name, self.uid)

    @property
    def removal(self) -> bool:
        return not self.objects

    @property
    def kinds(self) -> list[KindKey]:
        """(apiVersion, kind) of everything the work writes or may prune there, sorted:
        the member's caches its sync is judged from."""
        kinds = {(str(o["apiVersion"]), str(o["kind"])) for o in self.objects}
        for kind in self.prune_kinds:
            api_version, name = kind.rsplit("/", 1)
            kinds.add((api_version, name))
        return sorted(kinds)

    @property
    def namespace(self) -> str:
        return self.app.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.app.split("/", 1)[1]


@dataclass(slots=True)
class SyncState:
    """How the sync of one (application, cluster) stands."""

    revision: str
    """The revision of the work this state is about."""
    applied: bool = False
    """In line with the work at ``revision``."""
    attempts: int = 0
    """Tries of the last sync pass: what it took to get in line, or tries so far."""
    conflict: bool = False
    """The last failure was a conflict over an object this application does not own."""
    quota_exceeded: bool = False
    """The last failure was the member's quota refusing a write."""
    tries: int = 0
    """Tries since the cluster was last in line."""
    error: str | None = None
    failed: bool = False
    """Counts as failed: a refusal, an open circuit, or retries used up (retried later)."""
    tried_at: float | None = None
    """When its last sync ended (monotonic seconds)."""
    carried: bool = False
    """``applied`` and ``attempts`` come from the status written before this controller
    started: no sync has confirmed them here yet."""
    healed: str | None = None
    """The work's ``heal`` when a sync of this revision last succeeded (None: none did)."""
    drift: tuple[str, ...] = ()
    """Objects the last sync found drifted and left so (``driftPolicy: Report``)."""
    drift_since: float | None = None
    """When (wall-clock seconds) ``drift`` was first found non-empty."""

    def heals(self, work: ClusterWork) -> bool:
        """Whether a sync of ``work`` re-applies drifted objects: by policy, as the first
        sync of a new revision, or asked (``work.heal``)."""
        if work.heal_drift:
            return True
        if self.healed is None:
            return not self.carried
        return bool(work.heal) and self.healed != work.heal


@dataclass
class WorkTable:
    """Work and sync states of every application, by application, then cluster (every
    question is about one application: its cost follows its own clusters, not the
    fleet's). The only writer of the states: a sync records its outcome through the
    ``record_*`` methods, which keep each application's counts of unsettled and failed
    clusters (asked after every sync, so they cost the same at 1,000 clusters as at 3)."""

    _work: dict[str, dict[str, ClusterWork]] = field(default_factory=dict, init=False)
    _states: dict[str, dict[str, SyncState]] = field(default_factory=dict, init=False)
    _unsettled: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    """By application: clusters neither in line nor counted as failed."""
    _failed: Counter[str] = field(default_factory=Counter, init=False, repr=False)

    def set_work(
        self,
        app: str,
        works: Mapping[str, ClusterWork],
        *,
        now: float,
        recheck_after_s: float,
        reported: Mapping[str, tuple[str, int]] | None = None,
    ) -> list[str]:
        """Make ``works`` the application's work; returns the clusters to sync: those
        whose work is new or changed, or whose last sync ended more than
        ``recheck_after_s`` ago (the member syncs retry failures on their own).
        ``reported``: by cluster, the revision an earlier controller's status says is
        applied there and the attempts it took; a cluster without a state whose work has
        that revision starts applied (``carried``), and is still synced."""
        self._work[app] = dict(works)
        old = self._states.get(app, {})
        states = self._states[app] = {}
        due = []
        for cluster, work in works.items():
            state = old.get(cluster)
            if state is None or state.revision != work.revision:
                revision, attempts = (reported or {}).get(cluster, (None, 0))
                if state is None and revision == work.revision:
                    state = SyncState(work.revision, applied=True, attempts=attempts, carried=True)
                else:
                    state = SyncState(work.revision)
                due.append(cluster)
            elif _rechecked(state, now, recheck_after_s) or _heal_asked(state, work):
                due.append(cluster)
            states[cluster] = state
        self._unsettled[app] = sum(_unsettled(s) for s in states.values())
        self._failed[app] = sum(s.failed for s in states.values())
        return sorted(due)

    def get(self, app: str, cluster: str) -> ClusterWork | None:
        return self._work.get(app, {}).get(cluster)

    def apps(self) -> list[str]:
        """The applications that have work (``set_work`` and not ``forget``)."""
        return list(self._work)

    def works_of(self, app: str) -> Mapping[str, ClusterWork]:
        """The application's work by cluster (read only: ``set_work`` replaces it)."""
        return self._work.get(app, {})

    def state(self, app: str, cluster: str) -> SyncState | None:
        return self._states.get(app, {}).get(cluster)

    def states_of(self, app: str) -> dict[str, SyncState]:
        return dict(self._states.get(app, {}))

    def pending(self, app: str) -> bool:
        """Whether a sync of ``app`` has yet to report for its work: a cluster neither in
        line nor counted as failed."""
        return self._unsettled[app] > 0

    def clusters(self, app: str) -> int:
        """How many clusters ``app`` has work on."""
        return len(self._states.get(app, {}))

    def failed_elsewhere(self, app: str, cluster: str) -> int:
        """Clusters of ``app`` other than ``cluster`` whose sync counts as failed."""
        own = self.state(app, cluster)
        return self._failed[app] - (own is not None and own.failed)

    def apps_on(self, cluster: str) -> list[str]:
        return sorted(a for a, works in self._work.items() if cluster in works)

    def forget(self, app: str) -> None:
        self._work.pop(app, None)
        self._states.pop(app, None)
        self._unsettled.pop(app, None)
        self._failed.pop(app, None)

    # A sync records into the state it started from (``state``): when the work's revision
    # changed meanwhile, the table holds a new state, and the old one's outcome counts for
    # nothing (the sync of the new revision is queued).

    def record_try(self, state: SyncState) -> None:
        """A sync of ``state``'s work is about to be tried."""
        state.tries += 1

    def record_skip(self, app: str, cluster: str, state: SyncState, reason: str) -> None:
        """The sync was not tried (``reason``): it counts as failed until tried."""
        with self._changing(app, cluster, state):
            state.error, state.failed = reason, True

    def record_applied(
        self,
        app: str,
        cluster: str,
        state: SyncState,
        conflicts: Sequence[str],
        now: float,
        drift: Sequence[str] = (),
        wall: float | None = None,
        healed: str | None = None,
    ) -> None:
        """The sync ended in line with the work, but for ``conflicts`` (objects this
        application does not own, which wait for a change or the recheck) and ``drift``
        (objects changed on the member and left so: found at wall-clock time ``wall``),
        under the work's ``heal`` request ``healed``."""
        if healed is not None:
            state.healed = healed
        if not drift:
            state.drift, state.drift_since = (), None
        else:
            if not state.drift:
                state.drift_since = wall
            state.drift = tuple(drift)
        with self._changing(app, cluster, state):
            state.applied, state.failed, state.error, state.conflict = True, False, None, False
            state.quota_exceeded = state.carried = False
            state.attempts, state.tries = state.tries, 0
            state.tried_at = now
            if conflicts:
                state.applied, state.failed, state.conflict = False, True, True
                state.error = "conflict: " + "; ".join(conflicts)

    def record_failure(
        self,
        app: str,
        cluster: str,
        state: SyncState,
        reason: str,
        *,
        within_retries: bool,
        over_quota: bool,
        now: float,
    ) -> None:
        """The sync failed (``reason``); it counts as failed once beyond its retries."""
        with self._changing(app, cluster, state):
            state.applied, state.error, state.attempts = False, reason, state.tries
            state.conflict = state.carried = False
            state.quota_exceeded = over_quota
            state.tried_at = now
            state.failed = not within_retries

    def record_unreachable(self, app: str, cluster: str, reason: str) -> None:
        """The cluster's sync cannot be queued (``reason``): it counts as failed."""
        state = self.state(app, cluster)
        if state is None:
            return
        with self._changing(app, cluster, state):
            state.applied, state.failed, state.error = False, True, f"cannot connect: {reason}"

    @contextmanager
    def _changing(self, app: str, cluster: str, state: SyncState) -> Iterator[None]:
        """Keep the application's counts while ``state`` changes (when it is still the
        cluster's state)."""
        held = self.state(app, cluster) is state
        if held:
            self._unsettled[app] -= _unsettled(state)
            self._failed[app] -= state.failed
        yield
        if held:
            self._unsettled[app] += _unsettled(state)
            self._failed[app] += state.failed


def _rechecked(state: SyncState, now: float, recheck_after_s: float) -> bool:
    """Whether the cluster's last sync is older than the resync's interval."""
    return state.tried_at is not None and now - state.tried_at >= recheck_after_s


def _heal_asked(state: SyncState, work: ClusterWork) -> bool:
    """Whether ``work`` asks to heal drift and the cluster has not since it was asked."""
    return bool(work.heal) and state.healed is not None and state.healed != work.heal


def _unsettled(state: SyncState) -> bool:
    return not state.applied and not state.failed
