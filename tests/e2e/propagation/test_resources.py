"""Resolving an application's resources from the real hub."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from api.application import ApplicationPropagation
from fleet.local import HUB
from kube.hub import hub_connection
from kube.session import ConnectionOptions
from propagator.propagation.resolve import resolve
from propagator.settings import Settings
from propagator.tenancy.policy import Forbidden, policy_for
from tests.e2e.conftest import Fleet


def test_selectors_pick_hub_objects_without_server_fields(fleet: Fleet) -> None:
    core = fleet.core(HUB)
    core.create_namespace({"metadata": {"name": "resolve"}})
    for name, labels in (
        ("b-config", {"app": "web"}),
        ("a-config", {"app": "web"}),
        ("other", {"app": "api"}),
    ):
        core.create_namespaced_config_map(
            "resolve", {"metadata": {"name": name, "labels": labels}, "data": {"k": name}}
        )
    core.create_namespaced_secret(
        "resolve", {"metadata": {"name": "creds"}, "stringData": {"password": "x"}}
    )
    app = ApplicationPropagation.model_validate(
        {
            "metadata": {"name": "web", "namespace": "resolve"},
            "spec": {
                "fleet": "f",
                "resources": {
                    "manifests": [
                        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
                    ],
                    "selectors": [
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "labelSelector": {"matchLabels": {"app": "web"}},
                        },
                        {"apiVersion": "v1", "kind": "Secret", "name": "creds"},
                    ],
                },
            },
        }
    )
    hub = hub_connection(fleet.kubeconfig(HUB), options=ConnectionOptions())

    async def resolved() -> list[dict[str, Any]]:
        try:
            return await resolve(app, hub, policy_for("resolve", None, Settings().platform()))
        finally:
            await hub.close()

    objects = anyio.run(resolved)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Service", "web"),
        ("ConfigMap", "a-config"),
        ("ConfigMap", "b-config"),
        ("Secret", "creds"),
    ]
    for obj in objects[1:]:
        assert obj["apiVersion"] == "v1"
        assert "status" not in obj
        assert not {"uid", "resourceVersion", "managedFields", "creationTimestamp"} & set(
            obj["metadata"]
        )
    assert objects[1]["data"] == {"k": "a-config"}


def test_selectors_never_reach_cluster_scoped_hub_objects_outside_the_platform(
    fleet: Fleet,
) -> None:
    fleet.ensure_namespace("reach")
    app = ApplicationPropagation.model_validate(
        {
            "metadata": {"name": "grab", "namespace": "reach"},
            "spec": {
                "fleet": "f",
                "resources": {
                    "selectors": [
                        {
                            "apiVersion": "rbac.authorization.k8s.io/v1",
                            "kind": "ClusterRole",
                            "name": "cluster-admin",
                        }
                    ]
                },
            },
        }
    )
    platform = Settings(platform_namespaces="reach").platform()

    async def resolved(namespace_is_platform: bool) -> list[dict[str, Any]]:
        hub = hub_connection(fleet.kubeconfig(HUB), options=ConnectionOptions())
        rules = platform if namespace_is_platform else Settings().platform()
        try:
            return await resolve(app, hub, policy_for("reach", None, rules))
        finally:
            await hub.close()

    with pytest.raises(Forbidden, match=r"spec.resources.selectors\[0\]: selectors read only"):
        anyio.run(resolved, False)
    # a platform namespace may pick it
    assert [o["metadata"]["name"] for o in anyio.run(resolved, True)] == ["cluster-admin"]
