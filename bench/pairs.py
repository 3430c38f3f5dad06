"""The pair axis: many applications, each on every one of many members.

``bench.scale`` measures many members with one application, ``bench.propagation`` many
applications on three members; a platform runs both at once. Here a local hub and three
members start, N far MemberClusters are registered as ``bench.scale --limited`` builds
them (each reaching one of the three members through its own loopback proxy adding a
fixed latency, each used only in its own namespace), and A applications of K ConfigMaps
each are placed on all N: A x N (application, cluster) pairs, A x N x K objects on the
members. It prints:

- the controller's RSS with the far members connected and nothing placed, after every
  application is Applied, and the growth per pair;
- the time from the first creation until every application is Applied, beside what the
  servers allow: the objects written at the rate a bare loop writes them straight to
  the same members (measured in the same run, before the controller starts);
- a no-op resync of every application (planned again, nothing to change): reconciles per
  second, and the member writes it made (0 is the goal);
- a restart: from the new process's start until every application was judged again
  and every queue is empty, with the member writes it made (0);
- with all of that idle, one application changed at a time (a ConfigMap's data), from
  the change to Applied on its N members, p50/p99 over the changes, beside the bare
  loop writing one object to each of the N members through the same proxies (one round
  trip of the latency, and the servers' N writes).

    python -m bench.pairs [--quick] [--json] [--apps 1000] [--clusters 100] [--objects 2]
                          [--changes 30] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from bench.fanout import delete_namespaces, make_namespaces
from bench.latency_proxy import LatencyProxy
from bench.propagation import Controller, _setup_crds, _wave, replan_everything
from bench.report import arguments, emit, percentile
from bench.scale import (
    CONCURRENCY,
    NAMESPACE,
    PER_CLUSTER,
    _created_and_applied,
    _direct,
    _make_app_namespaces,
    _make_far_fleet,
    _ready_and_described,
    _register,
)
from fleet import local
from fleet.local import cluster as local_cluster
from kube.connection import KubeConnection
from propagator.runtime import eventloop
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application

APPS_NAMESPACE = "pairs"


def _manifests(app: int, objects: int, revision: int = 1) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"app-{app:05d}-{n}", "namespace": "bench"},
            "data": {"index": str(n), "revision": str(revision)},
        }
        for n in range(objects)
    ]


def _name(app: int) -> str:
    return f"app-{app:05d}"


def _create_all(hub: Any, apps: int, objects: int) -> float:
    """Seconds from the first creation until every application is Applied."""
    api = k8s.CustomObjectsApi(hub)

    def create(name: str) -> None:
        index = int(name.rsplit("-", 1)[1])
        app = application(
            name, APPS_NAMESPACE, _manifests(index, objects), "far", overrides=[PER_CLUSTER]
        )
        api.create_namespaced_custom_object(GROUP, VERSION, APPS_NAMESPACE, PLURAL, app)

    start = time.perf_counter()
    applied = _created_and_applied(api, APPS_NAMESPACE, [_name(i) for i in range(apps)], create)
    return max(applied.values()) - start


def _applied_at(app: dict[str, Any], generation: int, clusters: int) -> bool:
    status = app.get("status") or {}
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    applied = next((c for c in conditions if c.get("type") == "Applied"), {})
    return (
        status.get("observedGeneration") == generation
        and applied.get("status") == "True"
        and sum(1 for c in status.get("clusters") or [] if c.get("applied")) == clusters
    )


def _one_change(hub: Any, app: int, objects: int, clusters: int, revision: int) -> float:
    """Seconds from a change of one application's objects to it Applied on all clusters
    at its new generation, seen through a watch of that one application (a poll of its
    100-cluster status loaded the hub it measures)."""
    api = k8s.CustomObjectsApi(hub)
    name = _name(app)
    patch = {"spec": {"resources": {"manifests": _manifests(app, objects, revision)}}}
    start = time.perf_counter()
    changed: Any = api.patch_namespaced_custom_object(
        GROUP, VERSION, APPS_NAMESPACE, PLURAL, name, patch
    )
    generation = changed["metadata"]["generation"]
    if _applied_at(changed, generation, clusters):
        return time.perf_counter() - start
    stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(  # type: ignore[no-untyped-call]
        api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        APPS_NAMESPACE,
        PLURAL,
        field_selector=f"metadata.name={name}",
        resource_version=changed["metadata"]["resourceVersion"],
        timeout_seconds=300,
    ):
        if _applied_at(event["object"], generation, clusters):
            stream.stop()  # type: ignore[no-untyped-call]
            return time.perf_counter() - start
    raise SystemExit(f"bench.pairs: {name} generation {generation} not Applied in 300 s")


async def _write_round(conns: dict[str, KubeConnection], namespace_of: Any, tag: str) -> float:
    """One ConfigMap written to each connection's namespace at once; seconds."""
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for cluster, conn in conns.items():
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "bare", "namespace": namespace_of(cluster)},
                "data": {"tag": tag},
            }
            tg.start_soon(conn.apply, body)
    return time.perf_counter() - start


def _bare(state: local.FleetState, clusters: int, rounds: int, objects: int) -> dict[str, float]:
    """The servers' limits, without the controller: the write rate of a bare loop sending
    ``objects`` ConfigMaps to each far cluster's namespace (``CONCURRENCY`` clusters at
    once, straight to the members), and ``rounds`` rounds of one ConfigMap to each at
    once (p50/p99 seconds)."""

    async def measure() -> dict[str, float]:
        direct = _direct(state, clusters)
        try:
            for conn in direct.values():
                await conn.discovery.kinds()
            await make_namespaces(direct, "bare-pairs-", CONCURRENCY)
            limiter = anyio.CapacityLimiter(CONCURRENCY)

            async def fill(cluster: str, conn: KubeConnection) -> None:
                async with limiter:
                    for n in range(objects):
                        await conn.apply(
                            {
                                "apiVersion": "v1",
                                "kind": "ConfigMap",
                                "metadata": {
                                    "name": f"fill-{n}",
                                    "namespace": f"bare-pairs-{cluster}",
                                },
                                "data": {"n": str(n)},
                            }
                        )

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for cluster, conn in direct.items():
                    tg.start_soon(fill, cluster, conn)
            rate = clusters * objects / (time.perf_counter() - start)
            samples = [
                await _write_round(direct, lambda c: f"bare-pairs-{c}", str(i))
                for i in range(rounds)
            ]
            await delete_namespaces(direct, "bare-pairs-", CONCURRENCY)
            return {
                "writes_per_s": rate,
                "round_p50_s": percentile(samples, 50),
                "round_p99_s": percentile(samples, 99),
            }
        finally:
            for conn in direct.values():
                await conn.close()

    return eventloop.run(measure)


def run(
    apps: int, clusters: int, objects: int, changes: int, latency_s: float, tmp: Path
) -> list[dict[str, Any]]:
    state = anyio.run(
        local.up,
        tmp / "fleet",
        local.testbin_dir(),
        local.FleetOptions(members=3, nodes_per_cluster=1),
    )
    hub = local_cluster.api_client(state.hub)
    controller: Controller | None = None
    proxies: list[LatencyProxy] = []
    try:
        _setup_crds(hub)
        core = k8s.CoreV1Api(hub)
        for namespace in (NAMESPACE, APPS_NAMESPACE):
            core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        proxies = _register(hub, state, clusters, latency_s, limited=True)
        _make_app_namespaces(state, clusters)
        _make_far_fleet(hub)
        bare = _bare(state, clusters, changes, objects=10)
        controller = Controller(state.hub.kubeconfig, tmp / "controller.log")
        controller.env.update(
            {
                "PROPAGATOR_MAX_CONCURRENCY": str(CONCURRENCY),
                "PROPAGATOR_NAMESPACE": NAMESPACE,
                "PROPAGATOR_PROBE_INTERVAL_S": "10",
                "PROPAGATOR_PLATFORM_NAMESPACES": f"{NAMESPACE},{APPS_NAMESPACE}",
            }
        )
        started = time.perf_counter()
        controller.start()
        _ready_and_described(hub, clusters, started)
        time.sleep(5)
        rss_empty = controller.rss_mib()
        pairs = apps * clusters
        applied_s = _create_all(hub, apps, objects)
        time.sleep(5)  # the last status writes come back through the watch
        rss_full = controller.rss_mib()
        writes = controller.metric("propagator_member_writes_total")

        # Its metrics read every 0.25 s: at 100 members their encoding, every 0.05 s, took
        # a quarter of the controller's CPU.
        resync = _wave(controller, apps, lambda: replan_everything(hub), every_s=0.25)
        controller.stop()
        restarted = time.perf_counter()
        controller.start()
        restart = _wave(controller, apps, lambda: None, since_start=restarted, every_s=0.25)
        time.sleep(5)
        samples = [
            _one_change(hub, (i * 7919) % apps, objects, clusters, revision=2 + i)
            for i in range(changes)
        ]
    finally:
        if controller is not None and controller.proc is not None:
            controller.stop()
        for proxy in proxies:
            proxy.close()
        hub.close()
        local.down(state)
    servers_s = pairs * objects / bare["writes_per_s"]
    change_bound = latency_s + bare["round_p50_s"]
    return [
        {
            "measure": f"controller RSS, {clusters} members connected, nothing placed",
            "value": rss_empty,
            "unit": "MiB",
        },
        {
            "measure": f"controller RSS, {apps:,} applications on all (pairs: {pairs:,})",
            "value": rss_full,
            "unit": "MiB",
        },
        {
            "measure": "  growth per (application, cluster) pair",
            "value": (rss_full - rss_empty) * 1024 / pairs,
            "unit": "KiB",
        },
        {
            "measure": f"create -> all Applied ({pairs * objects:,} objects, "
            f"{writes:,.0f} member writes)",
            "value": applied_s,
            "unit": "s",
        },
        {
            "measure": "  the servers' limit (objects at the bare loop's rate)",
            "value": servers_s,
            "unit": "s",
            "bound": f"{bare['writes_per_s']:.0f} writes/s",
        },
        {"measure": "  ratio", "value": applied_s / servers_s, "unit": "x"},
        {
            "measure": f"no-op resync of {apps:,}: reconciles/s",
            "value": resync["reconciles_per_s"],
            "unit": "/s",
            "bound": f"{resync['member_writes']:.0f} member writes",
        },
        {
            "measure": f"restart -> all {apps:,} judged again, queues empty",
            "value": restart["wall_s"],
            "unit": "s",
            "bound": f"{restart['member_writes']:.0f} member writes",
        },
        {
            "measure": f"one change -> Applied on {clusters}, p50 ({changes} changes, rest idle)",
            "value": percentile(samples, 50) * 1000,
            "unit": "ms",
        },
        {"measure": "  p99", "value": percentile(samples, 99) * 1000, "unit": "ms"},
        {
            "measure": f"  bound: latency + bare loop of {clusters} writes (p50)",
            "value": change_bound * 1000,
            "unit": "ms",
            "bound": f"bare p99 {bare['round_p99_s'] * 1000:.0f} ms",
        },
        {
            "measure": "  ratio p50 / bound",
            "value": percentile(samples, 50) / change_bound,
            "unit": "x",
        },
    ]


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--apps", type=int, default=1000)
        parser.add_argument("--clusters", type=int, default=100)
        parser.add_argument("--objects", type=int, default=2)
        parser.add_argument("--changes", type=int, default=30)
        parser.add_argument("--latency-ms", type=float, default=50.0)

    args = arguments(__doc__, "100 applications on 20 members, 10 changes", more)
    apps, clusters, changes = (
        (100, 20, 10) if args.quick else (args.apps, args.clusters, args.changes)
    )
    with tempfile.TemporaryDirectory(prefix="bench-pairs-") as tmp:
        rows = run(apps, clusters, args.objects, changes, args.latency_ms / 1000, Path(tmp))
    emit(
        rows,
        [("measure", "measure"), ("value", "value"), ("unit", "unit"), ("bound", "what bounds it")],
        args.json,
    )


if __name__ == "__main__":
    main()
