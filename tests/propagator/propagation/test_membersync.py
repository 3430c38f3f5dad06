"""The member sync: retries, refusals, circuit, maxFailures, timeouts, one key at a time."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

from kube.errors import ApiError
from propagator.observability.metrics import Metrics
from propagator.propagation import membersync
from propagator.propagation.membersync import MemberSync
from propagator.settings import Settings
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable
from tests.e2e.manifests import config_map
from tests.fakes import FakeMember

pytestmark = pytest.mark.anyio

APP = "shop/web"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Harness:
    def __init__(self, **policy: Any) -> None:
        self.table = WorkTable()
        self.metrics = Metrics()
        self.reported: list[tuple[str, bool]] = []
        """(application, whether the sync settled its cluster) per result."""
        self.fakes: dict[str, FakeMember] = {}
        self.sync = MemberSync(
            Settings(requeue_max_delay_s=2),
            self.table,
            self.metrics,
            anyio.CapacityLimiter(10),
            self._caches,
            lambda app, settled: self.reported.append((app, settled)),
        )
        self.policy = SyncPolicy(backoff_s=0.01, max_backoff_s=0.02, **policy)

    async def _caches(self, member: Any, kinds: Any, timeout_s: float) -> Any:
        return await self.fakes[member.name].caches(member, kinds, timeout_s)

    def member(self, name: str) -> Any:
        self.fakes[name] = FakeMember(name, namespaces=["shop"])
        return self.fakes[name].unit()

    def work(self, *clusters: str, app: str = APP, parent: SpanContext | None = None) -> None:
        works = {
            c: ClusterWork(
                app,
                c,
                (config_map("c", "shop", a="1"),),
                "r1",
                frozenset(),
                self.policy,
                trace_parent=parent,
            )
            for c in clusters
        }
        self.table.set_work(app, works, now=0.0, recheck_after_s=60)

    def value(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def _unavailable(cluster: str) -> ApiError:
    return ApiError(cluster, "connection refused", retryable=True)


async def test_success_records_the_state_and_reports() -> None:
    h = Harness()
    member = h.member("m1")
    h.work("m1")
    await h.sync.sync(member, APP)
    state = h.table.state(APP, "m1")
    assert state is not None
    assert state.applied
    assert state.attempts == 1
    assert not state.failed
    assert h.reported == [(APP, True)]
    # A recheck: in line already, it writes and changes nothing, so it asks for no status
    # refresh (every resync period, each cluster of every application is rechecked).
    await h.sync.sync(member, APP)
    assert h.reported == [(APP, True)]
    assert h.value("propagator_member_writes_total", cluster="m1", operation="apply") == 1
    # Drift found and healed is a write: reported.
    h.fakes["m1"].edit(("v1", "ConfigMap", "shop", "c"), lambda o: o["data"].update(a="2"))
    await h.sync.sync(member, APP)
    assert h.reported == [(APP, True), (APP, False)]


async def test_retryable_failures_come_back_then_count_as_failed() -> None:
    h = Harness(attempts=1)
    member = h.member("m1")
    h.work("m1")
    h.fakes["m1"].failures = [_unavailable("m1"), _unavailable("m1")]
    await h.sync.sync(member, APP)
    state = h.table.state(APP, "m1")
    assert state is not None
    assert not state.applied
    assert not state.failed
    assert state.error == "connection refused"
    assert len(member.queue) == 1  # queued again after the backoff
    await h.sync.sync(member, APP)
    assert state.failed
    assert state.attempts == 2
    assert h.value("propagator_apply_retries_total", cluster="m1") == 1
    assert h.value("propagator_applies_total", cluster="m1", result="failed") == 1
    assert len(member.queue) == 1  # and still retried, at the requeue backoff
    await h.sync.sync(member, APP)  # the member answers again
    assert state.applied
    assert not state.failed
    assert state.attempts == 3
    # Only the result that made the cluster count as failed settled it: a retry still
    # within its retries is more to come, and a failed cluster had settled already.
    assert h.reported == [(APP, False), (APP, True), (APP, False)]
    assert state.error is None


async def test_a_refusal_fails_at_once_is_not_retried_and_leaves_the_circuit_closed() -> None:
    h = Harness(attempts=3)
    member = h.member("m1")
    h.work("m1")
    for _ in range(5):
        h.fakes["m1"].failures = [ApiError("m1", "422 Invalid", status=422)]
        await h.sync.sync(member, APP)
    state = h.table.state(APP, "m1")
    assert state is not None
    assert state.failed
    assert "422" in (state.error or "")
    assert len(member.queue) == 0
    assert member.breaker.state() == "closed"


async def test_the_circuit_opens_and_skips_the_member_until_its_cool_down() -> None:
    h = Harness(attempts=0)
    member = h.member("m1")
    h.work("m1")
    h.fakes["m1"].failures = [_unavailable("m1")] * 3
    for _ in range(3):
        await h.sync.sync(member, APP)
    assert member.breaker.state() == "open"
    assert h.value("propagator_circuit_state", cluster="m1") == 2
    h.fakes["m1"].requests.clear()
    await h.sync.sync(member, APP)
    assert h.fakes["m1"].requests == []  # not even tried
    state = h.table.state(APP, "m1")
    assert state is not None
    assert state.failed
    assert "circuit open" in (state.error or "")


async def test_max_failures_stops_new_clusters_of_that_application_only() -> None:
    h = Harness(attempts=0, max_failures=0)
    members = {c: h.member(c) for c in ("m1", "m2")}
    h.work("m1", "m2")
    h.fakes["m1"].failures = [ApiError("m1", "403 Forbidden", status=403)]
    await h.sync.sync(members["m1"], APP)
    await h.sync.sync(members["m2"], APP)
    state = h.table.state(APP, "m2")
    assert state is not None
    assert state.failed
    assert not state.applied
    assert state.error == "not tried: rollout stopped after 1 failed clusters (maxFailures 0)"
    assert h.fakes["m2"].requests == []
    h.work("m2", app="shop/other")
    await h.sync.sync(members["m2"], "shop/other")
    other = h.table.state("shop/other", "m2")
    assert other is not None
    assert other.applied


async def test_a_slow_member_times_out_without_holding_others() -> None:
    h = Harness(attempts=0, timeout_s=0.2)
    slow, fast = h.member("slow"), h.member("fast")
    h.fakes["slow"].delay_s = 5
    h.work("slow", "fast")
    with anyio.fail_after(3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.sync.sync, slow, APP)
            tg.start_soon(h.sync.sync, fast, APP)
    slow_state, fast_state = h.table.state(APP, "slow"), h.table.state(APP, "fast")
    assert fast_state is not None
    assert fast_state.applied
    assert slow_state is not None
    assert slow_state.failed
    assert slow_state.error == "timeout (0.2s)"


async def test_a_forgotten_application_is_not_synced() -> None:
    h = Harness()
    member = h.member("m1")
    h.work("m1")
    h.table.forget(APP)
    await h.sync.sync(member, APP)
    assert h.fakes["m1"].requests == []
    assert h.reported == []


async def test_a_conflict_fails_the_cluster_names_the_object_and_is_not_retried() -> None:
    h = Harness(attempts=3)
    member = h.member("m1")
    h.fakes["m1"].put(config_map("c", "shop", a="theirs"))  # exists without a stamp
    h.work("m1")
    await h.sync.sync(member, APP)
    state = h.table.state(APP, "m1")
    assert state is not None
    assert state.failed
    assert state.conflict
    assert not state.applied
    assert state.error is not None
    assert state.error.startswith("conflict: v1 ConfigMap shop/c exists on the member")
    assert len(member.queue) == 0  # waits for a change or the resync
    assert h.value("propagator_applies_total", cluster="m1", result="conflict") == 1
    assert h.value("propagator_applies_total", cluster="m1", result="applied") == 0
    assert h.fakes["m1"].objects["v1", "ConfigMap", "shop", "c"]["data"] == {"a": "theirs"}


async def test_a_cluster_sync_joins_the_trace_of_the_reconcile_that_asked_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("test")
    monkeypatch.setattr(membersync, "tracer", tracer)
    h = Harness()
    member = h.member("m1")
    with tracer.start_as_current_span("reconcile") as reconcile:
        h.work("m1", parent=reconcile.get_span_context())
    await h.sync.sync(member, APP)  # later, in another task: no span in progress
    (apply,) = [s for s in spans.get_finished_spans() if s.name == "apply"]
    assert apply.parent is not None
    assert apply.parent.span_id == reconcile.get_span_context().span_id
    assert apply.context.trace_id == reconcile.get_span_context().trace_id
    assert apply.attributes == {"cluster": "m1", "application": APP}


async def test_a_sync_confirms_or_overturns_what_the_status_carried_over_a_restart() -> None:
    h = Harness(attempts=0)
    member = h.member("m1")
    works = {
        "m1": ClusterWork(APP, "m1", (config_map("c", "shop", a="1"),), "r1", frozenset(), h.policy)
    }
    h.table.set_work(APP, works, now=0.0, recheck_after_s=60, reported={"m1": ("r1", 1)})
    state = h.table.state(APP, "m1")
    assert state is not None
    assert (state.applied, state.carried) == (True, True)
    h.fakes["m1"].failures = [_unavailable("m1")]
    await h.sync.sync(member, APP)
    assert (state.applied, state.carried) == (False, False)
    assert state.error == "connection refused"
    state.applied, state.carried = True, True  # carried again, as after another restart
    await h.sync.sync(member, APP)
    assert (state.applied, state.carried) == (True, False)
    assert h.reported[-1] == (APP, False)  # it was applied before: nothing newly settled
