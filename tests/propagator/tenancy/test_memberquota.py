"""The tenant's ResourceQuotas on a member: written before the sync writes, within the
limit at every step (a fake member)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from api.quantity import parse_quantity
from kube.errors import ApiError
from propagator.tenancy.memberquota import QuotaEnforcer, Usage
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable
from tests.e2e.manifests import config_map
from tests.fakes import FakeMember, with_pods

pytestmark = pytest.mark.anyio

RQ = ("v1", "ResourceQuota")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def quota(**hard: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "team"},
        "spec": {"namespaces": ["a", "b"], "destinations": ["a", "b"], "hard": hard},
    }


class Harness:
    def __init__(self, quotas: list[dict[str, Any]], timeout_s: float = 5.0) -> None:
        self.fake = FakeMember("m1", namespaces=["a", "b"])
        self.member = self.fake.unit()
        self.table = WorkTable()
        self.changed: list[str] = []
        self.enforcer = QuotaEnforcer(
            lambda: quotas,
            lambda ns: {},
            lambda cluster: {},
            self.table,
            self.fake.caches,
            timeout_s,
            self.changed.append,
        )

    def work(self, namespace: str) -> ClusterWork:
        app = f"{namespace}/web"
        work = ClusterWork(
            app, "m1", (config_map("c", namespace, x="1"),), "r1", frozenset(), SyncPolicy()
        )
        self.table.set_work(app, {"m1": work}, now=0.0, recheck_after_s=60)
        return work

    def hard(self, namespace: str) -> dict[str, str]:
        rq = self.fake.objects.get(("v1", "ResourceQuota", namespace, "propagator-tenant-team"))
        return {} if rq is None else dict(rq["spec"]["hard"])

    def counted(self, namespace: str) -> dict[str, str]:
        rq = self.fake.objects[("v1", "ResourceQuota", namespace, "propagator-tenant-team")]
        return dict(rq["status"]["used"])

    def use(self, namespace: str, **used: str) -> None:
        key = ("v1", "ResourceQuota", namespace, "propagator-tenant-team")
        rq = self.fake.objects[key]
        rq["status"] = {**rq.get("status", {}), "used": used}  # the member's quota admission


async def test_the_first_namespace_gets_the_whole_limit_then_they_share() -> None:
    h = Harness([quota(pods=6, cpu="2")])
    await h.enforcer.guard(h.member, h.work("a"))
    assert h.hard("a") == {"cpu": "2", "pods": "6"}
    h.use("a", pods="1", cpu="500m")
    await h.enforcer.guard(h.member, h.work("b"))
    # a keeps its use plus half the room; b gets the other half (a the odd pod: first)
    assert h.hard("a") == {"cpu": "1250m", "pods": "4"}
    assert h.hard("b") == {"cpu": "750m", "pods": "2"}
    assert h.enforcer.usage["team", "m1"] == Usage(
        {"pods": Decimal(6), "cpu": Decimal(2)}, {"pods": Decimal(1), "cpu": Decimal("0.5")}
    )
    assert h.changed


async def test_lowered_quotas_are_written_before_raised_ones() -> None:
    h = Harness([quota(pods=6)])
    await h.enforcer.guard(h.member, h.work("a"))
    h.fake.requests.clear()
    await h.enforcer.guard(h.member, h.work("b"))
    writes = [
        key[2] for verb, key in h.fake.requests if verb == "apply" and key[1] == "ResourceQuota"
    ]
    assert writes == ["a", "b"]  # a comes down from 6 to 3 before b gets its 3


async def test_an_application_of_no_tenant_gets_no_quota() -> None:
    h = Harness([])
    await h.enforcer.guard(h.member, h.work("a"))
    assert h.fake.writes() == []


async def test_the_stored_values_never_sum_above_the_limit_between_writes() -> None:
    h = Harness([quota(pods=6, cpu="2")])
    sums: list[tuple[Decimal, Decimal]] = []
    apply = h.fake.apply

    async def recording(obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        answer = await apply(obj, **kw)
        stored = [o for k, o in h.fake.objects.items() if k[1] == "ResourceQuota"]
        pods = sum((parse_quantity(o["spec"]["hard"]["pods"]) for o in stored), Decimal(0))
        cpu = sum((parse_quantity(o["spec"]["hard"]["cpu"]) for o in stored), Decimal(0))
        sums.append((pods, cpu))
        return answer

    h.fake.apply = recording  # type: ignore[method-assign]
    await h.enforcer.guard(h.member, h.work("a"))
    h.use("a", pods="2", cpu="1")
    await h.enforcer.guard(h.member, h.work("b"))
    assert len(sums) == 3  # a alone; a lowered; then b
    assert sums[-1] == (Decimal(6), Decimal(2))
    assert all(pods <= 6 and cpu <= 2 for pods, cpu in sums), sums


async def test_a_raise_is_capped_by_what_the_others_hold_now_not_by_a_stale_cache() -> None:
    h = Harness([quota(pods=6)])
    await h.enforcer.guard(h.member, h.work("a"))
    await h.enforcer.guard(h.member, h.work("b"))
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {"pods": "3"})
    h.use("a", pods="3")
    h.use("b", pods="1")
    stale = await h.fake.caches(h.member, [RQ], 5.0)  # the cache saw b at 1 pod
    h.use("b", pods="3")  # b filled up since

    reads = 0

    async def behind(*args: Any) -> Any:  # when the rebalance reads it; then it catches up
        nonlocal reads
        reads += 1
        return stale if reads == 1 else await h.fake.caches(*args)

    h.enforcer.caches = behind
    await h.enforcer.rebalance(h.member, quota(pods=6))
    # From the cache a would get 4 and b 2; b comes down to 2 but still runs 3 pods, so a
    # may not grow: 3 + 3 is the limit already.
    assert h.hard("b") == {"pods": "2"}
    assert h.hard("a") == {"pods": "3"}
    # once the cache catches up, each holds its use: the limit is reached
    h.enforcer.caches = h.fake.caches
    await h.enforcer.rebalance(h.member, quota(pods=6))
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {"pods": "3"})


async def test_what_a_lowered_quota_admitted_until_it_was_in_force_limits_a_raise() -> None:
    # Its admission checks status.hard, which the member's quota controller copies from
    # what was written: until it has, pods still come in against the old value, after the
    # lowering write answered with the use before them.
    h = Harness([quota(pods=6)])
    await h.enforcer.guard(h.member, h.work("a"))
    await h.enforcer.guard(h.member, h.work("b"))
    h.use("a", pods="3")
    h.use("b", pods="1")
    reads = 0

    async def admitting(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        if reads == 2:  # waiting for the take-up: b admits two more against its old 3
            h.use("b", pods="3")
        return await h.fake.caches(*args)

    h.enforcer.caches = admitting
    await h.enforcer.rebalance(h.member, quota(pods=6))
    assert h.hard("b") == {"pods": "2"}  # lowered (b still runs 3: nothing is evicted)
    assert h.hard("a") == {"pods": "3"}  # not raised to 4: 4 + 3 is over the limit


async def test_pods_the_members_count_misses_are_held_back_from_the_limit() -> None:
    # A member's quota controller can count short: it recounts a quota whose hard we
    # changed from its own pod cache, which may miss a pod admitted a moment before,
    # and stays short until its next full recount.
    h = Harness([quota(pods=6)])
    await h.enforcer.guard(h.member, h.work("a"))
    await h.enforcer.guard(h.member, h.work("b"))
    h.use("a", pods="1")
    h.use("b", pods="0")  # one pod runs in b, uncounted
    with_pods(h.member, {"a": 1, "b": 1})
    await h.enforcer.rebalance(h.member, quota(pods=6))

    def admitted() -> int:  # what runs, plus what the member's own quotas still admit
        return 2 + sum(int(h.hard(ns)["pods"]) - int(h.counted(ns)["pods"]) for ns in "ab")

    assert admitted() == 6  # not 7: b's quota admits one pod fewer than it shows room for
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {"pods": "2"})
    assert h.enforcer.usage["team", "m1"].used == {"pods": Decimal(2)}  # the status: both
    assert h.enforcer.uncounted["team", "m1"] == {"b": {"pods": Decimal(1)}}
    # once the member counts it, the whole limit is shared again
    h.use("b", pods="1")
    await h.enforcer.rebalance(h.member, quota(pods=6))
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {"pods": "3"})
    assert admitted() == 6
    assert h.enforcer.uncounted["team", "m1"] == {}


async def test_a_pod_change_in_a_tenants_namespace_rebalances_that_tenant_only() -> None:
    h = Harness([quota(pods=6)])
    await h.enforcer.guard(h.member, h.work("a"))
    queued: list[tuple[str, str]] = []
    h.enforcer.changed = lambda cluster, tenant: queued.append((cluster, tenant))  # type: ignore[method-assign]
    rq = h.fake.objects[("v1", "ResourceQuota", "a", "propagator-tenant-team")]
    h.enforcer.observed("m1", None, rq)  # as the member's quota cache reports it
    h.enforcer.pods_changed("m1", "a")
    h.enforcer.pods_changed("m1", "elsewhere")  # no tenant's quota there
    h.enforcer.pods_changed("m2", "a")  # another member
    assert queued == [("m1", "team"), ("m1", "team")]
    queued.clear()
    h.enforcer.observed("m1", rq, None)  # the quota is gone
    h.enforcer.pods_changed("m1", "a")
    assert queued == [("m1", "team")]  # (the deletion itself)


async def test_raises_wait_until_the_members_quota_controller_took_up_the_lowered_values() -> None:
    # Its admission checks status.hard, which kube-controller-manager copies from what
    # was written: raising b before a's lowered value is in force there could let both
    # fill up past the limit.
    h = Harness([quota(pods=6)], timeout_s=0.2)
    await h.enforcer.guard(h.member, h.work("a"))
    h.fake.quota_controller = False  # (stopped)
    with pytest.raises(ApiError) as refused:
        await h.enforcer.guard(h.member, h.work("b"))
    assert refused.value.retryable
    assert "has not taken up the quota of tenant team in a within 0.2s" in str(refused.value)
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {})  # lowered; b not raised yet
    h.fake.quota_controller = True
    h.fake.edit(("v1", "ResourceQuota", "a", "propagator-tenant-team"), lambda rq: None)
    await h.enforcer.guard(h.member, h.work("b"))
    assert (h.hard("a"), h.hard("b")) == ({"pods": "3"}, {"pods": "3"})


async def test_a_new_quota_is_written_before_the_work_only_once_the_member_enforces_it() -> None:
    # Until its quota controller fills in status.hard, a new quota limits nothing there.
    h = Harness([quota(pods=6)], timeout_s=0.2)
    h.fake.quota_controller = False
    with pytest.raises(ApiError, match="has not taken up the quota of tenant team in a"):
        await h.enforcer.guard(h.member, h.work("a"))
    assert h.hard("a") == {"pods": "6"}  # written, not yet enforced: the sync waits


async def test_cpu_the_members_count_misses_is_held_back_too() -> None:
    h = Harness([quota(**{"requests.cpu": "2"})])
    await h.enforcer.guard(h.member, h.work("a"))
    await h.enforcer.guard(h.member, h.work("b"))
    h.use("a", **{"requests.cpu": "500m"})
    h.use("b", **{"requests.cpu": "0"})  # its pod of 500m uncounted
    with_pods(h.member, {"a": 1, "b": 1}, cpu="500m")
    await h.enforcer.rebalance(h.member, quota(**{"requests.cpu": "2"}))
    # 1.5 is split from the member's figures (500m, 0), each getting half of the 1 left:
    # what runs (1) and what the quotas admit (500m + 500m) make the limit, not 2.5
    assert (h.hard("a"), h.hard("b")) == ({"requests.cpu": "1"}, {"requests.cpu": "500m"})
    assert h.enforcer.usage["team", "m1"].used == {"requests.cpu": Decimal(1)}
