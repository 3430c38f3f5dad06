"""Applying to a real member: namespaces created, unchanged objects not written again."""

from __future__ import annotations

from typing import Any

from fleet.connection import ConnectionOptions, KubeConnection
from fleet.kubeconfig import load_kubeconfig
from propagator.propagation.apply import apply_objects
from propagator.propagation.resources import owned_by
from tests.e2e.conftest import Fleet


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


def test_apply_creates_the_namespace_and_skips_what_is_unchanged(fleet: Fleet) -> None:
    conn = _member(fleet, fleet.member_names[0])
    try:
        assert (
            apply_objects(conn, _objects("nginx:1.27"), app_namespace="shop", app_name="web") == 2
        )
        assert conn.get("v1", "Namespace", "applied")
        live = conn.get("apps/v1", "Deployment", "web", "applied")
        assert owned_by(live, "shop", "web")
        assert live["metadata"]["managedFields"][0]["manager"] == "propagator"
        # Nothing changed: no write at all.
        assert (
            apply_objects(conn, _objects("nginx:1.27"), app_namespace="shop", app_name="web") == 0
        )
        version = conn.get("apps/v1", "Deployment", "web", "applied")["metadata"]["resourceVersion"]
        # One object changed: only that one is written.
        assert (
            apply_objects(conn, _objects("nginx:1.28"), app_namespace="shop", app_name="web") == 1
        )
        live = conn.get("apps/v1", "Deployment", "web", "applied")
        assert live["metadata"]["resourceVersion"] != version
        assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    finally:
        conn.close()
