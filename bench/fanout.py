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
the servers' limit, the time a bare loop takes to send the same writes (the very bodies
the member syncs send) straight to the members at the same concurrency (on two cores the
API servers may be the bottleneck). Each side starts once the members are quiet, and what
the side before wrote (its namespaces) is deleted and gone first, so every side starts on
members holding the same; each run's far clusters have names of their own.

Between the two, each pair also times the bare loop with the caches' watches: the same
writes with a member sync's cache of each far cluster open (see ``_bare_loop``), and
prints the member syncs' ratio to that as well. The difference between the two bare loops
is what the caches cost: the members serving each watch its events, this process reading
them; what is left is the member syncs' own.
It also prints the CPU each part of the machine used in the median pair. The process's
garbage collector is tuned as ``propagator run`` tunes it (``propagator.runtime.collector``).

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

from bench.cpu import CPU_COLUMNS, cpu_by_part, cpu_row, members_quiet
from bench.latency_proxy import LatencyProxy
from bench.report import arguments, emit
from fleet import local
from fleet.member import MemberMonitor
from fleet.readiness import HealthPolicy
from kube.connection import KubeConnection
from kube.kubeconfig import load_kubeconfig
from kube.session import ConnectionOptions
from propagator.observability.metrics import Metrics
from propagator.propagation.clustersync import namespace_to_create
from propagator.propagation.membersync import MemberSync
from propagator.runtime import collector, eventloop
from propagator.runtime.memberregistry import Member, MemberRegistry, Object, ObjectFn, SyncFn
from propagator.settings import Settings
from propagator.work.objects import member_selector, owner_label_of, revision_of
from propagator.work.table import ClusterWork, SyncPolicy, WorkTable

OBJECTS = 10
CONFIG_MAPS = ("v1", "ConfigMap")


class CountingConnection(KubeConnection):
    """A member connection that counts its requests: every call answered (each goes
    through ``_call``, whether sent at once by ``send_now`` or by ``request``) and every
    watch."""

    requests = 0

    async def _call(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        CountingConnection.requests += 1
        return await super()._call(*args, **kwargs)

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


def _work(app: str, cluster: str, namespace: str, policy: SyncPolicy) -> ClusterWork:
    """Application ``app``'s work for ``cluster``: the benchmark's objects in ``namespace``."""
    objects = tuple(_objects(namespace))
    return ClusterWork(app, cluster, objects, revision_of(objects), frozenset(), policy)


def _written(work: ClusterWork, namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The very bodies a fresh cluster's member sync sends for ``work``: the objects'
    ``namespace`` (created) and the objects (applied), stamped with the owner and member
    labels and annotations."""
    created = namespace_to_create(namespace, work, work.cluster, brought=False)
    stamped = [work.owner.stamp(o, revision_of([o]), work.cluster) for o in work.objects]
    return created, stamped


async def _bare_loop(
    conns: dict[str, KubeConnection],
    concurrency: int,
    run: str,
    cached: bool = False,
    watched: bool = False,
    namespaces_exist: bool = False,
) -> float:
    """The servers' limit: the same writes as a fresh cluster's sync (its namespace
    created, then its objects applied at once, the same bodies) sent straight to the
    members, ``concurrency`` clusters at once, without added latency.

    ``cached``: with the watch a member sync's cache opens on each far cluster opened
    first (the registry's own, selected by the far cluster's member label), and done when
    every cache holds its cluster's objects. What serving those watches costs the members
    is in it (each watch's events, encoded and sent; here a third of the far clusters
    share each API server, and each write's event is offered to each of their watches
    too, where a real member has one such watch of ours per kind). So is what reading the
    events costs this process; the member syncs' own work is not.

    ``watched``: the objects stamped as propagated to the clusters ``conns`` is keyed by
    (by applications that do not exist), so that the caches a controller running
    meanwhile holds of those clusters select them: the members send it each write's
    event, as in a rollout of its own, and it drops them (no work of its names them).
    Otherwise they are stamped for clusters named as no registered member is, and no
    such cache lists them (see _sync_all).

    ``namespaces_exist``: the namespaces were made beforehand (see
    :func:`make_namespaces`), as for members used only in theirs: only the objects are
    written, as a sync there writes them."""
    if cached and watched:
        raise ValueError("a bare loop is watched by its own caches or a controller's, not both")
    limiter = anyio.CapacityLimiter(concurrency)
    policy = SyncPolicy.of(None, Settings().sync_defaults())
    named = {f"bare-{run}-{cluster}": conn for cluster, conn in conns.items()}
    stamped_for = {f"bare-{run}-{c}": c if watched else f"bare-{run}-{c}" for c in conns}
    waiting = set(named) if cached else set()
    filled = anyio.Event()

    def arrived(member: Member, event: str, old: Object | None, new: Object | None) -> None:
        if member.name in waiting and len(member.caches[CONFIG_MAPS].cache) >= OBJECTS:
            waiting.discard(member.name)
            if not waiting:
                filled.set()

    async def one(name: str) -> None:
        conn = named[name]
        work = _work(f"bench/{name}", stamped_for[name], name, policy)
        namespace, objects = _written(work, name)
        async with limiter:
            if not namespaces_exist:
                await conn.create(namespace)
            async with anyio.create_task_group() as tg:
                for obj in objects:
                    tg.start_soon(functools.partial(conn.apply, obj))

    async with anyio.create_task_group() as outer:
        if cached:
            registry = _registry(_no_sync, on_object=arrived)
            await outer.start(registry.run)
            await _serving(registry, named)
        start = time.perf_counter()
        if cached:
            for member in registry.units.values():
                registry.cache(member, *CONFIG_MAPS, first_from_any_state=True)
        async with anyio.create_task_group() as tg:
            for name in named:
                tg.start_soon(one, name)
        if cached:
            await filled.wait()
        wall = time.perf_counter() - start
        outer.cancel_scope.cancel()
    return wall


async def _no_sync(member: Member, key: str) -> None:
    """A registry's sync that is never called (nothing is queued)."""


def _registry(sync: SyncFn, on_object: ObjectFn = lambda *_: None) -> MemberRegistry:
    """A member registry as the controller makes one (its settings' defaults)."""
    settings = Settings()
    return MemberRegistry(
        selector=member_selector,
        index=owner_label_of,
        sync=sync,
        on_object=on_object,
        on_added=lambda _: None,
        workers_per_member=settings.member_workers,
        circuit_failure_threshold=settings.circuit_failure_threshold,
        circuit_cool_down_s=settings.circuit_cool_down_s,
        requeue_max_delay_s=settings.requeue_max_delay_s,
    )


async def _serving(registry: MemberRegistry, named: dict[str, KubeConnection]) -> None:
    """Give ``registry`` a unit per far cluster (by name, on its connection, with a monitor
    as the fleet manager makes one) and wait until each serves (its workers wait for
    work): an application fans out to members the controller already serves, as in
    ``bench.scale``, not to units starting meanwhile."""
    policy = HealthPolicy()
    registry.sync(
        {n: MemberMonitor(n, "bench", policy, connection=conn) for n, conn in named.items()}
    )
    await anyio.wait_all_tasks_blocked()


async def _sync_all(
    conns: dict[str, KubeConnection], concurrency: int, run: str
) -> tuple[float, WorkTable, Metrics]:
    """Every far cluster's application through the controller's member syncs: the
    registry's units and caches, the work table, the member sync."""
    settings = Settings(max_concurrency=concurrency)
    table, metrics = WorkTable(), Metrics()
    done = anyio.Event()
    # Each run's far clusters have names of their own, so their caches (selected by the
    # member label) list only this run's objects, as on a fresh cluster, though earlier
    # runs' objects stay on the shared members. Several far clusters share one real
    # member: an application of their own (named as the cluster) keeps each one's
    # pruning to its own objects, as on separate API servers.
    named = {f"sync-{run}-{cluster}": conn for cluster, conn in conns.items()}
    waiting = set(named)

    def reported(app: str, settled: bool) -> None:
        if settled:
            waiting.discard(app.split("/", 1)[1])
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
    registry = _registry(member_sync.sync)
    policy = SyncPolicy.of(None, settings.sync_defaults())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        await _serving(registry, named)
        start = time.perf_counter()
        for name in named:
            app = f"bench/{name}"
            work = _work(app, name, name, policy)
            table.set_work(app, {name: work}, now=0.0, recheck_after_s=3600)
            member = registry.get(name)
            assert member is not None
            registry.queue(member, app, work.kinds)
        await done.wait()
        wall = time.perf_counter() - start
        tg.cancel_scope.cancel()
    return wall, table, metrics


async def make_namespaces(
    direct: dict[str, KubeConnection], prefix: str, concurrency: int = 50
) -> None:
    """Create the namespace ``prefix`` + each far cluster's name, ``concurrency`` at a
    time (those a bare loop with ``namespaces_exist`` writes into)."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def make(name: str, conn: KubeConnection) -> None:
        async with limiter:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": prefix + name}}
            await conn.create(body)

    async with anyio.create_task_group() as tg:
        for name, conn in direct.items():
            tg.start_soon(make, name, conn)


async def delete_namespaces(
    direct: dict[str, KubeConnection], prefix: str, concurrency: int = 50, limit_s: float = 1800
) -> None:
    """Delete the namespaces a bare loop or the member syncs wrote (``prefix`` and each far
    cluster's name), ``concurrency`` at a time, and wait until the members' namespace
    controllers have removed them and what they held (at most ``limit_s``): what those
    controllers do with them must not load the measure that follows, and every measure
    starts on members holding what the first did. The member syncs' watches list their
    kind across the whole member, so the objects of every earlier run would weigh on the
    later runs' syncs alone (the runs at concurrency 50 came last, on members holding
    several thousand ConfigMaps of earlier runs each)."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def delete(cluster: str, conn: KubeConnection) -> None:
        async with limiter:
            await conn.delete("v1", "Namespace", f"{prefix}{cluster}")

    async with anyio.create_task_group() as tg:
        for cluster, conn in direct.items():
            tg.start_soon(delete, cluster, conn)
    with anyio.move_on_after(limit_s) as waited:
        for conn in list(direct.values())[:3]:  # the first three reach the three members
            while True:
                listing = await conn.request("GET", "/api/v1/namespaces")
                if not any(n["metadata"]["name"].startswith(prefix) for n in listing["items"]):
                    break
                await anyio.sleep(1)
    if waited.cancelled_caught:
        raise SystemExit(f"bench: namespaces {prefix}* still on a member after {limit_s:g} s")


async def measure(
    state: local.FleetState,
    conns: dict[str, KubeConnection],
    direct: dict[str, KubeConnection],
    concurrency: int,
    run: str,
    latency_s: float,
) -> dict[str, Any]:
    for conn in [*conns.values(), *direct.values()]:
        await conn.version()  # TLS handshakes and discovery outside the timing
        await conn.discovery.kinds()
    # Each side starts on members at rest: what the other side's writes left them to do
    # (each new namespace's service account and root CA ConfigMap) is not counted in it.
    sides = {}
    for side, cached, side_run in (
        ("bare loop", False, run),
        ("bare loop, caches", True, f"{run}c"),
    ):
        await members_quiet(state)
        before = cpu_by_part(state, time.process_time)
        took = await _bare_loop(direct, concurrency, side_run, cached)
        sides[side] = (
            took,
            cpu_row(before, cpu_by_part(state, time.process_time), took, concurrency=concurrency),
        )
        await delete_namespaces(direct, f"bare-{side_run}-")
    (servers_s, bare_cpu), (cached_s, cached_cpu) = sides["bare loop"], sides["bare loop, caches"]
    await members_quiet(state)
    CountingConnection.requests = 0
    before = cpu_by_part(state, time.process_time)
    wall, table, metrics = await _sync_all(conns, concurrency, run)
    sync_cpu = cpu_row(before, cpu_by_part(state, time.process_time), wall, concurrency=concurrency)
    requests = CountingConnection.requests
    await delete_namespaces(direct, f"sync-{run}-")
    failed = {
        (app, cluster): sync_state
        for app in table.apps()
        for cluster, sync_state in table.states_of(app).items()
        if not sync_state.applied
    }
    if failed:
        (_, cluster), sync_state = next(iter(failed.items()))
        raise SystemExit(
            f"bench.fanout: {len(failed)} clusters failed, e.g. {cluster}: {sync_state}"
        )
    retries = sum(
        metrics.registry.get_sample_value("propagator_apply_retries_total", {"cluster": c}) or 0
        for app in table.apps()
        for c in table.states_of(app)
    )
    latency_limit = math.ceil(len(conns) / concurrency) * 3 * latency_s
    ideal = max(latency_limit, servers_s)
    return {
        "concurrency": concurrency,
        "clusters": len(conns),
        "wall_s": wall,
        "requests_per_cluster": requests / len(conns),
        "latency_limit_s": latency_limit,
        "servers_s": servers_s,
        "ideal_s": ideal,
        "ratio": wall / ideal,
        "cached_s": cached_s,
        "ratio_cached": wall / max(latency_limit, cached_s),
        "retries": int(retries),
        "cpu": [
            {**bare_cpu, "side": "bare loop"},
            {**cached_cpu, "side": "bare loop, caches"},
            {**sync_cpu, "side": "member syncs"},
        ],
    }


def _median_pair(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The pair (bare loop, then member syncs, the bare loop with caches between them) whose
    ratio is the median, with the range of the ratios: the two cores' speed moves from
    minute to minute, and each ratio compares measures taken under the same load."""
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
            # At 50 one run's pairs spread over 0.3 (the two cores' speed moves from
            # minute to minute): a median of five outlasts two outliers, of three one.
            default=5,
            help="pairs (bare loop, member syncs) per concurrency; the median ratio is shown",
        )

    args = arguments(__doc__, "20 clusters (under a minute)", more)
    if args.repeat < 1:
        raise SystemExit(f"bench.fanout: --repeat {args.repeat}: at least 1")
    clusters = 20 if args.quick else args.clusters
    latency_s = args.latency_ms / 1000
    collector.install()  # the garbage collector tuned as ``propagator run`` tunes it
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
                        await measure(
                            state, conns, direct, concurrency, f"c{concurrency}r{i}", latency_s
                        )
                        for i in range(args.repeat)
                    ]
                    rows.append(_median_pair(pairs))
                    rows[-1]["speedup"] = rows[0]["wall_s"] / rows[-1]["wall_s"]
                return rows

            rows = eventloop.run(runs)  # both sides on the controller's event loop
        finally:
            for proxy in proxies:
                proxy.close()
            local.down(state)
    print(f"fan-out of {OBJECTS} objects, {latency_s * 1000:g} ms added per request")
    cpu_rows = [cpu for r in rows for cpu in r.pop("cpu")]
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
            ("cached_s", "with caches s"),
            ("ratio_cached", "ratio to it"),
            ("requests_per_cluster", "requests/cluster"),
            ("speedup", "speed-up vs 1"),
            ("retries", "retries"),
        ],
        args.json,
    )
    print()
    print("CPU seconds in the median pair: the bare loop, with the caches' watches, then the")
    print("member syncs (own: this process, the loop or the controller's syncs; members and")
    print("hub: all their processes)")
    emit(cpu_rows, [("concurrency", "max concurrency"), ("side", "side"), *CPU_COLUMNS], args.json)


if __name__ == "__main__":
    main()
