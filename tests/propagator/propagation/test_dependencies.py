"""What an application's workloads use, brought along (propagation.dependencies)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kube.connection import KubeConnection
from kube.errors import ApiError
from propagator.interpreter.registry import Interpreters
from propagator.propagation.dependencies import (
    CHECKSUM_ANNOTATION,
    MAX_DEPENDENCIES,
    DependencyError,
    bring,
    dependencies_condition,
    references,
)
from tests.e2e.manifests import config_map, deployment

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _using(*names: str, secret: str | None = None, account: str | None = None) -> dict[str, Any]:
    web = deployment("web", "shop", "nginx:1")
    pod = web["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": n, "configMap": {"name": n}} for n in names]
    if secret:
        pod["containers"][0]["envFrom"] = [{"secretRef": {"name": secret}}]
    if account:
        pod["serviceAccountName"] = account
    return web


class _Hub:
    """The hub's objects in one namespace, and the lists asked of it."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = list(objects)
        self.lists: list[tuple[str, str, str | None]] = []
        self.gets: list[tuple[str, str]] = []
        self.forbidden: set[str] = set()

    async def get(self, api_version: str, kind: str, name: str, namespace: str) -> Any:
        self.gets.append((kind, name))
        if kind in self.forbidden:
            raise ApiError("hub", f"GET: 403 Forbidden: cannot get {kind}", status=403)
        for o in self.objects:
            if (o["apiVersion"], o["kind"], o["metadata"]["name"]) == (api_version, kind, name):
                return o
        raise ApiError("hub", f"GET: 404 NotFound: {kind} {name!r} not found", status=404)

    async def list(self, api_version: str, kind: str, namespace: str | None = None) -> Any:
        self.lists.append((api_version, kind, namespace))
        if kind in self.forbidden:
            raise ApiError("hub", f"GET: 403 Forbidden: cannot list {kind}", status=403)
        items = [
            {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            for o in self.objects
            if (o["apiVersion"], o["kind"]) == (api_version, kind)
        ]
        return {"items": items}


def _secret(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}


async def test_what_a_workload_uses_comes_along_read_by_name() -> None:
    hub = _Hub(
        config_map("a", "shop", x="1"),
        config_map("b", "shop", x="2"),
        config_map("unused", "shop", x="3"),
        _secret("creds", token="dA=="),
    )
    hub.objects[0]["metadata"]["resourceVersion"] = "9"
    brought = await bring(
        [_using("a", "b", "gone", secret="creds", account="runner")],
        "shop",
        cast(KubeConnection, hub),
        Interpreters(),
        roll_on_change=False,
    )
    names = [(o["kind"], o["metadata"]["name"]) for o in brought.objects]
    assert names == [("ConfigMap", "a"), ("ConfigMap", "b"), ("Secret", "creds")]
    assert "resourceVersion" not in brought.objects[0]["metadata"]
    assert brought.missing == ["ConfigMap/gone", "ServiceAccount/runner"]
    assert hub.lists == []  # "unused" and whatever else the namespace holds are not read
    assert sorted(hub.gets) == [
        ("ConfigMap", "a"),
        ("ConfigMap", "b"),
        ("ConfigMap", "gone"),
        ("Secret", "creds"),
        ("ServiceAccount", "runner"),
    ]
    condition = dependencies_condition(brought)
    assert condition[:3] == ("Dependencies", False, "NotOnHub")
    assert "ConfigMap/gone" in condition[3]


async def test_many_of_one_kind_are_read_with_one_list() -> None:
    names = [f"c{i}" for i in range(9)]
    hub = _Hub(*(config_map(n, "shop", x="1") for n in names))
    brought = await bring(
        [_using(*names)], "shop", cast(KubeConnection, hub), Interpreters(), False
    )
    assert len(brought.objects) == 9
    assert hub.lists == [("v1", "ConfigMap", "shop")]
    assert hub.gets == []


async def test_what_the_manifests_hold_already_is_not_read() -> None:
    hub = _Hub()
    brought = await bring(
        [_using("a"), config_map("a", "shop", x="1")],
        "shop",
        cast(KubeConnection, hub),
        Interpreters(),
        roll_on_change=False,
    )
    assert brought.objects == []
    assert brought.missing == []
    assert hub.lists == []


async def test_roll_on_change_stamps_a_checksum_that_follows_the_content() -> None:
    async def checksum(value: str) -> str:
        web = _using("a")
        hub = _Hub(config_map("a", "shop", x=value))
        await bring([web], "shop", cast(KubeConnection, hub), Interpreters(), roll_on_change=True)
        return str(web["spec"]["template"]["metadata"]["annotations"][CHECKSUM_ANNOTATION])

    assert await checksum("1") == await checksum("1")
    assert await checksum("1") != await checksum("2")


async def test_a_kind_the_controller_may_not_read_is_named_not_brought() -> None:
    hub = _Hub(config_map("a", "shop", x="1"))
    hub.forbidden.add("Secret")  # as the chart has it: no Secrets outside its namespace
    brought = await bring(
        [_using("a", secret="creds")], "shop", cast(KubeConnection, hub), Interpreters(), False
    )
    assert [o["metadata"]["name"] for o in brought.objects] == ["a"]
    assert brought.missing == ["Secret/creds (the controller may not read them on the hub)"]


def test_a_workload_naming_thousands_of_objects_is_refused_at_once() -> None:
    web = _using(*(f"c{i}" for i in range(MAX_DEPENDENCIES + 1)))
    # The built-in rule's iteration budget stops it, or the count does: either way the
    # reconcile gets a refusal that names the workload, without reading the hub.
    with pytest.raises(DependencyError, match="Deployment web"):
        references([web], "shop", Interpreters())


def test_objects_in_other_namespaces_are_not_read() -> None:
    web = _using("a")
    web["metadata"]["namespace"] = "other"
    assert references([web], "shop", Interpreters()) == {}


def test_projected_volumes_env_references_and_init_containers_count_too() -> None:
    web = deployment("web", "shop", "nginx:1")
    pod = web["spec"]["template"]["spec"]
    pod["volumes"] = [
        {
            "name": "p",
            "projected": {
                "sources": [{"configMap": {"name": "p-cm"}}, {"secret": {"name": "p-s"}}]
            },
        }
    ]
    pod["initContainers"] = [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-cm"}}]}]
    pod["containers"][0]["env"] = [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-s", "key": "k"}}},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "D", "value": "plain"},
    ]
    found = references([web], "shop", Interpreters())[0]
    assert sorted(found) == [
        ("v1", "ConfigMap", "env-cm"),
        ("v1", "ConfigMap", "init-cm"),
        ("v1", "ConfigMap", "p-cm"),
        ("v1", "Secret", "env-s"),
        ("v1", "Secret", "p-s"),
    ]
