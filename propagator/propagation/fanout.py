"""Fan-out: apply an application's objects to every target cluster, bounded and retried.

At most ``per_app_limit`` clusters of one application are in flight, and never more than
the controller-wide limiter allows across all applications. Each cluster is retried with
exponential backoff and jitter for retryable failures only (timeouts, connection errors,
429 honouring Retry-After, 5xx); a failure that would fail again (a 4xx such as an invalid
object) stops at once. A circuit breaker per member skips members that keep failing. One
failing or slow cluster never holds up the others. All failures of a pass become one
``ExceptionGroup``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from fleet.circuit import CircuitBreaker, CircuitOpen
from fleet.connection import ApiError

ApplyFn = Callable[[str, Sequence[dict[str, Any]]], object]
"""Blocking: apply every object to the named cluster; raises ApiError on failure."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3
    """Retries after the first try."""
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def delay(self, retry: int, retry_after_s: float | None) -> float:
        """Wait before retry number ``retry`` (1-based): Retry-After if the server gave
        one, else exponential with jitter (50-100 % of the step), capped."""
        if retry_after_s is not None:
            return min(self.max_backoff_s, retry_after_s)
        step = min(self.max_backoff_s, self.backoff_s * math.pow(2, retry - 1))
        return step * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class ClusterResult:
    cluster: str
    applied: bool
    attempts: int
    error: str | None = None


class ClusterFailed(Exception):
    """Applying to one cluster failed (after retries when they made sense)."""

    def __init__(self, cluster: str, attempts: int, reason: str) -> None:
        noun = "attempt" if attempts == 1 else "attempts"
        super().__init__(
            f"{cluster}: {reason} after {attempts} {noun}" if attempts else f"{cluster}: {reason}"
        )
        self.cluster = cluster
        self.attempts = attempts
        self.reason = reason


async def _apply_with_retries(
    cluster: str,
    objects: Sequence[dict[str, Any]],
    apply: ApplyFn,
    *,
    retry: RetryPolicy,
    breaker: CircuitBreaker,
    timeout_s: float,
    global_limiter: anyio.CapacityLimiter,
    on_retry: Callable[[str], None] | None,
) -> ClusterResult:
    attempts = 0
    while True:
        attempts += 1
        try:
            breaker.before_call()
        except CircuitOpen as exc:
            return ClusterResult(cluster, False, attempts - 1 or 1, str(exc).split(": ", 1)[1])
        retry_after = None
        try:
            with anyio.fail_after(timeout_s):
                # The thread cannot be interrupted; the connection's read timeout ends it.
                await anyio.to_thread.run_sync(
                    apply, cluster, objects, limiter=global_limiter, abandon_on_cancel=True
                )
            breaker.record(True)
            return ClusterResult(cluster, True, attempts)
        except TimeoutError:
            reason, retryable, answered = f"timeout ({timeout_s:g}s)", True, False
        except ApiError as exc:
            reason, retryable, retry_after = exc.message, exc.retryable, exc.retry_after_s
            # A refusal (4xx) comes from a member that works: it must not open the circuit.
            answered = exc.status is not None and not exc.retryable
        breaker.record(answered)
        if not retryable or attempts > retry.attempts:
            return ClusterResult(cluster, False, attempts, reason)
        if on_retry is not None:
            on_retry(cluster)
        await anyio.sleep(retry.delay(attempts, retry_after))


async def fan_out(
    targets: Mapping[str, Sequence[dict[str, Any]]],
    apply: ApplyFn,
    *,
    per_app_limit: int,
    global_limiter: anyio.CapacityLimiter,
    retry: RetryPolicy,
    breaker_for: Callable[[str], CircuitBreaker],
    timeout_s: float,
    max_failures: int | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> list[ClusterResult]:
    """Apply ``targets[cluster]`` to each cluster; one result per cluster, sorted by name.
    Once more than ``max_failures`` clusters have failed, clusters not yet started are not
    tried (their result says so)."""
    results: dict[str, ClusterResult] = {}
    per_app = anyio.CapacityLimiter(per_app_limit)

    async def one(cluster: str) -> None:
        async with per_app:
            failed = sum(not r.applied for r in results.values())
            if max_failures is not None and failed > max_failures:
                results[cluster] = ClusterResult(
                    cluster,
                    False,
                    0,
                    f"not tried: rollout stopped after {failed} failed clusters "
                    f"(maxFailures {max_failures})",
                )
                return
            results[cluster] = await _apply_with_retries(
                cluster,
                targets[cluster],
                apply,
                retry=retry,
                breaker=breaker_for(cluster),
                timeout_s=timeout_s,
                global_limiter=global_limiter,
                on_retry=on_retry,
            )

    async with anyio.create_task_group() as tg:
        for cluster in sorted(targets):
            tg.start_soon(one, cluster)
    return [results[c] for c in sorted(results)]


def failures(results: Sequence[ClusterResult]) -> ExceptionGroup[ClusterFailed] | None:
    """Every failure of the pass as one ExceptionGroup (None when all were applied)."""
    failed = [
        ClusterFailed(r.cluster, r.attempts, r.error or "failed") for r in results if not r.applied
    ]
    if not failed:
        return None
    return ExceptionGroup(f"{len(failed)}/{len(results)} clusters failed", failed)


def applied_summary(results: Sequence[ClusterResult]) -> str:
    """``17/20 clusters applied; 3 failed: member-4: timeout after 3 attempts; ...``"""
    applied = sum(r.applied for r in results)
    text = f"{applied}/{len(results)} clusters applied"
    group = failures(results)
    if group is not None:
        text += f"; {len(group.exceptions)} failed: " + "; ".join(str(e) for e in group.exceptions)
    return text
