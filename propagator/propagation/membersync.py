"""The member sync: one (application, cluster) key at a time, in the member's own workers.

Each try is bounded by the application's timeout, limited by the application's
``maxConcurrency`` and by the controller-wide ``max_concurrency``, and skipped while the
member's circuit is open. A retryable failure (timeout, connection error, 429 with its
Retry-After, 5xx) comes back on the member's queue after a backoff with jitter; after the
application's retries the cluster counts as failed and is still retried, at the
controller's requeue backoff. A refusal (4xx) is not retried until the work changes or
the resync comes. Every outcome is recorded in the work table and reported through
``on_result`` so the application's status can follow, saying whether the sync settled
its cluster (in line, or counted as failed, where it was neither before).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
from opentelemetry import trace

from fleet.circuit import CircuitOpen
from kube.discovery import UnknownKind
from kube.errors import ApiError
from kube.retry import REQUEUE_BACKOFF_S, Failure, backoff_delay, failure_of
from propagator.observability.metrics import Metrics
from propagator.observability.tracing import parented
from propagator.propagation.clustersync import Guard, SyncReport, sync_cluster
from propagator.runtime.memberregistry import Caches, Member
from propagator.runtime.ownership import Hold, always
from propagator.settings import Settings
from propagator.work.table import ClusterWork, SyncState, WorkTable

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")

CIRCUIT_VALUES = {"closed": 0, "half-open": 1, "open": 2}


def _shown(state: SyncState) -> tuple[object, ...]:
    """What the application's status shows of a cluster's sync state: a sync that leaves
    it as it was and writes nothing (a recheck against the caches, every resync period)
    asks for no status refresh (at 100 clusters, each refresh rebuilds and judges 100
    lines: most of a no-op resync's time)."""
    return (
        state.revision,
        state.applied,
        state.failed,
        state.error,
        state.conflict,
        state.quota_exceeded,
        state.carried,
        state.attempts,
        state.drift,
        state.drift_since,
        state.healed,
    )


class MemberSync:
    """Runs member syncs against the work table."""

    def __init__(
        self,
        settings: Settings,
        table: WorkTable,
        metrics: Metrics,
        limiter: anyio.CapacityLimiter,
        caches: Caches,
        on_result: Callable[[str, bool], None],
        guard: Guard | None = None,
        on_drift: Callable[[ClusterWork, Sequence[str]], Awaitable[None]] | None = None,
        hold: Hold = always,
    ) -> None:
        """``on_drift``: told when a cluster's sync first finds objects drifted that it
        leaves so (``driftPolicy: Report``); ``hold``: whether an application is this
        replica's to sync (shards)."""
        self.hold = hold
        self.guard = guard
        self.on_drift = on_drift
        self.settings = settings
        self.table = table
        self.metrics = metrics
        self.limiter = limiter
        self.caches = caches
        self.on_result = on_result
        self._per_app: dict[str, anyio.CapacityLimiter] = {}

    def _app_limiter(self, work: ClusterWork) -> anyio.CapacityLimiter:
        limiter = self._per_app.get(work.app)
        if limiter is None:
            limiter = self._per_app[work.app] = anyio.CapacityLimiter(work.policy.max_concurrency)
        elif limiter.total_tokens != work.policy.max_concurrency:
            limiter.total_tokens = work.policy.max_concurrency
        return limiter

    def forget(self, app: str) -> None:
        self._per_app.pop(app, None)

    def _requeue_delay(self, state: SyncState, work: ClusterWork) -> float:
        """After the application's retries: the controller's requeue backoff."""
        beyond = state.attempts - work.policy.attempts
        return backoff_delay(beyond, REQUEUE_BACKOFF_S, self.settings.requeue_max_delay_s)

    async def sync(self, member: Member, app: str) -> None:
        """Sync ``app`` on ``member`` once (the registry's SyncFn), if it is this
        replica's."""
        with self.hold(app) as mine:
            if mine:
                await self._sync(member, app)

    async def _sync(self, member: Member, app: str) -> None:
        work, state = self.table.get(app, member.name), self.table.state(app, member.name)
        if work is None or state is None:
            return  # forgotten meanwhile
        was_pending = not state.applied and not state.failed
        shown = _shown(state)
        try:
            self._try(member, work, state)
        except _NotNow as skip:
            self.table.record_skip(app, member.name, state, skip.reason)
            if skip.retry_in_s is not None:
                member.queue.add_after(app, skip.retry_in_s)
            self._publish_circuit(member)
            self.on_result(app, was_pending)
            return
        self.table.record_try(state)
        report: SyncReport | None = None
        failure: Failure | None = None
        over_quota = False
        operation = "cleanup" if work.removal else "apply"
        async with _held(self._app_limiter(work)), _held(self.limiter):
            with (
                self.metrics.timed(operation) as timing,
                tracer.start_as_current_span(
                    operation,
                    context=parented(work.trace_parent),
                    attributes={"cluster": member.name, "application": app},
                ),
            ):
                try:
                    with anyio.fail_after(work.policy.timeout_s):
                        report = await sync_cluster(
                            member,
                            work,
                            self.caches,
                            work.policy.timeout_s,
                            self.guard,
                            heal=state.heals(work),
                        )
                except (TimeoutError, ApiError, UnknownKind) as exc:
                    failure = failure_of(exc, work.policy.timeout_s)
                    over_quota = isinstance(exc, ApiError) and _over_quota(exc)
                timing.failed = report is None
        if self.table.get(app, member.name) != work:
            member.queue.add(app)  # the work changed meanwhile: sync the new one
        if report is not None:
            member.breaker.record(True)
            newly = set(report.drift) - set(state.drift)
            self._record_success(member, work, state, report)
            if newly:
                self.metrics.drift_detected.labels(member.name).inc(len(newly))
                if self.on_drift is not None:
                    await self.on_drift(work, sorted(newly))
        elif failure is not None:
            # A refusal comes from a member that works: no circuit trip.
            member.breaker.record(failure.answered)
            self._record_failure(member, work, state, failure, over_quota)
        self._publish_circuit(member)
        wrote = report is not None and (report.applied or report.deleted)
        if wrote or _shown(state) != shown:
            self.on_result(app, was_pending and (state.applied or state.failed))

    def _try(self, member: Member, work: ClusterWork, state: SyncState) -> None:
        """Raise _NotNow when this sync must not be tried now."""
        limit = work.policy.max_failures
        if limit is not None and not state.applied:
            failed = self.table.failed_elsewhere(work.app, member.name)
            if failed > limit:
                raise _NotNow(
                    f"not tried: rollout stopped after {failed} failed clusters "
                    f"(maxFailures {limit})",
                    None,
                )
        try:
            member.breaker.before_call()
        except CircuitOpen as exc:
            raise _NotNow(str(exc).split(": ", 1)[1], exc.retry_in_s + 0.1) from exc

    def _record_success(
        self, member: Member, work: ClusterWork, state: SyncState, report: SyncReport
    ) -> None:
        cluster = member.name
        self.table.record_applied(
            work.app,
            cluster,
            state,
            report.conflicts,
            time.monotonic(),
            report.drift,
            time.time(),
            work.heal,
        )
        self.metrics.applies.labels(cluster, "conflict" if report.conflicts else "applied").inc()
        self.metrics.member_writes.labels(cluster, "apply").inc(report.applied)
        self.metrics.member_writes.labels(cluster, "delete").inc(report.deleted)
        if report.healed:
            self.metrics.drift_heals.labels(cluster).inc(report.healed)
            log.info("%s: %d objects on %s drifted; re-applied", work.app, report.healed, cluster)
        if report.deleted:
            log.info("%s: deleted %d objects on %s", work.app, report.deleted, cluster)
        if report.orphaned:
            log.info(
                "%s: left %d objects on %s (propagator.io/on-delete: Orphan): %s",
                work.app,
                len(report.orphaned),
                cluster,
                ", ".join(report.orphaned[:10]),
            )

    def _record_failure(
        self,
        member: Member,
        work: ClusterWork,
        state: SyncState,
        failure: Failure,
        over_quota: bool,
    ) -> None:
        retryable = failure.retryable
        within_retries = retryable and state.tries <= work.policy.attempts
        self.table.record_failure(
            work.app,
            member.name,
            state,
            failure.reason,
            within_retries=within_retries,
            over_quota=over_quota,
            now=time.monotonic(),
        )
        if within_retries:
            self.metrics.retries.labels(member.name).inc()
            member.queue.add_after(work.app, work.policy.delay(state.tries, failure.retry_after_s))
            return
        self.metrics.applies.labels(member.name, "failed").inc()
        if retryable:  # a refusal waits for a change or the resync
            member.queue.add_after(work.app, self._requeue_delay(state, work))

    def _publish_circuit(self, member: Member) -> None:
        state = member.breaker.state()
        self.metrics.circuit_state.labels(member.name).set(CIRCUIT_VALUES[state])


@asynccontextmanager
async def _held(limiter: anyio.CapacityLimiter) -> AsyncIterator[None]:
    """A token of ``limiter`` while the block runs. Taken at once when one is free:
    ``acquire`` yields to the event loop even then, and on a loop busy with watch events
    each yield waits a round of them, on the way from a new application to its first
    write."""
    try:
        limiter.acquire_nowait()
    except anyio.WouldBlock:
        await limiter.acquire()
    try:
        yield
    finally:
        limiter.release()


class _NotNow(Exception):
    def __init__(self, reason: str, retry_in_s: float | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_in_s = retry_in_s


def _over_quota(exc: ApiError) -> bool:
    """The member's ResourceQuota refused the write."""
    return exc.status == 403 and "exceeded quota" in exc.message
