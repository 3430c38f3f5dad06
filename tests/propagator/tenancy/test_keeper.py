"""The platform's part of a tenant's member namespaces (propagator/tenancy/keeper.py): the
Pod Security and tenant labels and the default LimitRange and NetworkPolicy, written before
a sync writes and written again when undone (a fake member)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from propagator.propagation.workrecord import REMOVAL
from propagator.settings import Settings
from propagator.tenancy.keeper import NamespaceKeeper
from propagator.tenancy.policy import TenantPolicy, policy_for
from propagator.work.table import ClusterWork, SyncPolicy
from tests.e2e.manifests import config_map
from tests.fakes import FakeMember

pytestmark = pytest.mark.anyio

PLATFORM = Settings().platform()
NS = ("v1", "Namespace", "", "shop")
LR = ("v1", "LimitRange", "shop", "propagator-tenant-team")
NP = ("networking.k8s.io/v1", "NetworkPolicy", "shop", "propagator-tenant-team")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tenant(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "team"}, "spec": {"namespaces": ["shop"], **spec}}


class Harness:
    def __init__(self, quota: dict[str, Any] | None) -> None:
        self.quota = quota
        self.fake = FakeMember("m1", namespaces=["shop"])
        self.member = self.fake.unit()
        self.keeper = NamespaceKeeper(self.policy_of, self.fake.caches, 5.0)

    def policy_of(self, app: str) -> tuple[TenantPolicy, Mapping[str, Any] | None]:
        return policy_for(app.split("/", 1)[0], self.quota, PLATFORM), self.quota

    def work(self, app: str = "shop/web", removal: bool = False) -> ClusterWork:
        objects = () if removal else (config_map("c", "shop", x="1"),)
        revision = REMOVAL if removal else "r1"
        return ClusterWork(app, "m1", objects, revision, frozenset(), SyncPolicy())

    async def rewrite_queued(self) -> None:
        """Do what the keeper's queue holds, as its run loop would."""
        while len(self.keeper.queue):
            key = await self.keeper.queue.get()
            assert key is not None
            await self.keeper.rewrite(key, lambda name: self.member if name == "m1" else None)
            self.keeper.queue.done(key)

    def labels(self) -> dict[str, str]:
        return dict(self.fake.objects[NS]["metadata"].get("labels") or {})


PSA = "pod-security.kubernetes.io/"


async def test_a_tenant_namespace_gets_its_level_its_tenant_and_its_defaults() -> None:
    h = Harness(
        tenant(
            podSecurity={"level": "restricted"},
            namespaceDefaults={
                "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}, "max": {}}],
                "networkPolicy": {
                    "allowedNamespaces": [
                        {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}
                    ]
                },
            },
        )
    )
    await h.keeper.guard(h.member, h.work())
    labels = h.labels()
    for mode in ("enforce", "audit", "warn"):
        assert labels[PSA + mode] == "restricted"
        assert labels[f"{PSA}{mode}-version"] == "latest"
    assert labels["propagator.io/tenant"] == "team"
    assert h.fake.objects[LR]["spec"] == {
        "limits": [{"type": "Container", "defaultRequest": {"cpu": "100m"}}]
    }
    policy = h.fake.objects[NP]
    assert policy["metadata"]["annotations"] == {"propagator.io/tenant": "team"}
    assert policy["spec"]["podSelector"] == {}
    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {"namespaceSelector": {"matchLabels": {"propagator.io/tenant": "team"}}},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}},
            ]
        }
    ]
    # Written once: the next sync of the same work writes nothing.
    writes = len(h.fake.writes())
    await h.keeper.guard(h.member, h.work())
    assert len(h.fake.writes()) == writes


async def test_the_platforms_applications_those_of_no_tenant_and_removals_leave_it_alone() -> None:
    """A namespace of no tenant may be one the member shares with what it runs otherwise
    (``default``): the hub's check alone holds such applications to the default level."""
    h = Harness(None)
    await h.keeper.guard(h.member, h.work())
    h.quota = tenant(namespaceDefaults={"networkPolicy": {}})
    await h.keeper.guard(h.member, h.work("propagator-system/web"))
    await h.keeper.guard(h.member, h.work(removal=True))
    assert h.fake.writes() == []


async def test_what_is_undone_on_the_member_is_written_again() -> None:
    h = Harness(tenant(namespaceDefaults={"networkPolicy": {"ingressFrom": "SameNamespace"}}))
    await h.keeper.guard(h.member, h.work())
    assert h.fake.objects[NP]["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    # Events that change nothing of the platform's part queue nothing.
    h.keeper.observed("m1", h.fake.objects[NS], h.fake.objects[NS])
    assert len(h.keeper.queue) == 0
    # Someone relabels the namespace privileged, then deletes the network policy.
    before = h.fake.objects[NS]
    h.fake.edit(NS, lambda ns: ns["metadata"]["labels"].update({PSA + "enforce": "privileged"}))
    h.keeper.observed("m1", before, h.fake.objects[NS])
    gone = h.fake.objects.pop(NP)
    h.keeper.observed("m1", gone, None)
    await h.rewrite_queued()
    assert h.labels()[PSA + "enforce"] == "baseline"
    assert NP in h.fake.objects


async def test_a_default_the_tenant_quota_no_longer_asks_for_is_deleted() -> None:
    h = Harness(
        tenant(namespaceDefaults={"limits": [{"type": "Container", "default": {"cpu": "1"}}]})
    )
    await h.keeper.guard(h.member, h.work())
    assert LR in h.fake.objects
    h.quota = tenant(podSecurity={"level": "restricted"})
    h.keeper.tenant_changed("other")
    assert len(h.keeper.queue) == 0
    h.keeper.tenant_changed("team")
    await h.rewrite_queued()
    assert LR not in h.fake.objects
    assert h.labels()[PSA + "enforce"] == "restricted"


async def test_the_members_own_completion_of_a_write_is_not_a_change() -> None:
    """A member stores a LimitRange completed (``defaultRequest`` from ``default``): the
    event of the keeper's own write must not look undone (or it would write forever)."""
    h = Harness(
        tenant(namespaceDefaults={"limits": [{"type": "Container", "default": {"cpu": "1"}}]})
    )
    await h.keeper.guard(h.member, h.work())
    stored = h.fake.objects[LR]
    stored["spec"]["limits"][0]["defaultRequest"] = {"cpu": "1"}  # same resourceVersion
    h.keeper.observed("m1", None, stored)
    assert len(h.keeper.queue) == 0
    h.fake.edit(LR, lambda lr: lr["spec"]["limits"][0].update(default={"cpu": "0"}))
    h.keeper.observed("m1", stored, h.fake.objects[LR])
    assert len(h.keeper.queue) == 1
    await h.rewrite_queued()
    assert h.fake.objects[LR]["spec"]["limits"] == [{"type": "Container", "default": {"cpu": "1"}}]
