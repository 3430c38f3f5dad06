"""LimitRange defaults and what a quota refuses without them (tenancy/limits.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from propagator.tenancy.limits import LimitDefaults, container_defaults, requests_missing
from tests.e2e.manifests import deployment


def limit_range(namespace: str, name: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"limits": list(items)}}


def test_defaults_are_completed_as_the_api_server_defaults_a_limit_range() -> None:
    ranges = [
        limit_range(
            "a",
            "lr",
            # default request from the default limit, the default limit from max
            {"type": "Container", "default": {"cpu": "500m"}, "max": {"memory": "1Gi"}},
        ),
        limit_range("b", "lr", {"type": "Container", "min": {"cpu": "100m"}}),
        limit_range(
            "c",
            "lr",
            {"type": "Pod", "max": {"cpu": "4"}},  # pods get no defaults
            {"type": "Container", "defaultRequest": {"cpu": "1"}, "default": {"cpu": "2"}},
        ),
    ]
    assert container_defaults(ranges) == {
        "a": {"cpu": Decimal("0.5"), "memory": Decimal(2**30)},
        "b": {"cpu": Decimal("0.1")},
        "c": {"cpu": Decimal(1)},
    }


def test_the_first_limit_range_by_name_sets_a_resource() -> None:
    ranges = [
        limit_range("a", "z", {"type": "Container", "defaultRequest": {"cpu": "2"}}),
        limit_range(
            "a", "b", {"type": "Container", "defaultRequest": {"cpu": "1", "memory": "1Mi"}}
        ),
        limit_range("a", "y", {"type": "Container", "defaultRequest": {"memory": "2Mi"}}),
    ]
    assert container_defaults(ranges) == {"a": {"cpu": Decimal(1), "memory": Decimal(2**20)}}


def test_requests_missing_names_the_object_the_container_and_the_resource() -> None:
    web = deployment("web", "shop", "nginx:1.27", 1)
    job = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},  # in the application's namespace
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "r"}]}}}}},
    }
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    objects = [web, job, config]
    assert requests_missing(objects, {"cpu", "pods"}, {}, "shop") == [
        "Deployment shop/web container main: no cpu request",
        "CronJob shop/nightly container r: no cpu request",
    ]
    # a default in the namespace, or a quota that does not limit cpu, refuses nothing
    assert requests_missing(objects, {"cpu"}, {"shop": {"cpu": Decimal(1)}}, "shop") == []
    assert requests_missing(objects, {"pods"}, {}, "shop") == []


class Listing:
    def __init__(self, synced: bool, objects: list[dict[str, Any]]) -> None:
        self.synced, self.objects = synced, objects

    def snapshot(self) -> list[dict[str, Any]]:
        return self.objects


def test_limit_defaults_are_unknown_until_listed_and_read_again_after_a_change() -> None:
    listings = {"m": Listing(False, [])}
    limits = LimitDefaults(listings.get)
    assert limits.of("m") is None
    assert limits.of("gone") is None
    listings["m"].synced = True
    assert limits.of("m") == {}
    listings["m"].objects.append(
        limit_range("a", "lr", {"type": "Container", "defaultRequest": {"cpu": "1"}})
    )
    assert limits.of("m") == {}  # kept until told
    version = limits.version("m")
    limits.changed("m")
    assert limits.version("m") != version
    assert limits.of("m") == {"a": {"cpu": Decimal(1)}}
