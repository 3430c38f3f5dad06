"""Bringing an application's clusters in line: a bounded, retried, circuit-broken fan-out
that applies the rendered objects on each cluster and deletes the application's objects
that are no longer desired there (all of them on a cluster it left).

It remembers which revision each cluster was last applied (or read back) at: such a
cluster is not contacted again for that revision until the resync period has passed, so a
reconcile with nothing to change sends nothing to the members.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from opentelemetry import trace

from api.common import duration_seconds
from api.rollout import Rollout
from fleet.circuit import CircuitBreaker
from fleet.connection import ApiError
from fleet.discovery import UnknownKind
from fleet.member import MemberMonitor
from propagator.observability.metrics import Metrics
from propagator.propagation import fanout
from propagator.propagation.apply import apply_objects, in_default_namespace
from propagator.propagation.prune import prune
from propagator.settings import Settings

log = logging.getLogger(__name__)
tracer = trace.get_tracer("propagator")


def _bound(value: float | None, default: float) -> float:
    return default if value is None else value


class MemberSync:
    """Holds what outlives one reconcile: circuit breakers and what is known applied."""

    def __init__(
        self,
        settings: Settings,
        member: Callable[[str], MemberMonitor | None],
        metrics: Metrics,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        self.settings = settings
        self.member = member
        self.metrics = metrics
        self.limiter = limiter
        self.breakers: dict[str, CircuitBreaker] = {}
        self._known: dict[tuple[str, str], tuple[str, float]] = {}

    # -- what is known applied ------------------------------------------------------------

    def forget(self, key: str, cluster: str | None = None) -> None:
        """Drop what is known applied for ``key`` (on ``cluster``, or everywhere): the next
        reconcile reads it back from the member."""
        for known in [k for k in self._known if k[0] == key]:
            if cluster is None or known[1] == cluster:
                del self._known[known]

    def remember(self, key: str, cluster: str, revision: str, now: float) -> None:
        """``cluster`` holds ``key``'s objects at ``revision`` (applied or read back)."""
        self._known[(key, cluster)] = (revision, now)

    def is_known(self, key: str, cluster: str, revision: str, now: float) -> bool:
        """Whether ``cluster`` is known to hold ``revision`` and the resync period has not
        passed since."""
        known = self._known.get((key, cluster))
        return (
            known is not None
            and known[0] == revision
            and now - known[1] < self.settings.resync_period_s
        )

    def breaker(self, cluster: str) -> CircuitBreaker:
        if cluster not in self.breakers:
            self.breakers[cluster] = CircuitBreaker(
                cluster,
                failure_threshold=self.settings.circuit_failure_threshold,
                cool_down_s=self.settings.circuit_cool_down_s,
            )
        return self.breakers[cluster]

    # -- calls to the members (blocking, in worker threads) -------------------------------

    def _member_fn(
        self, namespace: str, name: str, kinds: set[str]
    ) -> Callable[[str, Sequence[dict[str, Any]]], None]:
        """Apply the objects to a cluster, then delete this application's other objects
        there (an empty list removes everything)."""

        def sync(cluster: str, objects: Sequence[dict[str, Any]]) -> None:
            monitor = self.member(cluster)
            if monitor is None or monitor.connection is None:
                why = monitor.config_error if monitor else "no such MemberCluster"
                raise ApiError(cluster, f"cannot connect: {why}")
            conn = monitor.connection
            operation = "apply" if objects else "cleanup"
            with (
                self.metrics.timed(operation),
                tracer.start_as_current_span(operation, attributes={"cluster": cluster}),
            ):
                try:
                    # Without a namespace, a namespaced object goes into the application's.
                    objects = in_default_namespace(conn, objects, namespace)
                    writes = apply_objects(conn, objects, app_namespace=namespace, app_name=name)
                    deleted = prune(conn, kinds, objects, namespace, name)
                except UnknownKind as exc:
                    raise ApiError(cluster, str(exc)) from exc
            self.metrics.member_writes.labels(cluster, "apply").inc(writes)
            self.metrics.member_writes.labels(cluster, "delete").inc(len(deleted))
            if deleted:
                log.info("%s/%s: deleted %d objects on %s", namespace, name, len(deleted), cluster)

        return sync

    async def fan_out(
        self,
        key: str,
        rollout: Rollout | None,
        targets: Mapping[str, Sequence[dict[str, Any]]],
        kinds: set[str],
    ) -> list[fanout.ClusterResult]:
        """Sync ``targets[cluster]`` to each cluster (apply, then prune ``kinds``) under the
        application's rollout knobs, falling back to the controller's settings."""
        namespace, name = key.split("/", 1)
        retry = rollout.retry if rollout else None
        s = self.settings
        per_app = min(
            (rollout.max_concurrency if rollout else None) or s.max_concurrency, s.max_concurrency
        )
        results = await fanout.fan_out(
            targets,
            self._member_fn(namespace, name, kinds),
            per_app_limit=per_app,
            global_limiter=self.limiter,
            retry=fanout.RetryPolicy(
                attempts=int(_bound(retry.attempts if retry else None, s.retry_attempts)),
                backoff_s=duration_seconds(retry.backoff)
                if retry and retry.backoff
                else s.retry_backoff_s,
                max_backoff_s=duration_seconds(retry.max_backoff)
                if retry and retry.max_backoff
                else s.retry_max_backoff_s,
            ),
            breaker_for=self.breaker,
            timeout_s=_bound(rollout.timeout_seconds if rollout else None, s.cluster_timeout_s),
            max_failures=rollout.max_failures if rollout else None,
            on_retry=lambda c: self.metrics.retries.labels(c).inc(),
        )
        for r in results:
            self.metrics.applies.labels(r.cluster, "applied" if r.applied else "failed").inc()
        return results
