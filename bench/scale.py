"""The controller at fleet scale: N MemberClusters far away, served by three real members.

A local hub and three members start here; N MemberClusters (100, 300 and 1,000 by default)
are registered on the hub, each with a kubeconfig Secret that reaches one of the three
members through its own loopback proxy adding a fixed latency (50 ms per request by
default), so every far cluster is a separate connection far away. ``propagator run``
runs as a child process. For each N it prints:

- the time from the controller's start until all N members are Ready, then until all
  are described (the kinds they serve and their capacity in their status too), and how
  many MemberCluster writes (statuses and taints) it took to get there;
- the controller at rest with every watch open (all N members described): threads,
  open connections, RSS, CPU over 60 s;
- the time to notice a member outage (its proxy stops answering) as NotReady, seen
  through a watch of the MemberClusters, next to the probe settings' own bound, (failure
  threshold + 1) x probe interval + probe timeout: each member's probes start an
  interval apart, the first after the outage may pass on what the member sent just
  before it, and the last failing one may wait for its timeout; then the same while a
  tenth of the far clusters stop answering at once (their proxies let nothing through
  and close nothing: each probe of theirs waits for its timeout), and the time until
  all of those are NotReady;
- one application of 10 ConfigMaps placed on all N far clusters, in a namespace per
  cluster (an override sets ``bench-{{ cluster.name }}``: the far clusters share three
  API servers, which would otherwise hold one copy of the objects for all): from creating
  it to Applied, and its ratio to the ideal, the larger of the latency limit,
  ceil(N / concurrency) x 3 x latency, and the servers' limit, the time a bare loop takes
  to send the same writes straight to the members at the same concurrency, measured in
  the same run on the same members: right before the rollout and right after it, with
  the fleet connected and at rest, the faster of the two (its namespaces deleted again
  each time). The members serve the whole connected fleet's watches and probes through
  the rollout, which slows their writes (on three servers standing in for N); the bare
  loop is also measured before the controller starts, on members serving nothing else,
  and the ratio to that one is shown too; and once more after the rollout with each
  far cluster's writes stamped as propagated to it (by an application that does not
  exist), so that the controller's caches of the far clusters, open since the rollout,
  receive their events as in the rollout (the controller drops them): the "watched
  loop", what the members' writes take while they also serve those watches, and the
  ratio to it;
- the CPU seconds each part used during each bare loop, at rest (the 60 s above) and
  during the rollout (the members' processes, the hub's, the bare loop's own process or
  the controller, the latency proxies) and how many of the machine's cores they kept busy
  on average: where the rollout's time goes beyond the servers' limit, and what the fleet
  at rest already takes of the cores the rollout shares; and how many watches the
  members' API servers cut meanwhile for falling behind (their own counter). The far
  clusters' caches share three servers, a third of N watches of each kind on each, and a
  server offers every event of a kind to each of its watches of that kind that may
  match (found by namespace, not by label): offers that grow with N², where a real
  fleet's grow with N. A watch cut starts again from its last version, which the server
  replays. And how many ConfigMap events the servers sent to watches (their own counter
  too): in the rollout and the watched loop, each far cluster's objects to its cache.

With ``--limited`` each far cluster is registered as what it is, a member used only in
its own namespace (MemberCluster spec.namespaces: ``bench-<name>``, made first, as the
admin of such a member does): the controller's caches watch that namespace, and a server
offers each event only to that namespace's watches, as a real member does to the one
controller watching it. The bare loops then write only the objects (their namespaces are
made before they are timed), the latency limit counts two round trips per cluster (its
objects, its caches' first list), and there is no watched loop (those caches see no other
namespace's writes) and no slow member (its applications write into namespaces of their
own).

With ``--pull`` the far clusters are Pull members instead: no kubeconfig on the hub, each
one's agent (the real one, with its own hub identity) a task of one process beside the
members, reaching the hub through its own proxy adding the latency; the controller's
time to see them all Ready, the hub's API requests per second at rest and in the
application's rollout, the Work writes, and the rollout against the servers' limit in the
same run and against the Push figure ``--limited`` recorded (``bench/pullscale.py``).

    python -m bench.scale [--quick] [--json] [--clusters 100,300,1000] [--latency-ms MS]
                          [--limited] [--pull]
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import math
import re
import resource
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from bench.apiservers import watch_counts, watch_counts_since
from bench.cpu import CPU_COLUMNS, cpu_by_part, cpu_row
from bench.fanout import OBJECTS, _bare_loop, _connections, delete_namespaces, make_namespaces
from bench.latency_proxy import LatencyProxy
from bench.propagation import Controller, _condition, _setup_crds, _wait
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from kube.connection import KubeConnection
from propagator.runtime import eventloop
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, config_map
from tests.e2e.tools import remote_ports

NAMESPACE = "propagator-system"
CONCURRENCY = 100
SLOW_MEMBER_AT = 100
"""The fleet size at which the slow member is measured (100 applications beside it)."""
PROBE_INTERVAL_S = 10.0
PROBE_TIMEOUT_S = 5.0
PROBE_FAILURE_THRESHOLD = 3
AT_REST_S = 60.0
"""How long idle CPU is measured: two rounds of /readyz (every 30 s; PINGs between)."""


_SERVER = re.compile(r"server: https://127\.0\.0\.1:(\d+)")


def _far_kubeconfig(member_kubeconfig: str, port: int) -> str:
    return _SERVER.sub(f"server: https://127.0.0.1:{port}", member_kubeconfig)


def _far_name(index: int) -> str:
    """The name the far cluster ``index`` is registered under (on member index % 3)."""
    return f"far-{index:04d}"


APP_NAMESPACE_PREFIX = "bench-"


def _app_namespace(cluster: str) -> str:
    """The namespace the application's objects go to on far cluster ``cluster`` (its
    override's ``bench-{{ cluster.name }}``)."""
    return APP_NAMESPACE_PREFIX + cluster


PER_CLUSTER = {
    "clusterSelector": {"matchLabels": {"bench": "far"}},
    "patches": [
        {
            "op": "replace",
            "path": "/metadata/namespace",
            "value": APP_NAMESPACE_PREFIX + "{{ cluster.name }}",
        }
    ],
}
"""The override that sends an application's objects to each far cluster's own namespace
(``bench-{{ cluster.name }}``): the far clusters share three API servers, which would
otherwise hold one copy of the objects for all."""


def _register(
    hub: Any, state: local.FleetState, count: int, latency_s: float, limited: bool
) -> list[LatencyProxy]:
    """N far MemberClusters (label bench=far) with their Secrets and proxies; ``limited``:
    each used only in its own namespace (spec.namespaces), which must exist."""
    core, custom = k8s.CoreV1Api(hub), k8s.CustomObjectsApi(hub)
    proxies = []
    kubeconfigs = [m.kubeconfig.read_text() for m in state.members]
    for i in range(count):
        text = kubeconfigs[i % len(kubeconfigs)]
        found = _SERVER.search(text)
        assert found is not None
        port = int(found.group(1))
        proxy = LatencyProxy(("127.0.0.1", port), latency_s)
        proxies.append(proxy)
        name = _far_name(i)
        secret = {
            "metadata": {"name": f"{name}-kubeconfig", "namespace": NAMESPACE},
            "data": {
                "kubeconfig": base64.b64encode(_far_kubeconfig(text, proxy.port).encode()).decode()
            },
        }
        core.create_namespaced_secret(NAMESPACE, secret)  # type: ignore[arg-type]
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "memberclusters",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "MemberCluster",
                "metadata": {"name": name, "labels": {"bench": "far"}},
                "spec": {
                    "layer": "edge",
                    "region": "far",
                    "secretRef": {
                        "namespace": NAMESPACE,
                        "name": f"{name}-kubeconfig",
                        "key": "kubeconfig",
                    },
                    **({"namespaces": [_app_namespace(name)]} if limited else {}),
                },
            },
        )
    return proxies


def _make_far_fleet(hub: Any) -> None:
    """Fleet ``far``: every MemberCluster labelled bench=far (the far clusters)."""
    k8s.CustomObjectsApi(hub).create_cluster_custom_object(
        GROUP,
        VERSION,
        "fleets",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Fleet",
            "metadata": {"name": "far"},
            "spec": {"clusterSelector": {"matchLabels": {"bench": "far"}}},
        },
    )


def _fleet(hub: Any) -> Any:
    return k8s.CustomObjectsApi(hub).get_cluster_custom_object(GROUP, VERSION, "fleets", "far")


def _ready_and_described(hub: Any, count: int, started: float) -> tuple[float, float]:
    """Seconds from ``started`` (time.perf_counter()) until all ``count`` far clusters are
    Ready in their Fleet, and until all are described (kinds and capacity in status)."""
    _wait(
        lambda: (_fleet(hub).get("status") or {}).get("readyClusters") == count,
        f"{count} members Ready",
        limit_s=1800,
        every_s=1,
    )
    ready_s = time.perf_counter() - started
    _wait(lambda: _all_described(hub) == count, f"{count} members described", 600, 1)
    return ready_s, time.perf_counter() - started


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def _all_described(hub: Any) -> int:
    """How many MemberClusters' statuses say everything a registration finds: the kinds
    served and the capacity, besides Ready."""
    listing: Any = k8s.CustomObjectsApi(hub).list_cluster_custom_object(
        GROUP, VERSION, "memberclusters"
    )
    return sum(
        not _not_ready(m) and {"apiEnablements", "resources"} <= (m.get("status") or {}).keys()
        for m in listing["items"]
    )


def _at_rest(controller: Controller) -> dict[str, Any]:
    assert controller.proc is not None
    pid = controller.proc.pid
    cpu0, t0 = controller.cpu_s(), time.perf_counter()
    time.sleep(AT_REST_S)
    idle = (controller.cpu_s() - cpu0) / (time.perf_counter() - t0) * 100
    return {
        "threads": _threads(pid),
        "connections": len(remote_ports(pid)),
        "rss_mib": controller.rss_mib(),
        "idle_cpu_pct": idle,
    }


def _not_ready(member: Mapping[str, Any]) -> bool:
    """Whether a MemberCluster's ``Ready`` condition says it is not ready."""
    return any(
        c["type"] == "Ready" and c["status"] != "True"
        for c in (member.get("status") or {}).get("conditions") or []
    )


def _not_ready_after(hub: Any, names: set[str], act: Callable[[], None]) -> dict[str, float]:
    """Seconds from calling ``act`` to each of ``names`` first seen NotReady, through one
    watch of the MemberClusters: a list of 1,000 polled every 0.5 s saw them up to ~1 s
    late (the interval, and the list's own time on a busy hub)."""
    api = k8s.CustomObjectsApi(hub)
    seen: dict[str, float] = {}
    stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]
    failures: list[BaseException] = []

    def watch() -> None:
        try:
            for event in stream.stream(  # type: ignore[no-untyped-call]
                api.list_cluster_custom_object, GROUP, VERSION, "memberclusters"
            ):
                member, now = event["object"], time.perf_counter() - start
                name = member["metadata"]["name"]
                if name in names and name not in seen and _not_ready(member):
                    seen[name] = now
                    if names <= seen.keys():
                        stream.stop()  # type: ignore[no-untyped-call]
        except BaseException as exc:  # raised in the caller's thread below
            failures.append(exc)

    start = time.perf_counter()
    act()
    # The watch starts with every member as it is (Ready: none is recorded); what goes
    # NotReady comes after, tens of seconds later.
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _wait(lambda: not watcher.is_alive(), f"{len(names)} members NotReady", limit_s=600)
    if failures:
        raise failures[0]
    return seen


def _outage(hub: Any, proxy: LatencyProxy, name: str) -> float:
    """Seconds from a member's proxy closing to its MemberCluster NotReady."""
    return _not_ready_after(hub, {name}, proxy.close)[name]


def _region_hangs(hub: Any, proxies: list[LatencyProxy], count: int) -> dict[str, float]:
    """A tenth of the far clusters stop answering at once (their proxies let nothing
    through, either way, and close nothing) as one more member's proxy closes: seconds
    until that member is NotReady, and until every hanging one is. The hanging members'
    probes wait for their timeout; the controller must not let them delay the others'."""
    hanging = {f"far-{i:04d}": proxies[i] for i in range(1, 1 + count // 10)}
    gone = f"far-{count - 1:04d}"

    def act() -> None:
        for proxy in hanging.values():
            proxy.hang()
        proxies[count - 1].close()

    seen = _not_ready_after(hub, {gone, *hanging}, act)
    return {
        "region_gone_noticed_s": seen[gone],
        "region_hanging_noticed_s": max(seen[name] for name in hanging),
    }


def _application(hub: Any, count: int) -> float:
    """Seconds from creating one application of 10 ConfigMaps placed on every far cluster
    to it Applied on all of them. Its namespace is set per cluster by an override
    (``bench-{{ cluster.name }}``): the far clusters share three API servers, which would
    otherwise hold one copy of the objects for all."""
    api = k8s.CustomObjectsApi(hub)
    manifests = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"object-{n}", "namespace": "bench"},
            "data": {"index": str(n)},
        }
        for n in range(OBJECTS)
    ]

    def create(name: str) -> None:
        app = application(name, "scale", manifests, "far", overrides=[PER_CLUSTER])
        api.create_namespaced_custom_object(GROUP, VERSION, "scale", PLURAL, app)

    start = time.perf_counter()
    applied = _created_and_applied(api, "scale", ["everywhere"], create)
    app: Any = api.get_namespaced_custom_object(GROUP, VERSION, "scale", PLURAL, "everywhere")
    clusters = _clusters_applied(app)
    if clusters != count:
        raise SystemExit(f"bench.scale: the application is Applied on {clusters} of {count}")
    return applied["everywhere"] - start


def _clusters_applied(app: dict[str, Any]) -> int:
    return sum(1 for c in (app.get("status") or {}).get("clusters") or [] if c.get("applied"))


def _refused(apps: list[dict[str, Any]]) -> None:
    """Stop at once when an application was refused (waiting would only time out)."""
    for app in apps:
        for c in (app.get("status") or {}).get("conditions") or []:
            if c["type"] == "Applied" and c.get("reason") == "Forbidden":
                name = app["metadata"]["name"]
                raise SystemExit(f"bench.scale: application {name} refused: {c.get('message')}")


def _latencies(hub: Any, names: list[tuple[str, str]]) -> list[float]:
    """Create one application per (name, cluster), each a ConfigMap in a namespace of its
    own; returns each one's seconds from its creation to Applied."""
    api = k8s.CustomObjectsApi(hub)
    created: dict[str, float] = {}
    clusters = dict(names)

    def create(name: str) -> None:
        manifests = [config_map(name, f"bench-{name}", index="0")]
        placement = {"clusterNames": [clusters[name]]}
        app = application(name, "latency", manifests, "far", placement=placement)
        created[name] = time.perf_counter()
        api.create_namespaced_custom_object(GROUP, VERSION, "latency", PLURAL, app)

    applied = _created_and_applied(api, "latency", list(clusters), create)
    return [applied[n] - created[n] for n, _ in names]


def _created_and_applied(
    api: Any, namespace: str, names: list[str], create: Callable[[str], None]
) -> dict[str, float]:
    """Call ``create`` for each of ``names`` (a few at a time) and return when each one was
    first seen Applied, through one watch of ``namespace``'s applications: a list polled
    every 50 ms loaded the hub's API server it measures (a third of its time went to
    those lists), and a list of 1,000 applications every 0.5 s cost the benchmark's
    process a good part of a core, on the two the controller and the servers share."""
    applied: dict[str, float] = {}
    wanted = set(names)
    stream = k8s_watch.Watch()  # type: ignore[no-untyped-call]

    def seen(item: dict[str, Any]) -> None:
        now = time.perf_counter()
        name = item["metadata"]["name"]
        if name not in wanted or name in applied:
            return
        _refused([item])  # raised again out of the watch's thread
        if _condition(item, "Applied") == "True":
            applied[name] = now

    def watch() -> None:
        while not wanted <= applied.keys():  # again if the server ended the watch
            for event in stream.stream(  # type: ignore[no-untyped-call]
                api.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                timeout_seconds=1800,
            ):
                seen(event["object"])
                if wanted <= applied.keys():
                    stream.stop()  # type: ignore[no-untyped-call]

    failures: list[BaseException] = []

    def watching() -> None:
        try:
            watch()
        except BaseException as exc:  # raised in the caller's thread below
            failures.append(exc)

    # A daemon thread: when a create fails, the benchmark stops without waiting for it.
    watcher = threading.Thread(target=watching, daemon=True)
    watcher.start()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, names))
    _wait(lambda: not watcher.is_alive(), f"{len(names)} applications Applied", limit_s=1800)
    if failures:
        raise failures[0]
    return applied


def _slow_member(hub: Any, proxies: list[LatencyProxy], count: int) -> dict[str, Any]:
    """create -> Applied of applications on healthy members, alone and while one member
    takes 30 s per request and as many applications, planned, wait for it."""
    fast = [f"far-{i:04d}" for i in range(1, count)]
    k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": "latency"}})  # type: ignore[arg-type]
    alone = _latencies(hub, [(f"alone-{i:03d}", fast[i % len(fast)]) for i in range(100)])
    proxies[0].latency_s = 30.0  # far-0000 answers, 30 s late
    api = k8s.CustomObjectsApi(hub)
    for i in range(100):
        name = f"stuck-{i:03d}"
        manifests = [config_map(name, f"bench-{name}", index="0")]
        app = application(
            name, "latency", manifests, "far", placement={"clusterNames": ["far-0000"]}
        )
        api.create_namespaced_custom_object(GROUP, VERSION, "latency", PLURAL, app)

    def stuck_planned() -> bool:
        listing: Any = api.list_namespaced_custom_object(GROUP, VERSION, "latency", PLURAL)
        stuck = [a for a in listing["items"] if a["metadata"]["name"].startswith("stuck-")]
        return len(stuck) == 100 and all(_condition(a, "Scheduled") == "True" for a in stuck)

    # Once they are planned, waiting on the slow member: a burst of 100 creations just
    # before would queue the measured plans behind theirs, as 100 applications on a
    # healthy member would, which is not what the slow member costs.
    _wait(stuck_planned, "the slow member's 100 applications planned", limit_s=300, every_s=0.5)
    beside = _latencies(hub, [(f"beside-{i:03d}", fast[i % len(fast)]) for i in range(100)])
    return {
        "alone_p50_ms": percentile(alone, 50) * 1000,
        "alone_p99_ms": percentile(alone, 99) * 1000,
        "slow_p50_ms": percentile(beside, 50) * 1000,
        "slow_p99_ms": percentile(beside, 99) * 1000,
        "p99_ratio": percentile(beside, 99) / percentile(alone, 99),
    }


def _direct(state: local.FleetState, count: int) -> dict[str, KubeConnection]:
    """A connection per far cluster straight to its member, keyed by the name it is
    registered under (the i-th reaches member i % 3)."""
    conns, _ = _connections(state, count, None)
    return {_far_name(i): conn for i, conn in enumerate(conns.values())}


def _make_app_namespaces(state: local.FleetState, count: int) -> None:
    """Make each far cluster's application namespace, as the admin of a member used only
    in its own namespace does before it is joined."""

    async def make() -> None:
        direct = _direct(state, count)
        try:
            await make_namespaces(direct, APP_NAMESPACE_PREFIX, CONCURRENCY)
        finally:
            for conn in direct.values():
                await conn.close()

    anyio.run(make)


def _servers_limit(
    state: local.FleetState, count: int, phase: str, watched: bool = False, limited: bool = False
) -> dict[str, Any]:
    """Seconds the bare loop takes to write every far cluster's namespace and objects
    straight to the members, with the CPU each part used meanwhile (a row of
    :func:`bench.cpu.cpu_row`, its phase ``phase``). Its namespaces are then deleted and
    waited for: what the members' namespace controllers do with them must not load the
    measure that follows.

    ``watched``: each far cluster's objects stamped as propagated to it, so that the
    running controller's caches of the far clusters receive their events, as in its
    rollout (see :func:`bench.fanout._bare_loop`).

    ``limited``: the far clusters are used only in their own namespaces, which exist: the
    loop's namespaces are made before it is timed, and it writes only the objects."""
    run = "watched" if watched else "bare"

    async def measure() -> dict[str, Any]:
        direct = _direct(state, count)
        try:
            for conn in direct.values():
                await conn.discovery.kinds()
            if limited:
                await make_namespaces(direct, f"bare-{run}-", CONCURRENCY)
            counts = watch_counts(state)
            before = cpu_by_part(state, time.process_time)
            took = await _bare_loop(
                direct, CONCURRENCY, run, watched=watched, namespaces_exist=limited
            )
            row = cpu_row(
                before, cpu_by_part(state, time.process_time), took, clusters=count, phase=phase
            )
            row.update(watch_counts_since(state, counts))
            await delete_namespaces(direct, f"bare-{run}-", CONCURRENCY)
            return row
        finally:
            for conn in direct.values():
                await conn.close()

    return eventloop.run(measure)  # the controller's loop: a fair bare loop


def run_size(count: int, latency_s: float, tmp: Path, limited: bool = False) -> dict[str, Any]:
    """One fleet size's figures; ``limited``: each far cluster is used only in its own
    namespace (see the module's docstring)."""
    state = anyio.run(
        local.up,
        tmp / f"n{count}",
        local.testbin_dir(),
        local.FleetOptions(members=3, nodes_per_cluster=1),
    )
    hub = local_cluster.api_client(state.hub)
    controller: Controller | None = None
    proxies: list[LatencyProxy] = []
    try:
        _setup_crds(hub)
        core = k8s.CoreV1Api(hub)
        for namespace in (NAMESPACE, "scale"):
            core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        proxies = _register(hub, state, count, latency_s, limited)
        if limited:
            _make_app_namespaces(state, count)
        _make_far_fleet(hub)
        # Its ports are picked after the proxies bound theirs, so none is taken meanwhile.
        controller = Controller(state.hub.kubeconfig, tmp / f"controller-{count}.log")
        controller.env.update(
            {
                "PROPAGATOR_PROBE_INTERVAL_S": str(PROBE_INTERVAL_S),
                "PROPAGATOR_PROBE_TIMEOUT_S": str(PROBE_TIMEOUT_S),
                "PROPAGATOR_PROBE_FAILURE_THRESHOLD": str(PROBE_FAILURE_THRESHOLD),
                "PROPAGATOR_MAX_CONCURRENCY": str(CONCURRENCY),
                "PROPAGATOR_NAMESPACE": NAMESPACE,
                # The far clusters' applications write a namespace of their own on each
                # member: the platform's applications, which tenancy lets write anywhere.
                "PROPAGATOR_PLATFORM_NAMESPACES": f"{NAMESPACE},scale,latency",
            }
        )
        alone = _servers_limit(state, count, "bare loop, members alone", limited=limited)
        started = time.perf_counter()
        controller.start()
        ready_s, described_s = _ready_and_described(hub, count, started)
        registration_writes = controller.metric(
            'propagator_status_writes_total{kind="MemberCluster'
        )
        counts = watch_counts(state)
        before, rest_from = cpu_by_part(state, controller.cpu_s), time.perf_counter()
        rest = _at_rest(controller)
        at_rest = cpu_row(
            before,
            cpu_by_part(state, controller.cpu_s),
            time.perf_counter() - rest_from,
            clusters=count,
            phase="at rest",
        )
        at_rest.update(watch_counts_since(state, counts))
        before_rollout = _servers_limit(
            state, count, "bare loop, before the rollout", limited=limited
        )
        counts = watch_counts(state)
        before = cpu_by_part(state, controller.cpu_s)
        applied_s = _application(hub, count)
        rollout = cpu_row(
            before, cpu_by_part(state, controller.cpu_s), applied_s, clusters=count, phase="rollout"
        )
        rollout.update(watch_counts_since(state, counts))
        after_rollout = _servers_limit(
            state, count, "bare loop, after the rollout", limited=limited
        )
        # (Caches of a member used only in its namespace do not see another's writes.)
        watched_loop = (
            None
            if limited
            else _servers_limit(state, count, "bare loop the caches watch", watched=True)
        )
        # (Its applications write into namespaces of their own, outside a limited member's.)
        slow = _slow_member(hub, proxies, count) if count == SLOW_MEMBER_AT and not limited else {}
        outage_s = _outage(hub, proxies[0], _far_name(0))
        region = _region_hangs(hub, proxies, count)
    finally:
        if controller is not None and controller.proc is not None:
            controller.stop()
        for proxy in proxies:
            proxy.close()
        hub.close()
        local.down(state)
    # A fresh cluster's round trips: its namespace, its objects, its caches' first list;
    # where the namespace exists, only the last two.
    latency_limit = math.ceil(count / CONCURRENCY) * (2 if limited else 3) * latency_s
    servers_s = min(before_rollout["wall_s"], after_rollout["wall_s"])
    ideal = max(latency_limit, servers_s)
    return {
        "clusters": count,
        "all_ready_s": ready_s,
        "all_described_s": described_s,
        "registration_writes": registration_writes,
        **rest,
        "outage_noticed_s": outage_s,
        "outage_bound_s": (PROBE_FAILURE_THRESHOLD + 1) * PROBE_INTERVAL_S + PROBE_TIMEOUT_S,
        **region,
        "applied_s": applied_s,
        "latency_limit_s": latency_limit,
        "servers_s": servers_s,
        "ratio": applied_s / ideal,
        "alone_s": alone["wall_s"],
        "ratio_alone": applied_s / max(latency_limit, alone["wall_s"]),
        **(
            {
                "watched_s": watched_loop["wall_s"],
                "ratio_watched": applied_s / max(latency_limit, watched_loop["wall_s"]),
            }
            if watched_loop
            else {}
        ),
        "cpu": [alone, at_rest, before_rollout, rollout, after_rollout]
        + ([watched_loop] if watched_loop else []),
        **slow,
    }


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--clusters", default="100,300,1000")
        parser.add_argument("--latency-ms", type=float, default=50.0)
        parser.add_argument(
            "--limited",
            action="store_true",
            help="register each far cluster as used only in its own namespace",
        )
        parser.add_argument(
            "--pull",
            action="store_true",
            help="the far clusters as Pull members, their agents simulated (bench.pullscale)",
        )

    args = arguments(__doc__, "100 clusters only", more)
    sizes = [100] if args.quick else [int(n) for n in args.clusters.split(",")]
    # Each far cluster is a few connections on both ends of its proxy.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.pull:
        from bench import pullscale  # (it builds on this module)

        with tempfile.TemporaryDirectory(prefix="bench-scale-pull-") as tmp:
            pulled = [pullscale.run_size(n, args.latency_ms / 1000, Path(tmp)) for n in sizes]
        print(
            f"{OBJECTS} objects per cluster, {args.latency_ms:g} ms added per request between "
            f"each agent and the hub, concurrency {CONCURRENCY}"
        )
        cpu = [row for r in pulled for row in r.pop("cpu")]
        emit(pulled, pullscale.COLUMNS, args.json)
        print()
        print("CPU seconds while the bare loops write and the controller's rollout writes")
        emit(cpu, pullscale.CPU, args.json)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        for count in sizes:
            rows.append(run_size(count, args.latency_ms / 1000, Path(tmp), args.limited))
    cpu_rows = [cpu for r in rows for cpu in r.pop("cpu")]
    print(
        f"{OBJECTS} objects per cluster, {args.latency_ms:g} ms added per request, "
        f"concurrency {CONCURRENCY}"
        + (", each far cluster used only in its own namespace" if args.limited else "")
    )
    emit(
        rows,
        [
            ("clusters", "clusters"),
            ("all_ready_s", "all Ready s"),
            ("all_described_s", "all described s"),
            ("registration_writes", "member writes to then"),
            ("threads", "threads"),
            ("connections", "connections"),
            ("rss_mib", "RSS MiB"),
            ("idle_cpu_pct", "idle CPU %"),
            ("outage_noticed_s", "outage noticed s"),
            ("outage_bound_s", "probe bound s"),
            ("region_gone_noticed_s", "outage beside a tenth hanging s"),
            ("region_hanging_noticed_s", "the tenth NotReady s"),
            ("applied_s", "app Applied s"),
            ("latency_limit_s", "latency limit s"),
            ("servers_s", "servers limit s"),
            ("ratio", "ratio to ideal"),
            ("alone_s", "members alone s"),
            ("ratio_alone", "ratio to alone"),
            ("watched_s", "watched loop s"),
            ("ratio_watched", "ratio to it"),
        ],
        args.json,
    )
    print()
    print("CPU seconds while each bare loop writes, the fleet is at rest and the controller's")
    print("rollout writes (own: the bare loop's process, or the controller; members and hub:")
    print("all their processes)")
    emit(
        cpu_rows,
        [
            ("clusters", "clusters"),
            ("phase", "phase"),
            *CPU_COLUMNS,
            ("watches_cut", "watches cut"),
            ("config_map_events", "ConfigMap events sent"),
        ],
        args.json,
    )
    slow = [r for r in rows if "alone_p99_ms" in r]
    if slow:
        print()
        print("create -> Applied of 100 applications on healthy members, alone and beside a")
        print("member that takes 30 s per request with 100 planned applications waiting for it")
        emit(
            slow,
            [
                ("clusters", "clusters"),
                ("alone_p50_ms", "alone p50 ms"),
                ("alone_p99_ms", "alone p99 ms"),
                ("slow_p50_ms", "beside slow p50 ms"),
                ("slow_p99_ms", "beside slow p99 ms"),
                ("p99_ratio", "p99 ratio"),
            ],
            args.json,
        )


if __name__ == "__main__":
    main()
