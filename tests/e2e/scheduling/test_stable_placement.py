"""Placement that knows where the application runs, on the real hub and members: Divided
replicas whose own pods fill the room stay placed pass after pass (and a new image rolls
out), and a scale-up moves no pod that runs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from api.quantity import parse_quantity
from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, running
from tests.e2e.manifests import deployment
from tests.e2e.propagation.test_propagation import (
    ENV,
    application,
    condition,
    create,
    get_ap,
    update_spec,
    wait_ap,
)
from tests.e2e.waiting import eventually

SUCCESS = 'propagator_reconciles_total{result="success"}'


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("stable"), ENV) as controller:
        yield controller


def _available_cpu(fleet: Fleet, cluster: str) -> float:
    """The member's free cpu once the controller has reported it."""

    def reported() -> float | None:
        member = cast(
            dict[str, Any],
            k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
                "propagator.io", "v1alpha1", "memberclusters", cluster
            ),
        )
        cpu = ((member.get("status") or {}).get("resources") or {}).get("available", {}).get("cpu")
        return None if cpu is None else float(parse_quantity(cpu))

    found: float = eventually(reported, f"{cluster}'s free cpu reported")
    return found


def _requesting(obj: dict[str, Any], cpu: str) -> dict[str, Any]:
    for container in obj["spec"]["template"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": cpu}}
    return obj


def _placed(app: dict[str, Any]) -> dict[str, int]:
    return {
        p["cluster"]: p.get("replicas") for p in (app.get("status") or {}).get("placement") or []
    }


def _rolled_out(fleet: Fleet, cluster: str, namespace: str, name: str, image: str) -> bool:
    live = fleet.apps(cluster).read_namespaced_deployment(name, namespace)
    status = live.status
    return bool(
        live.spec.template.spec.containers[0].image == image
        and status.observed_generation == live.metadata.generation
        and status.updated_replicas == live.spec.replicas
        and status.ready_replicas == live.spec.replicas
        and (status.replicas or 0) == live.spec.replicas
    )


def _pods(fleet: Fleet, cluster: str, namespace: str) -> set[str]:
    pods = fleet.core(cluster).list_namespaced_pod(namespace, label_selector="app=web")
    return {p.metadata.name for p in pods.items if p.metadata.deletion_timestamp is None}


def test_divided_replicas_stay_placed_when_their_own_pods_fill_the_room(
    fleet: Fleet, controller: Controller
) -> None:
    clusters = ["member-1", "member-2"]
    # Each pod asks a tenth of the emptier member's free cpu: room for 10 on each.
    per_pod = math.floor(min(_available_cpu(fleet, c) for c in clusters) * 100)  # millicpu
    workload = _requesting(deployment("web", "roomy", "nginx:1.27", 16), f"{per_pod}m")
    app = application(
        "web",
        "roomy",
        [workload],
        placement={"clusterNames": clusters, "replicas": {"mode": "Divided"}},
    )
    create(fleet, app)
    ready = wait_ap(
        fleet,
        "roomy",
        "web",
        "8 and 8 replicas ready",
        lambda a: (
            _placed(a) == {"member-1": 8, "member-2": 8}
            and condition(a, "Available").get("status") == "True"
        ),
    )
    assert condition(ready, "Scheduled")["status"] == "True"
    # Pass after pass (each annotation change plans again), with 2 replicas of room left
    # on each member, nothing moves and it stays Scheduled.
    for i in range(3):
        before = controller.scrape().get(SUCCESS, 0.0)
        k8s.CustomObjectsApi(fleet.api(HUB)).patch_namespaced_custom_object(
            "propagator.io",
            "v1alpha1",
            "roomy",
            "applicationpropagations",
            "web",
            {"metadata": {"annotations": {"example.com/pass": str(i)}}},
        )
        eventually(
            lambda: controller.scrape().get(SUCCESS, 0.0) > before or None,  # noqa: B023
            "planned again",
        )
        again = get_ap(fleet, "roomy", "web")
        assert _placed(again) == {"member-1": 8, "member-2": 8}
        assert condition(again, "Scheduled")["status"] == "True", condition(again, "Scheduled")
    # a new image rolls out on both (an unschedulable plan would apply nothing)
    update_spec(
        fleet,
        "roomy",
        "web",
        lambda spec: spec["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][
            0
        ].update(image="nginx:1.28"),
    )
    for cluster in clusters:
        eventually(
            lambda: _rolled_out(fleet, cluster, "roomy", "web", "nginx:1.28") or None,  # noqa: B023
            f"nginx:1.28 rolled out on {cluster}",
        )
    assert _placed(get_ap(fleet, "roomy", "web")) == {"member-1": 8, "member-2": 8}


def test_a_scale_up_moves_no_pod_that_runs(fleet: Fleet, controller: Controller) -> None:
    members = ["member-1", "member-2", "member-3"]
    weights = {
        "static": [{"cluster": c, "weight": w} for c, w in zip(members, (1, 2, 3), strict=True)]
    }
    workload = _requesting(deployment("web", "growing", "nginx:1.27", 12), "10m")
    app = application(
        "web",
        "growing",
        [workload],
        placement={"replicas": {"mode": "Divided", "weights": weights}},
    )
    create(fleet, app)
    wait_ap(
        fleet,
        "growing",
        "web",
        "2:4:6 ready",
        lambda a: (
            _placed(a) == {"member-1": 2, "member-2": 4, "member-3": 6}
            and condition(a, "Available").get("status") == "True"
        ),
    )
    before = {c: _pods(fleet, c, "growing") for c in members}
    assert [len(before[c]) for c in members] == [2, 4, 6]
    update_spec(
        fleet,
        "growing",
        "web",
        lambda spec: spec["resources"]["manifests"][0]["spec"].update(replicas=24),
    )
    wait_ap(
        fleet,
        "growing",
        "web",
        "4:8:12 ready",
        lambda a: (
            _placed(a) == {"member-1": 4, "member-2": 8, "member-3": 12}
            and condition(a, "Available").get("status") == "True"
        ),
    )
    for cluster in members:
        after = _pods(fleet, cluster, "growing")
        assert before[cluster] <= after, f"{cluster}: {sorted(before[cluster] - after)} moved"
