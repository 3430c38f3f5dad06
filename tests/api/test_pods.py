"""A pod's requests as Kubernetes counts them (api/pods.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from api.pods import pod_requests, unrequested


def c(cpu: str | None = None, *, limit: str | None = None, always: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    if limit is not None:
        resources["limits"] = {"cpu": limit}
    out: dict[str, Any] = {"name": "x", "resources": resources}
    if always:
        out["restartPolicy"] = "Always"
    return out


@pytest.mark.parametrize(
    ("spec", "cpu"),
    [
        ({"containers": [c("100m"), c("200m")]}, "0.3"),
        # the largest init container wins when larger than the containers together
        ({"containers": [c("100m")], "initContainers": [c("2"), c("1")]}, "2"),
        ({"containers": [c("3")], "initContainers": [c("2")]}, "3"),
        # sidecars (restartable init containers) run beside the containers and later inits
        ({"containers": [c("1")], "initContainers": [c("500m", always=True)]}, "1.5"),
        (
            {"containers": [c("100m")], "initContainers": [c("1", always=True), c("2")]},
            "3",
        ),
        # overhead is added on top
        ({"containers": [c("1")], "overhead": {"cpu": "250m"}}, "1.25"),
        # limits without requests: requests default to limits
        ({"containers": [c(limit="2")]}, "2"),
        # JSON white space is a quantity like any other
        ({"containers": [c(" 1")]}, "1"),
    ],
)
def test_requests_as_kubernetes_counts_them(spec: dict[str, Any], cpu: str) -> None:
    requests = pod_requests(spec)
    assert requests["cpu"] == Decimal(cpu)
    assert requests["pods"] == 1


def test_a_template_expression_counts_as_nothing() -> None:
    assert "cpu" not in pod_requests({"containers": [c("{{ values.cpu }}")]})


def test_a_container_that_states_nothing_gets_its_namespaces_default() -> None:
    defaults = {"cpu": Decimal("0.25"), "memory": Decimal(2**20)}
    spec = {"initContainers": [c()], "containers": [c("1"), c(), c(limit="2")]}
    requests = pod_requests(spec, defaults)
    # 1 (its own) + 250m (the default) + 2 (its limit): a default never overrides either
    assert requests["cpu"] == Decimal("3.25")
    # no container states memory: each gets the default, init containers too
    assert requests["memory"] == 3 * 2**20


def test_unrequested_names_each_container_and_resource_a_quota_would_refuse() -> None:
    spec = {"initContainers": [{"name": "init"}], "containers": [c("1"), c(limit="1")]}
    spec["containers"][0]["name"] = "app"
    assert unrequested(spec, ["cpu", "memory"], {}) == [
        ("init", "cpu"),
        ("init", "memory"),
        ("app", "memory"),
        ("x", "memory"),
    ]
    # a namespace default covers the resource for every container
    assert unrequested(spec, ["cpu", "memory"], {"memory": Decimal(1)}) == [("init", "cpu")]
