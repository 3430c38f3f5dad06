"""Fan-out with a fake apply function (our own interface): bounds, retries, breakers."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from fleet.circuit import CircuitBreaker
from fleet.connection import ApiError
from propagator.propagation.fanout import RetryPolicy, applied_summary, failures, fan_out

pytestmark = pytest.mark.anyio
NO_WAIT = RetryPolicy(attempts=2, backoff_s=0.0, max_backoff_s=0.0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeMembers:
    """Records calls; raises each cluster's listed errors in turn, then succeeds; counts
    how many calls are in flight. Held clusters wait until every other cluster is done."""

    def __init__(
        self,
        fail: dict[str, list[ApiError]] | None = None,
        hold: frozenset[str] = frozenset(),
        others: int = 0,
    ) -> None:
        self.fail = fail or {}
        self.calls: Counter[str] = Counter()
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()
        self.hold = hold
        self.others_done = 0
        self.others = others
        self.release = threading.Event()

    def apply(self, cluster: str, objects: Sequence[dict[str, Any]]) -> None:
        with self.lock:
            self.calls[cluster] += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if cluster in self.hold:
                assert self.release.wait(30), "the others never finished while this one ran"
            else:
                threading.Event().wait(0.01)
            errors = self.fail.get(cluster)
            if errors:
                raise errors.pop(0)
        finally:
            with self.lock:
                self.in_flight -= 1
                if cluster not in self.hold:
                    self.others_done += 1
                    if self.others_done >= self.others:
                        self.release.set()


def breakers(threshold: int = 100) -> Any:
    made: dict[str, CircuitBreaker] = {}
    return lambda c: made.setdefault(c, CircuitBreaker(c, failure_threshold=threshold))


async def run(
    members: FakeMembers,
    clusters: list[str],
    *,
    per_app: int = 10,
    global_cap: int = 10,
    breaker_for: Any = None,
) -> Any:
    return await fan_out(
        {c: [{"kind": "ConfigMap"}] for c in clusters},
        members.apply,
        per_app_limit=per_app,
        global_limiter=anyio.CapacityLimiter(global_cap),
        retry=NO_WAIT,
        breaker_for=breaker_for or breakers(),
        timeout_s=30,
    )


async def test_in_flight_never_exceeds_the_smaller_limit() -> None:
    members = FakeMembers()
    await run(members, [f"m{i}" for i in range(12)], per_app=3, global_cap=10)
    assert members.most_in_flight == 3
    members = FakeMembers()
    await run(members, [f"m{i}" for i in range(12)], per_app=10, global_cap=2)
    assert members.most_in_flight == 2


async def test_retryable_errors_are_retried_others_fail_at_once() -> None:
    members = FakeMembers(
        {
            "flaky": [ApiError("flaky", "503", status=503, retryable=True)],
            "down": [ApiError("down", "connection refused", retryable=True)] * 10,
            "invalid": [ApiError("invalid", "422 Invalid: spec.replicas", status=422)] * 10,
        }
    )
    results = await run(members, ["flaky", "down", "invalid", "fine"])
    by = {r.cluster: r for r in results}
    assert (by["flaky"].applied, by["flaky"].attempts) == (True, 2)
    assert (by["down"].applied, by["down"].attempts) == (False, 3)
    assert (by["invalid"].applied, by["invalid"].attempts) == (False, 1)
    assert by["fine"].applied
    group = failures(results)
    assert group is not None
    assert [str(e) for e in group.exceptions] == [
        "down: connection refused after 3 attempts",
        "invalid: 422 Invalid: spec.replicas after 1 attempt",
    ]
    assert applied_summary(results) == (
        "2/4 clusters applied; 2 failed: down: connection refused after 3 attempts; "
        "invalid: 422 Invalid: spec.replicas after 1 attempt"
    )


async def test_a_slow_cluster_does_not_hold_up_the_others() -> None:
    # "a-slow" (first in name order) returns only once "b" and "c" are done: a fan-out
    # that waited for it before starting the others would never finish.
    members = FakeMembers(hold=frozenset({"a-slow"}), others=2)
    results = await run(members, ["a-slow", "b", "c"], per_app=3)
    assert all(r.applied for r in results)


async def test_the_circuit_opens_for_a_member_that_keeps_failing() -> None:
    members = FakeMembers({"bad": [ApiError("bad", "timeout", retryable=True)] * 10})
    breaker_for = breakers(threshold=2)
    first = await run(members, ["bad"], breaker_for=breaker_for)
    assert members.calls["bad"] == 2  # the breaker opened after 2 failures: no third call
    assert first[0].error is not None
    assert "circuit open" in first[0].error
    await run(members, ["bad"], breaker_for=breaker_for)
    assert members.calls["bad"] == 2  # still open: not even tried
    assert breaker_for("bad").state() == "open"


def test_backoff_doubles_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=5, backoff_s=1, max_backoff_s=4)
    for retry, step in ((1, 1), (2, 2), (3, 4), (4, 4)):
        assert step / 2 <= policy.delay(retry, None) <= step
    assert policy.delay(1, 3.0) == 3.0
    assert policy.delay(1, 60.0) == 4


async def test_max_failures_stops_starting_new_clusters_and_retries_are_counted() -> None:
    down = [ApiError("x", "connection refused", retryable=True)] * 10
    members = FakeMembers({"a": list(down), "b": list(down)})
    retried: Counter[str] = Counter()
    results = await fan_out(
        {c: [{"kind": "ConfigMap"}] for c in ["a", "b", "c", "d"]},
        members.apply,
        per_app_limit=1,
        global_limiter=anyio.CapacityLimiter(10),
        retry=NO_WAIT,
        breaker_for=breakers(),
        timeout_s=30,
        max_failures=1,
        on_retry=lambda c: retried.update([c]),
    )
    by = {r.cluster: r for r in results}
    assert (by["a"].applied, by["b"].applied) == (False, False)
    assert retried == Counter({"a": 2, "b": 2})
    # Two failures exceed maxFailures 1: c and d are not tried at all.
    assert members.calls["c"] == members.calls["d"] == 0
    assert by["c"].error == "not tried: rollout stopped after 2 failed clusters (maxFailures 1)"
    assert "d: not tried: rollout stopped" in applied_summary(results)


async def test_refusals_do_not_open_the_circuit() -> None:
    invalid = [ApiError("m", "422 Invalid", status=422)] * 5
    members = FakeMembers({"m": invalid})
    breaker_for = breakers(threshold=2)
    for _ in range(3):
        (result,) = await run(members, ["m"], breaker_for=breaker_for)
        assert result.error == "422 Invalid"  # tried every time: the member answers
    assert members.calls["m"] == 3
    assert breaker_for("m").state() == "closed"
