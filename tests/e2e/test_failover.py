"""Failover on the real hub and members: replicas leave a member whose API server stops,
gracefully, and what ran there goes once it answers again; a short outage moves nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from kubernetes import client as k8s

from api.taints import NOT_READY_TAINT
from fleet.local import HUB
from fleet.local import cluster as local_cluster
from tests.e2e.conftest import Fleet
from tests.e2e.controller import Controller, running
from tests.e2e.manifests import deployment
from tests.e2e.test_propagation import (
    ENV,
    MEMBERS,
    application,
    condition,
    create,
    get_ap,
    wait_ap,
)
from tests.e2e.waiting import HANG_GUARD_S, eventually


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("failover"), ENV) as controller:
        yield controller


def _placed(app: dict[str, Any]) -> dict[str, int]:
    return {
        p["cluster"]: p.get("replicas") for p in (app.get("status") or {}).get("placement") or []
    }


def _available(app: dict[str, Any]) -> bool:
    return condition(app, "Available").get("status") == "True"


def _ready_pods(fleet: Fleet, cluster: str, namespace: str) -> set[str]:
    pods = fleet.core(cluster).list_namespaced_pod(namespace, label_selector="app=web").items
    return {
        p.metadata.name
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    }


def _tainted(fleet: Fleet, cluster: str) -> bool:
    member: Any = k8s.CustomObjectsApi(fleet.api(HUB)).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", cluster
    )
    return any(t["key"] == NOT_READY_TAINT for t in (member.get("spec") or {}).get("taints") or [])


def _all_ready(fleet: Fleet) -> None:
    """Every member answers again (an earlier test stopped one)."""
    eventually(lambda: not any(_tainted(fleet, c) for c in MEMBERS) or None, "every member Ready")


@contextlib.contextmanager
def _stopped(fleet: Fleet, member: str) -> Iterator[None]:
    """The member's API server stopped inside the block, and answering again after it."""
    state = fleet.state.cluster(member)
    local_cluster.stop_component(state, "kube-apiserver")
    try:
        yield
    finally:
        local_cluster.start_component(state, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, state, time.monotonic() + HANG_GUARD_S)


def _app(namespace: str, replicas: int, placement: dict[str, Any], tolerate: str) -> dict[str, Any]:
    web = deployment("web", namespace, "nginx:1.27", replicas)
    for c in web["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"requests": {"cpu": "10m"}}
    return application(
        "web", namespace, [web], placement=placement, failover={"clusterUnreachableAfter": tolerate}
    )


def test_divided_replicas_leave_a_member_that_stopped_and_come_off_it_when_it_returns(
    fleet: Fleet, controller: Controller
) -> None:
    _all_ready(fleet)
    create(fleet, _app("evict", 12, {"replicas": {"mode": "Divided"}}, "2s"))
    wait_ap(
        fleet,
        "evict",
        "web",
        "4:4:4 available",
        lambda a: _placed(a) == dict.fromkeys(MEMBERS, 4) and _available(a),
    )
    survivors, victim = MEMBERS[:2], MEMBERS[2]
    before = {c: _ready_pods(fleet, c, "evict") for c in survivors}
    lost = time.monotonic()
    with _stopped(fleet, victim):
        moved = wait_ap(
            fleet,
            "evict",
            "web",
            "6:6 available without the stopped member",
            lambda a: _placed(a) == dict.fromkeys(survivors, 6) and _available(a),
        )
        print(
            f"member stopped -> 12 replicas Available on the others: {time.monotonic() - lost:.1f}s"
        )
        line = next(c for c in moved["status"]["clusters"] if c["name"] == victim)
        assert line["lastError"].startswith("evicting: not Ready for"), line
        for cluster in survivors:

            def six(c: str = cluster) -> set[str] | None:
                pods = _ready_pods(fleet, c, "evict")
                return pods if len(pods) == 6 else None

            now = eventually(six, f"6 ready pods on {cluster}")
            assert before[cluster] <= now, f"{cluster}: a running pod was replaced"
        assert (
            controller.scrape()[
                f'propagator_evictions_total{{cluster="{victim}",reason="unreachable"}}'
            ]
            == 1.0
        )

    # back: what ran there is removed (it is not given replicas back by itself: a Divided
    # application may place it again, with 0 replicas). Its pods then go as the member's
    # own garbage collector gets to them.
    def removed() -> bool | None:
        left = fleet.apps(victim).list_namespaced_deployment("evict").items
        return all(d.spec.replicas == 0 for d in left) or None

    eventually(removed, f"no replicas asked of {victim}")
    assert sum(v or 0 for v in _placed(get_ap(fleet, "evict", "web")).values()) == 12


def test_a_duplicated_application_gets_a_replacement_cluster(
    fleet: Fleet, controller: Controller
) -> None:
    _all_ready(fleet)
    create(fleet, _app("replace", 2, {"maxClusters": 2}, "2s"))
    first = wait_ap(
        fleet, "replace", "web", "on two members", lambda a: len(_placed(a)) == 2 and _available(a)
    )
    victim = sorted(_placed(first))[0]
    spare = next(c for c in MEMBERS if c not in _placed(first))
    with _stopped(fleet, victim):
        wait_ap(
            fleet,
            "replace",
            "web",
            f"{spare} takes over",
            lambda a: spare in _placed(a) and victim not in _placed(a) and _available(a),
        )
    eventually(
        lambda: not fleet.apps(victim).list_namespaced_deployment("replace").items or None,
        f"the Deployment removed from {victim} once it answers",
    )


def test_an_outage_shorter_than_the_toleration_moves_nothing(
    fleet: Fleet, controller: Controller
) -> None:
    _all_ready(fleet)
    create(fleet, _app("flap", 6, {"replicas": {"mode": "Divided"}}, "120s"))
    wait_ap(
        fleet,
        "flap",
        "web",
        "2:2:2",
        lambda a: _placed(a) == dict.fromkeys(MEMBERS, 2) and _available(a),
    )
    victim = MEMBERS[1]
    with _stopped(fleet, victim):
        eventually(lambda: _tainted(fleet, victim) or None, f"{victim} tainted not-ready")
    wait_ap(fleet, "flap", "web", "available again", _available)
    assert _placed(get_ap(fleet, "flap", "web")) == dict.fromkeys(MEMBERS, 2)


def test_failback_when_ready_returns_the_replicas_to_a_member_that_is_back(
    fleet: Fleet, controller: Controller
) -> None:
    _all_ready(fleet)
    app = _app("failback", 6, {"replicas": {"mode": "Divided"}}, "2s")
    app["spec"]["failover"].update(failback="WhenReady", failbackAfter="3s")
    create(fleet, app)
    even = dict.fromkeys(MEMBERS, 2)
    wait_ap(fleet, "failback", "web", "2:2:2", lambda a: _placed(a) == even and _available(a))
    victim = MEMBERS[0]
    with _stopped(fleet, victim):
        gone = wait_ap(
            fleet,
            "failback",
            "web",
            "evicted",
            lambda a: victim not in _placed(a) and _available(a),
        )
        assert gone["status"]["evicted"] == [victim]
    back = wait_ap(
        fleet, "failback", "web", "2:2:2 again", lambda a: _placed(a) == even and _available(a)
    )
    assert back["status"].get("evicted") == []
