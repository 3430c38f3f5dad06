"""Failover on real clusters: a local hub and three members, ``propagator run`` as a child.

A Divided application of 12 replicas runs 4:4:4; one member's API server is stopped. The
time until all 12 replicas are Ready on the other two (the controller noticing the member
NotReady, the application's toleration, the rescale, the pods starting), and, once the
member is started again, until its Deployment is removed (or asks for no replica).
Twice: with the controller's and the application's defaults (probes every 10 s, 3
failures; clusterUnreachableAfter 300s), and with short ones (probes every 1 s; 10s).
``--quick``: the short ones only.

    python -m bench.failover [--quick] [--json]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s

from bench.propagation import Controller, _condition, _setup, _wait
from bench.report import arguments, emit
from fleet import local
from fleet.local import cluster as local_cluster
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, deployment

CASES = {
    "defaults": ({}, "300s"),
    "short": (
        {
            "PROPAGATOR_PROBE_INTERVAL_S": "1",
            "PROPAGATOR_PROBE_TIMEOUT_S": "1",
            "PROPAGATOR_PROBE_FAILURE_THRESHOLD": "3",
        },
        "10s",
    ),
}


def _placed(app: dict[str, Any]) -> dict[str, int]:
    return {
        p["cluster"]: p.get("replicas") for p in (app.get("status") or {}).get("placement") or []
    }


def _ready_replicas(member: Any, namespace: str) -> int:
    apps: Any = k8s.AppsV1Api(member)
    return sum(
        (d.status.ready_replicas or 0) if d.status else 0
        for d in apps.list_namespaced_deployment(namespace).items
    )


def _asked(member: Any, namespace: str) -> int:
    """Replicas the member's Deployments ask for (what Propagator controls there; their
    pods then go as the member's own controllers get to them)."""
    apps: Any = k8s.AppsV1Api(member)
    return sum(d.spec.replicas or 0 for d in apps.list_namespaced_deployment(namespace).items)


def _nodes_ready(api: Any, member: str) -> bool:
    found: Any = api.get_cluster_custom_object(GROUP, VERSION, "memberclusters", member)
    nodes = (found.get("status") or {}).get("nodes") or {}
    return bool(nodes.get("total")) and nodes.get("ready") == nodes.get("total")


def one_case(
    state: local.FleetState, hub: Any, tmp: Path, name: str, env: dict[str, str], tolerate: str
) -> dict[str, Any]:
    controller = Controller(state.hub.kubeconfig, tmp / f"controller-{name}.log")
    controller.env.pop("PROPAGATOR_PROBE_INTERVAL_S", None)  # the case says
    controller.env.update(env)
    api = k8s.CustomObjectsApi(hub)
    namespace = f"failover-{name}"
    k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
    members = [m.name for m in state.members]
    clients = {m.name: local_cluster.api_client(m) for m in state.members}
    web = deployment("web", namespace, "nginx:1.27", 12)
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    controller.start()
    try:
        # Every member Ready in the controller's own view first (a member restarted by the
        # previous case, placed on while it is not, would rightly get no replicas later).
        _wait(
            lambda: controller.metric("propagator_cluster_ready") == len(members),
            "every member Ready",
            every_s=0.5,
        )
        # ...with every node Ready (after an outage a member's node controller marks its
        # nodes NotReady for a moment, and a member without a Ready node has no room).
        _wait(lambda: all(_nodes_ready(api, m) for m in members), "every node Ready", every_s=0.5)
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            application(
                "web",
                namespace,
                [web],
                "bench",
                placement={"replicas": {"mode": "Divided"}},
                failover={"clusterUnreachableAfter": tolerate},
            ),
        )

        def status() -> dict[str, Any]:
            found: Any = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
            return dict(found)

        _wait(
            lambda: (
                _placed(status()) == dict.fromkeys(members, 4)
                and _condition(status(), "Available") == "True"
            ),
            "4:4:4 available",
            every_s=0.2,
        )
        victim, survivors = state.members[-1], members[:-1]
        stopped = time.perf_counter()
        local_cluster.stop_component(victim, "kube-apiserver")
        _wait(
            lambda: (
                victim.name not in _placed(status())
                and sum(_ready_replicas(clients[c], namespace) for c in survivors) == 12
            ),
            "12 replicas ready on the others",
            limit_s=1200,
            every_s=0.2,
        )
        moved = time.perf_counter() - stopped
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + 120)
        back = time.perf_counter()
        _wait(
            lambda: _asked(clients[victim.name], namespace) == 0,
            "nothing asked of the member that came back",
            every_s=0.2,
        )
        cleaned = time.perf_counter() - back
    finally:
        controller.stop()
        for c in clients.values():
            c.close()
    print(f"{name}: {moved:.1f}s to 12 Ready elsewhere, {cleaned:.1f}s to removal", file=sys.stderr)
    return {
        "case": name,
        "toleration": tolerate,
        "stopped_to_12_ready_s": moved,
        "back_to_removed_s": cleaned,
    }


def main() -> None:
    args = arguments(__doc__, "the short settings only (about a minute)")
    cases = {k: v for k, v in CASES.items() if not args.quick or k == "short"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        try:
            _setup(state, hub)
            for name, (env, tolerate) in cases.items():
                rows.append(one_case(state, hub, Path(tmp), name, env, tolerate))
        finally:
            hub.close()
            local.down(state)
    emit(
        rows,
        [
            ("case", "settings"),
            ("toleration", "clusterUnreachableAfter"),
            ("stopped_to_12_ready_s", "member stopped -> 12 replicas Ready elsewhere, s"),
            ("back_to_removed_s", "member back -> its Deployment removed, s"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
