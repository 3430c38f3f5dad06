"""Hostile or broken input on the real hub and members: a render bomb neither stalls the
others nor the lease, a broken member Secret stays that member's problem, and no token
used reaches the controller's log."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from fleet.local import HUB
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, running
from tests.e2e.manifests import config_map
from tests.e2e.propagation.test_propagation import (
    ENV,
    MEMBERS,
    application,
    condition,
    create,
    wait_ap,
)
from tests.e2e.waiting import eventually

TOKEN = "hostile-t0ken-do-not-log-9f8e7d6c5b4a"


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    env = {**ENV, "PROPAGATOR_RENDER_TIMEOUT_S": "2"}
    with running(fleet, tmp_path_factory.mktemp("hardening"), env) as controller:
        yield controller


def _applied(app: dict[str, Any]) -> bool:
    return condition(app, "Applied").get("status") == "True"


def test_a_render_bomb_fails_alone_and_stalls_nothing(fleet: Fleet, controller: Controller) -> None:
    def time_to_applied(name: str) -> float:
        started = time.monotonic()
        create(fleet, application(name, "hostile", [config_map(name, "hostile")]))
        wait_ap(fleet, "hostile", name, "applied", _applied)
        return time.monotonic() - started

    time_to_applied("first")  # the member caches start with the first application
    calm = time_to_applied("calm")
    bomb = config_map("bomb", "hostile")
    bomb["data"] = {
        "v": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    }
    create(fleet, application("bomb", "hostile", [bomb]))
    beside = time_to_applied("neighbour")
    print(f"create -> Applied: {calm:.2f}s alone, {beside:.2f}s beside a render bomb")
    failed = wait_ap(
        fleet,
        "hostile",
        "bomb",
        "render failed",
        lambda a: condition(a, "Applied").get("reason") == "RenderFailed",
    )
    assert "took longer than 2s" in condition(failed, "Applied")["message"]
    # the leader kept its lease through it, and nothing of the bomb reached a member
    assert controller.scrape()["propagator_leader"] == 1.0
    assert "could not renew" not in controller.log_tail()
    for cluster in MEMBERS:
        live = fleet.core(cluster).list_namespaced_config_map("hostile").items
        assert "bomb" not in {c.metadata.name for c in live}


def _broken_kubeconfig(fleet: Fleet) -> str:
    hub = yaml.safe_load(fleet.kubeconfig(HUB).read_text())
    cluster = hub["clusters"][0]["cluster"]
    junk = b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
    cluster["certificate-authority-data"] = base64.b64encode(junk).decode()
    hub["users"][0]["user"] = {"token": TOKEN}
    return yaml.safe_dump(hub)


def test_a_broken_member_secret_is_that_members_problem(
    fleet: Fleet, controller: Controller
) -> None:
    core: Any = k8s.CoreV1Api(fleet.api(HUB))
    custom = k8s.CustomObjectsApi(fleet.api(HUB))
    core.create_namespaced_secret(
        "propagator-system",
        {"metadata": {"name": "broken"}, "stringData": {"kubeconfig": _broken_kubeconfig(fleet)}},
    )
    custom.create_cluster_custom_object(
        "propagator.io",
        "v1alpha1",
        "memberclusters",
        {
            "apiVersion": "propagator.io/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "broken"},
            "spec": {
                "secretRef": {
                    "namespace": "propagator-system",
                    "name": "broken",
                    "key": "kubeconfig",
                }
            },
        },
    )
    try:

        def reported() -> dict[str, Any] | None:
            mc: Any = custom.get_cluster_custom_object(
                "propagator.io", "v1alpha1", "memberclusters", "broken"
            )
            ready = next(
                (
                    c
                    for c in (mc.get("status") or {}).get("conditions") or []
                    if c["type"] == "Ready"
                ),
                None,
            )
            return ready if ready and ready["reason"] == "InvalidKubeconfig" else None

        ready = eventually(reported, "the broken member's InvalidKubeconfig")
        assert "certificate-authority-data does not load" in ready["message"]
        assert TOKEN not in ready["message"]
        # the others are still served: a new application reaches every member
        create(fleet, application("after-broken", "hostile", [config_map("after", "hostile")]))
        wait_ap(fleet, "hostile", "after-broken", "applied", _applied)
    finally:
        custom.delete_cluster_custom_object("propagator.io", "v1alpha1", "memberclusters", "broken")
        core.delete_namespaced_secret("broken", "propagator-system")
    assert TOKEN not in controller.log.read_text(errors="replace")
