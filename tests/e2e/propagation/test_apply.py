"""One member sync on a real member: the namespace created (or found to exist), unchanged
objects (judged from the watch caches) not written again."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.connection import NO_STORED_VERSION, KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import load_kubeconfig
from kube.session import ConnectionOptions
from propagator.propagation.clustersync import SyncReport, sync_cluster
from propagator.runtime.memberregistry import Member, MemberRegistry
from propagator.work.objects import (
    APP_LABEL,
    MEMBER_LABEL,
    Owner,
    member_selector,
    owner_label_of,
)
from propagator.work.table import ClusterWork, SyncPolicy
from tests.e2e.conftest import Fleet
from tests.e2e.manifests import config_map
from tests.e2e.waiting import HANG_GUARD_S


def _member(fleet: Fleet, name: str) -> KubeConnection:
    loaded = load_kubeconfig(fleet.kubeconfig(name).read_text(), source=name)
    return KubeConnection(name, loaded.credentials, ConnectionOptions())


def _objects(image: str) -> list[dict[str, Any]]:
    labels = {"app": "web"}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web-config", "namespace": "applied"},
            "data": {"mode": "a"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "applied"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": image}]},
                },
            },
        },
    ]


async def _caught_up(member: Member, conn: KubeConnection, api_version: str, kind: str) -> None:
    """Wait until the member's cache of ``kind`` holds what the member holds (the
    Deployment controller keeps writing status for a while)."""
    informer = member.cached(api_version, kind)
    assert informer is not None
    with anyio.fail_after(HANG_GUARD_S):
        while True:
            listing = await conn.list(api_version, kind, "applied", labelSelector=APP_LABEL)
            live = listing["items"]
            versions = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in live}
            cached = {
                o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                for o in informer.snapshot()
                if o["metadata"].get("namespace") == "applied"
            }
            if versions and versions == cached:
                return
            await anyio.sleep(0.1)


def test_a_member_sync_creates_the_namespace_and_writes_only_what_changed(fleet: Fleet) -> None:
    name = fleet.member_names[0]
    conn = _member(fleet, name)

    async def noop(*_: Any) -> None:
        return None

    async def scenario() -> None:
        registry = MemberRegistry(
            selector=member_selector,
            index=owner_label_of,
            sync=noop,
            on_object=lambda *_: None,
            on_added=lambda _: None,
            workers_per_member=1,
            circuit_failure_threshold=5,
            circuit_cool_down_s=30,
            requeue_max_delay_s=30,
        )
        async with anyio.create_task_group() as tg:
            await tg.start(registry.run)
            registry.sync({name: MemberMonitor(name, "v", HealthPolicy(), connection=conn)})
            member = registry.get(name)
            assert member is not None

            async def sync(image: str) -> SyncReport:
                objects = tuple(_objects(image))
                work = ClusterWork("shop/web", name, objects, image, frozenset(), SyncPolicy())
                return await sync_cluster(member, work, registry.caches_synced, 30)

            assert (await sync("nginx:1.27")).applied == 2
            namespace = await conn.get("v1", "Namespace", "applied")
            assert namespace["metadata"]["labels"][MEMBER_LABEL] == name  # the caches see it
            assert not Owner("shop", "web", "").annotated(namespace)  # not the application's
            live = await conn.get("apps/v1", "Deployment", "web", "applied")
            assert Owner("shop", "web", "").owns(live)
            assert live["metadata"]["managedFields"][0]["manager"] == "propagator"
            version = live["metadata"]["resourceVersion"]
            await _caught_up(member, conn, "apps/v1", "Deployment")
            await _caught_up(member, conn, "v1", "ConfigMap")
            # Nothing changed: judged from the caches, nothing is written.
            assert (await sync("nginx:1.27")).applied == 0
            # One object changed: only that one is written.
            assert (await sync("nginx:1.28")).applied == 1
            live = await conn.get("apps/v1", "Deployment", "web", "applied")
            assert live["metadata"]["resourceVersion"] != version
            assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"

            # A namespace someone else made: creating it is refused as existing, it is
            # left as it is, and what goes into it is read before it is written.
            theirs = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "theirs"}}
            await conn.create(theirs)
            objects = (config_map("settings", "theirs", mode="a"),)
            work = ClusterWork("shop/web", name, objects, "r1", frozenset(), SyncPolicy())
            assert (await sync_cluster(member, work, registry.caches_synced, 30)).applied == 1
            assert "theirs" in member.namespaces
            namespace = await conn.get("v1", "Namespace", "theirs")
            assert MEMBER_LABEL not in (namespace["metadata"].get("labels") or {})
            await conn.delete("v1", "Namespace", "theirs")
            tg.cancel_scope.cancel()
        await conn.close()

    anyio.run(scenario)


def test_an_apply_as_a_create_makes_a_new_object_and_leaves_one_that_exists(
    fleet: Fleet,
) -> None:
    # What a member sync relies on to write an object its caches cannot see in one
    # request: the real API server creates it, or refuses and writes nothing.
    conn = _member(fleet, fleet.member_names[0])
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "only-new", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }

    async def scenario() -> None:
        try:
            for obj in (config_map("only-new", "default", mode="a"), service):
                made = await conn.apply(obj, new=True)
                assert made["metadata"]["resourceVersion"] != NO_STORED_VERSION
                assert "resourceVersion" not in obj["metadata"]  # the caller's copy
                changed = {**obj, "metadata": {**obj["metadata"], "labels": {"mode": "b"}}}
                with pytest.raises(ApiError) as refused:
                    await conn.apply(changed, new=True)
                assert refused.value.not_new
                live = await conn.get("v1", obj["kind"], "only-new", "default")
                assert live["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
                assert "labels" not in live["metadata"]
        finally:
            for kind in ("ConfigMap", "Service"):
                await conn.delete("v1", kind, "only-new", "default")
            await conn.close()

    anyio.run(scenario)
