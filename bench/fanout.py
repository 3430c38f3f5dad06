"""Fan-out efficiency: one application of 10 objects to 100 member clusters far away.

The 100 clusters are served by the local members (real API servers started here) through
latency-injecting loopback proxies (50 ms per request by default). The fan-out is the
controller's own: the member registry's units (a queue, workers and watch caches per
cluster), the work table and the member sync (limits, retries, circuit breakers, apply
and prune judged from the caches). Each cluster gets its own namespace and application,
so every run really writes and each far cluster prunes only its own objects.

For max concurrency 1, 10 and 50 it prints the wall time and its ratio to the ideal (the
median of ``--repeat`` pairs, each the bare loop then the member syncs back to back, with
the lowest and highest ratio), the ideal being the larger of two limits measured or
computed in the same run: the latency limit,
ceil(clusters / concurrency) x 3 x latency (a fresh cluster needs three round trips that
cannot overlap: its namespace, one round of every object at once, its caches filled), and
the servers' limit, the time a bare loop takes to send the same writes straight to the
members at the same concurrency (on two cores the API servers may be the bottleneck).

    python -m bench.fanout [--quick] [--json] [--clusters N] [--latency-ms MS] [--repeat N]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio

from bench.latency_proxy import LatencyProxy
from bench.report import arguments, emit
from fleet import local
from fleet.connection import ConnectionOptions, KubeConnection
from fleet.health import HealthPolicy
from fleet.kubeconfig import load_kubeconfig
from fleet.member import MemberMonitor
from propagator.observability.metrics import Metrics
from propagator.propagation.membersync import MemberSync
from propagator.propagation.resources import member_selector, owner_label_of, revision_of
from propagator.propagation.work import ClusterWork, SyncPolicy, WorkTable
from propagator.runtime.members import MemberRegistry
from propagator.settings import Settings

OBJECTS = 10


class CountingConnection(KubeConnection):
    """A member connection that counts its requests."""

    requests = 0

    async def request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        CountingConnection.requests += 1
        return await super().request(*args, **kwargs)

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        CountingConnection.requests += 1
        return super().stream(*args, **kwargs)


def _objects(namespace: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"object-{i}", "namespace": namespace},
            "data": {"index": str(i)},
        }
        for i in range(OBJECTS)
    ]


def _connections(
    state: local.FleetState, clusters: int, latency_s: float | None
) -> tuple[dict[str, KubeConnection], list[LatencyProxy]]:
    """A connection per far cluster, each through a proxy adding ``latency_s`` (None:
    straight to its member)."""
    members = [
        load_kubeconfig(m.kubeconfig.read_text(), source=m.name).credentials for m in state.members
    ]
    conns: dict[str, KubeConnection] = {}
    proxies: list[LatencyProxy] = []
    for i in range(clusters):
        creds = members[i % len(members)]
        name = f"far-{i:03d}"
        if latency_s is not None:
            url = urlparse(creds.server)
            proxy = LatencyProxy((url.hostname or "127.0.0.1", url.port or 443), latency_s)
            proxies.append(proxy)
            creds = dataclasses.replace(creds, server=f"https://{url.hostname}:{proxy.port}")
        conns[name] = CountingConnection(name, creds, ConnectionOptions(read_timeout_s=60))
    return conns, proxies


async def _bare_loop(conns: dict[str, KubeConnection], concurrency: int, run: str) -> float:
    """The servers' limit: the same writes as a fresh cluster's sync (a namespace created,
    then the objects applied at once, per cluster) sent straight to the members,
    ``concurrency`` clusters at once, without added latency."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(cluster: str) -> None:
        conn = conns[cluster]
        namespace = f"bare-{run}-{cluster}"
        async with limiter:
            await conn.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            async with anyio.create_task_group() as tg:
                for obj in _objects(namespace):
                    tg.start_soon(functools.partial(conn.apply, obj))

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for cluster in conns:
            tg.start_soon(one, cluster)
    return time.perf_counter() - start


async def _sync_all(
    conns: dict[str, KubeConnection], concurrency: int, run: str
) -> tuple[float, WorkTable, Metrics]:
    """Every far cluster's application through the controller's member syncs: the
    registry's units and caches, the work table, the member sync."""
    settings = Settings(max_concurrency=concurrency)
    table, metrics = WorkTable(), Metrics()
    done = anyio.Event()
    waiting = set(conns)

    def reported(app: str, settled: bool) -> None:
        if settled:
            waiting.discard(app.split("/", 1)[1].removeprefix(f"{run}-"))
        if not waiting:
            done.set()

    registry: MemberRegistry
    member_sync = MemberSync(
        settings,
        table,
        metrics,
        anyio.CapacityLimiter(concurrency),
        lambda member, kinds, timeout_s: registry.caches_synced(member, kinds, timeout_s),
        reported,
    )
    registry = MemberRegistry(
        selector=member_selector,
        index=owner_label_of,
        sync=member_sync.sync,
        on_object=lambda *_: None,
        on_added=lambda _: None,
        workers_per_member=settings.member_workers,
        circuit_failure_threshold=settings.circuit_failure_threshold,
        circuit_cool_down_s=settings.circuit_cool_down_s,
        requeue_max_delay_s=settings.requeue_max_delay_s,
    )
    policy = SyncPolicy.of(None, settings)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        policy_of_health = HealthPolicy()
        registry.sync(
            {
                name: MemberMonitor(name, "bench", policy_of_health, connection=conn)
                for name, conn in conns.items()
            }
        )
        start = time.perf_counter()
        for cluster in conns:
            # Several far clusters share one real member: an application of their own
            # keeps each one's pruning to its own objects, as on separate API servers.
            app = f"bench/{run}-{cluster}"
            objects = tuple(_objects(f"bench-{run}-{cluster}"))
            work = ClusterWork(app, cluster, objects, revision_of(objects), frozenset(), policy)
            table.set_work(app, {cluster: work}, now=0.0, recheck_after_s=3600)
            member = registry.get(cluster)
            assert member is not None
            member.queue.add(app)
        await done.wait()
        wall = time.perf_counter() - start
        tg.cancel_scope.cancel()
    return wall, table, metrics


async def measure(
    conns: dict[str, KubeConnection],
    direct: dict[str, KubeConnection],
    concurrency: int,
    run: str,
    latency_s: float,
) -> dict[str, Any]:
    for conn in [*conns.values(), *direct.values()]:
        await conn.version()  # TLS handshakes and discovery outside the timing
        await conn.discovery.kinds()
    servers_s = await _bare_loop(direct, concurrency, run)
    CountingConnection.requests = 0
    wall, table, metrics = await _sync_all(conns, concurrency, run)
    failed = {
        (app, cluster): state
        for app, states in table.states.items()
        for cluster, state in states.items()
        if not state.applied
    }
    if failed:
        (_, cluster), state = next(iter(failed.items()))
        raise SystemExit(f"bench.fanout: {len(failed)} clusters failed, e.g. {cluster}: {state}")
    retries = sum(
        metrics.registry.get_sample_value("propagator_apply_retries_total", {"cluster": c}) or 0
        for c in conns
    )
    latency_limit = math.ceil(len(conns) / concurrency) * 3 * latency_s
    ideal = max(latency_limit, servers_s)
    return {
        "concurrency": concurrency,
        "clusters": len(conns),
        "wall_s": wall,
        "requests_per_cluster": CountingConnection.requests / len(conns),
        "latency_limit_s": latency_limit,
        "servers_s": servers_s,
        "ideal_s": ideal,
        "ratio": wall / ideal,
        "retries": int(retries),
    }


def _median_pair(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The pair (bare loop, then member syncs, back to back) whose ratio is the median, with
    the range of the ratios: the two cores' speed moves from minute to minute, and each
    ratio compares two measures taken under the same load."""
    ordered = sorted(pairs, key=lambda p: p["ratio"])
    row = dict(ordered[len(ordered) // 2])
    row["ratio_min"], row["ratio_max"] = ordered[0]["ratio"], ordered[-1]["ratio"]
    row["pairs"] = len(pairs)
    return row


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--clusters", type=int, default=100)
        parser.add_argument("--latency-ms", type=float, default=50.0)
        parser.add_argument(
            "--repeat",
            type=int,
            default=3,
            help="pairs (bare loop, member syncs) per concurrency; the median ratio is shown",
        )

    args = arguments(__doc__, "20 clusters (under a minute)", more)
    if args.repeat < 1:
        raise SystemExit(f"bench.fanout: --repeat {args.repeat}: at least 1")
    clusters = 20 if args.quick else args.clusters
    latency_s = args.latency_ms / 1000
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        state = anyio.run(
            local.up,
            Path(tmp),
            local.testbin_dir(),
            local.FleetOptions(members=3, nodes_per_cluster=1),
        )
        proxies: list[LatencyProxy] = []
        try:
            conns, proxies = _connections(state, clusters, latency_s)
            direct, _ = _connections(state, clusters, None)

            async def runs() -> list[dict[str, Any]]:
                rows = []
                for concurrency in (1, 10, 50):
                    pairs = [
                        await measure(conns, direct, concurrency, f"c{concurrency}r{i}", latency_s)
                        for i in range(args.repeat)
                    ]
                    rows.append(_median_pair(pairs))
                    rows[-1]["speedup"] = rows[0]["wall_s"] / rows[-1]["wall_s"]
                return rows

            rows = anyio.run(runs)
        finally:
            for proxy in proxies:
                proxy.close()
            local.down(state)
    print(f"fan-out of {OBJECTS} objects, {latency_s * 1000:g} ms added per request")
    emit(
        rows,
        [
            ("concurrency", "max concurrency"),
            ("clusters", "clusters"),
            ("wall_s", "wall s"),
            ("latency_limit_s", "latency limit s"),
            ("servers_s", "servers limit s"),
            ("ratio", "ratio to ideal"),
            ("ratio_min", "lowest"),
            ("ratio_max", "highest"),
            ("requests_per_cluster", "requests/cluster"),
            ("speedup", "speed-up vs 1"),
            ("retries", "retries"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
