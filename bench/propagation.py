"""End-to-end propagation on real clusters: a local hub and three members, the CRDs, the
members joined with ``propagator fleet join`` and ``propagator run`` as a child process.

1. Time from creating an ApplicationPropagation (a Deployment of one replica and a
   ConfigMap) to ``Applied`` on all three members, and to ``Available`` (3/3 ready), over
   20 runs (p50, p99), twice: back to back (each run created once the previous one is
   gone from the hub, while the members' garbage collectors still delete its ReplicaSet
   and Pod on the same cores) and settled (once the members hold nothing of it either
   and the machine is at rest: the hub, the members and the process under test together
   under 0.3 cores for half a second; an idle local fleet uses about 0.12).
   A watch of the hub times each step (the moment its status write reaches the watch).
   Beside them, the same runs with ``bench.bareapplied`` in the controller's place: the
   fewest requests any controller makes for it (one create per object on every member at
   once, the ``Applied`` condition; the hub's admission policy, installed as the chart
   installs it, adds the finalizer for both), sent by a loop that does nothing else. Its
   create → ``Applied`` is the servers' limit on these cores, and the controller's is
   printed as a ratio to it as well. Half the bare loop's runs come before the
   controller's and half after, so neither side alone has a fresh fleet (the order moves
   the controller's median more than the bare loop's).
2. Steady state with 1,000 applications (a ConfigMap and a Service each, on all three
   members; the Service's health is judged by the built-in interpreter rules; one in ten
   also a Deployment at 0 replicas with a HorizontalPodAutoscaler of it, so its replicas
   are the autoscaler's): the
   time to propagate them all, then two waves of reconciles with nothing to change —
   every application re-queued by a TenantQuota change (what is applied is known), and a
   controller restart (every cluster synced once against its member's watch caches) —
   each until every queue is empty, with reconciles/s, the objects written to the members
   (must be 0), and the controller's CPU and RSS. Between the two, 30 s of pods of
   someone else's coming and going on one member (a Deployment scaled between 0 and 3
   replicas every 2 s) while the applications rest: the plans made per second, the
   MemberCluster status writes and the controller's CPU.
3. SIGTERM while 50 new applications reconcile (sent once the first of them has been
   reconciled): the time to exit and the exit code (a pod's default grace period is 30 s),
   then, after a restart, the time until all 50 are Applied (nothing lost).

    python -m bench.propagation [--quick] [--json] [--runs N] [--apps N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from api.crd import crds
from api.finalizerpolicy import PLURALS, cleanup_finalizer_policy
from bench.cpu import quiet
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from fleet.local import process
from tests.e2e.controller import free_port, http_get
from tests.e2e.manifests import (
    GROUP,
    PLURAL,
    VERSION,
    application,
    autoscaler,
    config_map,
    deployment,
    service,
)

REGIONS = {"member-1": "eu-west", "member-2": "us-east", "member-3": "ap-south"}
REST_CORES = 0.3
"""A settled run waits for the hub, the members and the process under test to use less
than this together (an idle local fleet of a hub and three members uses about 0.12)."""
REST_LIMIT_S = 10.0
"""The longest a settled run waits for rest; past it the run starts all the same and is
counted as begun on a busy machine."""


def _wait(probe: Any, what: str, limit_s: float = 600, every_s: float = 0.01) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if result := probe():
                return result
        except Exception:  # converging: try again
            pass
        time.sleep(every_s)
    raise SystemExit(f"bench.propagation: gave up waiting for {what}")


def _rest_waiter(state: local.FleetState, own_cpu_s: Callable[[], float]) -> Callable[[], bool]:
    """A function that waits until the machine is at rest (:data:`REST_CORES`; ``own_cpu_s``:
    the process under test), at most :data:`REST_LIMIT_S`, and says whether it came to
    rest."""

    def used() -> float:
        return own_cpu_s() + sum(local_cluster.cpu_seconds(c) for c in (state.hub, *state.members))

    def wait() -> bool:
        return anyio.run(quiet, used, REST_CORES, REST_LIMIT_S)

    return wait


def _condition(app: dict[str, Any], type_: str) -> str | None:
    for c in (app.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return str(c["status"])
    return None


class Controller:
    """``propagator run`` as a child process, with its CPU time and RSS from /proc."""

    def __init__(self, hub_kubeconfig: Path, log: Path) -> None:
        self.metrics_port, self.health_port = free_port(), free_port()
        self.env = {
            **os.environ,
            "PROPAGATOR_HUB_KUBECONFIG": str(hub_kubeconfig),
            "PROPAGATOR_BIND_ADDRESS": "127.0.0.1",
            "PROPAGATOR_METRICS_PORT": str(self.metrics_port),
            "PROPAGATOR_HEALTH_PORT": str(self.health_port),
            "PROPAGATOR_PROBE_INTERVAL_S": "2",
        }
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "propagator.cli.main", "run"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        _wait(lambda: http_get(self.health_port, "/readyz")[0] == 200, "controller ready")

    def stop(self) -> tuple[float, int]:
        """SIGTERM; returns the seconds until it exited and its exit code."""
        assert self.proc is not None
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        return time.perf_counter() - started, code

    def cpu_s(self) -> float:
        assert self.proc is not None
        return process.cpu_seconds_of(self.proc.pid)

    def rss_mib(self) -> float:
        assert self.proc is not None
        return process.rss_bytes_of(self.proc.pid) / 2**20

    def metric(self, prefix: str) -> float:
        """The sum of every series whose name and labels start with ``prefix``."""
        status, text = http_get(self.metrics_port, "/metrics")
        assert status == 200
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(prefix) and not line.startswith("#")
        )


def _setup_crds(hub: Any) -> None:
    """Install Propagator's CRDs and the cleanup finalizer's admission policy on the hub
    (as the chart does) and wait until the CRDs are established."""
    ext = k8s.ApiextensionsV1Api(hub)
    for obj in cleanup_finalizer_policy():
        group, version = obj["apiVersion"].split("/")
        k8s.CustomObjectsApi(hub).create_cluster_custom_object(
            group, version, PLURALS[obj["kind"]], obj
        )
    for crd in crds():
        ext.create_custom_resource_definition(crd)  # type: ignore[arg-type]
    for crd in crds():
        _wait(
            lambda name=crd["metadata"]["name"]: any(
                c.type == "Established" and c.status == "True"
                for c in getattr(
                    ext.read_custom_resource_definition(name).status, "conditions", None
                )
                or []
            ),
            "CRDs established",
        )


def _setup(state: local.FleetState, hub: Any) -> None:
    _setup_crds(hub)
    for member in state.members:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "propagator.cli.main",
                "fleet",
                "join",
                member.name,
                "--kubeconfig",
                str(member.kubeconfig),
                "--hub-kubeconfig",
                str(state.hub.kubeconfig),
                "--fleet",
                "bench",
                "--region",
                REGIONS.get(member.name, "local"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode:
            raise SystemExit(f"bench.propagation: join {member.name}: {result.stderr}")
    core = k8s.CoreV1Api(hub)
    for namespace in ("latency", "bare", "steady", "draining"):
        core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
    for member in state.members:  # the bare loop writes into it before the controller
        with local_cluster.api_client(member) as api:
            k8s.CoreV1Api(api).create_namespace({"metadata": {"name": "latency"}})  # type: ignore[arg-type]


def _nothing_left(members: list[Any]) -> bool:
    """Nothing of an earlier run left on the members: no ReplicaSet or Pod in the latency
    namespace (what a Deployment's deletion leaves the members' garbage collector)."""
    for member in members:
        if k8s.AppsV1Api(member).list_namespaced_replica_set("latency").items:
            return False
        if k8s.CoreV1Api(member).list_namespaced_pod("latency").items:
            return False
    return True


class ApplicationWatch:
    """A watch of the applications in one namespace, in a thread of its own: when each
    was first seen ``Applied``, 3/3 ready, and gone. The hub pushes every status write to
    it; polling instead (a GET every 10 ms) added half its period and loaded the hub the
    controller writes to, on the same two cores (in 40 runs, the hub's API server used
    6.9 s of CPU polled, 4.6 s watched; etcd 1.4 s against 0.8 s)."""

    def __init__(self, hub: Any, namespace: str) -> None:
        self.api = k8s.CustomObjectsApi(hub)
        self.namespace = namespace
        self.seen: dict[tuple[str, str], float] = {}
        """(application, "Applied" / "Available" / "gone") -> time.perf_counter()."""
        self.changed = threading.Condition()
        self.error: Exception | None = None
        self.stopped = False
        self.watch = k8s_watch.Watch()  # type: ignore[no-untyped-call]
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            stream = self.watch.stream(  # type: ignore[no-untyped-call]
                self.api.list_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL
            )
            for event in stream:
                self._record(time.perf_counter(), event)
        except Exception as exc:  # the hub went away: fatal unless we are done with it
            with self.changed:
                self.error = None if self.stopped else exc
                self.changed.notify_all()

    def _record(self, now: float, event: dict[str, Any]) -> None:
        app = event["object"]
        marks = []
        if event["type"] == "DELETED":
            marks.append("gone")
        elif _condition(app, "Applied") == "True":
            marks.append("Applied")
            if (app.get("status") or {}).get("ready") == "3/3":
                marks.append("Available")
        with self.changed:
            for mark in marks:
                self.seen.setdefault((app["metadata"]["name"], mark), now)
            self.changed.notify_all()

    def wait(self, name: str, mark: str, limit_s: float = 600) -> float:
        """When ``name`` was first seen ``mark`` (waits for it)."""
        with self.changed:
            self.changed.wait_for(
                lambda: (name, mark) in self.seen or self.error is not None, limit_s
            )
            if (name, mark) not in self.seen:
                why = f": the watch failed: {self.error}" if self.error else ""
                raise SystemExit(f"bench.propagation: gave up waiting for {name} {mark}{why}")
            return self.seen[name, mark]

    def stop(self) -> None:
        self.stopped = True
        self.watch.stop()  # type: ignore[no-untyped-call]


def time_to_applied(
    hub: Any,
    members: list[Any],
    runs: int,
    wait_for_rest: Callable[[], bool],
    namespace: str = "latency",
    who: str = "controller",
) -> dict[str, dict[str, list[float]]]:
    """Create → Applied and → Available (the controller's runs only), ``runs`` times each
    way: back to back (each created once the previous one is gone from the hub, its members
    still collecting its ReplicaSet and Pods) and settled (once the members hold nothing of
    it either and ``wait_for_rest`` says the machine has finished with it). The
    applications are in hub namespace ``namespace``, their objects in the members'
    ``latency``; ``who`` propagates them. Returns the samples (seconds) by way and by
    mark."""
    api = k8s.CustomObjectsApi(hub)
    watch = ApplicationWatch(hub, namespace)
    time.sleep(1)  # its request on the way: a first create before would be timed late
    marks = ("Applied", "Available") if who == "controller" else ("Applied",)
    samples: dict[str, dict[str, list[float]]] = {}
    restless = 0
    for settled in (False, True):
        how = samples["members settled" if settled else "back to back"] = {m: [] for m in marks}
        for i in range(runs):
            name = f"{who}-{i}" + ("-settled" if settled else "")
            if settled:
                _wait(lambda: _nothing_left(members), "the members to settle", every_s=0.05)
                restless += not wait_for_rest()
            app = application(
                name,
                namespace,
                [
                    deployment(name, "latency", "bench:1", replicas=1),
                    config_map(name, "latency", owner=name),
                ],
                "bench",
            )
            start = time.perf_counter()
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
            for mark in marks:
                how[mark].append(watch.wait(name, mark) - start)
            api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            watch.wait(name, "gone")
    watch.stop()
    if restless:  # those runs are not settled: say so beside the figures
        print(f"bench.propagation: {who}: {restless} settled runs began on a busy machine")
    return samples


def _bare_runs(
    state: local.FleetState, hub: Any, members: list[Any], runs: int
) -> dict[str, dict[str, list[float]]]:
    """:func:`time_to_applied` with ``bench.bareapplied`` in the controller's place."""
    bare = subprocess.Popen(
        [sys.executable, "-m", "bench.bareapplied", str(state.hub.kubeconfig), "bare"]
        + [str(m.kubeconfig) for m in state.members],
        stdout=subprocess.PIPE,
    )
    try:
        assert bare.stdout is not None
        if bare.stdout.readline() != b"watching\n":  # it failed: its error is printed
            raise SystemExit("bench.propagation: the bare loop did not start")
        own_cpu_s = functools.partial(process.cpu_seconds_of, bare.pid)
        return time_to_applied(hub, members, runs, _rest_waiter(state, own_cpu_s), "bare", "bare")
    finally:
        bare.terminate()
        bare.wait(timeout=60)


def _joined(
    *samples: dict[str, dict[str, list[float]]],
) -> dict[str, dict[str, list[float]]]:
    """Samples of several calls of :func:`time_to_applied`, by way and by mark."""
    joined: dict[str, dict[str, list[float]]] = {}
    for by_way in samples:
        for way, by_mark in by_way.items():
            for mark, values in by_mark.items():
                joined.setdefault(way, {}).setdefault(mark, []).extend(values)
    return joined


def latency_rows(
    controller: dict[str, dict[str, list[float]]], bare: dict[str, dict[str, list[float]]]
) -> list[dict[str, Any]]:
    """The controller's create → Applied / Available beside the bare loop's create →
    Applied in the same run, and the ratio of their p50s and p99s."""
    rows: list[dict[str, Any]] = []
    for how, marks in controller.items():
        runs = len(marks["Applied"])
        for who, mark, samples in (
            ("controller", "Applied", marks["Applied"]),
            ("bare loop", "Applied", bare[how]["Applied"]),
            ("controller", "Available 3/3", marks["Available"]),
        ):
            rows.append(
                {
                    "measure": f"create -> {mark} on 3 members, {who} ({runs} runs, {how})",
                    "p50_ms": percentile(samples, 50) * 1000,
                    "p99_ms": percentile(samples, 99) * 1000,
                    "max_ms": max(samples) * 1000,
                }
            )
        ours, limit = rows[-3], rows[-2]
        rows.append(
            {
                "measure": f"  Applied: controller / bare loop ({how})",
                "p50_ms": ours["p50_ms"] / limit["p50_ms"],
                "p99_ms": ours["p99_ms"] / limit["p99_ms"],
            }
        )
    return rows


def _all_applied(api: Any, count: int) -> bool:
    items = api.list_namespaced_custom_object(GROUP, VERSION, "steady", PLURAL)["items"]
    done = sum(_condition(a, "Applied") == "True" for a in items)
    return len(items) == count and done == count


def _wave(
    controller: Controller,
    count: int,
    trigger: Any,
    since_start: float | None = None,
    every_s: float = 0.05,
) -> dict[str, Any]:
    """Run ``trigger`` and wait until ``count`` more reconciles succeeded and every queue
    is empty (applications, member syncs, syncs in flight); returns rate, member writes,
    CPU and RSS. ``since_start``: a controller just started at that time, counted from
    zero; ``every_s``: how often its metrics are read (each read costs it the
    encoding of every series)."""
    success = 'propagator_reconciles_total{result="success"}'
    fresh = since_start is not None
    before_ok = 0.0 if fresh else controller.metric(success)
    before_writes = 0.0 if fresh else controller.metric("propagator_member_writes_total")
    cpu0 = 0.0 if fresh else controller.cpu_s()
    start = since_start if since_start is not None else time.perf_counter()
    trigger()
    _wait(
        lambda: (
            controller.metric(success) >= before_ok + count
            and controller.metric("propagator_workqueue_depth") == 0
            and controller.metric("propagator_member_sync_queue_depth") == 0
            and controller.metric("propagator_propagation_operations_in_flight") == 0
        ),
        "the wave of reconciles",
        every_s=every_s,
    )
    wall = time.perf_counter() - start
    return {
        "reconciles_per_s": count / wall,
        "wall_s": wall,
        "member_writes": controller.metric("propagator_member_writes_total") - before_writes,
        "cpu_pct": (controller.cpu_s() - cpu0) / wall * 100,
        "rss_mib": controller.rss_mib(),
    }


AUTOSCALED_EVERY = 10
"""One application in this many also has a Deployment (at 0 replicas: no pods) and a
HorizontalPodAutoscaler of it, whose replicas are left to the autoscaler."""


def _create_apps(api: Any, namespace: str, count: int) -> None:
    """``count`` applications of a ConfigMap and a Service each in ``namespace`` (one in
    :data:`AUTOSCALED_EVERY` with an autoscaled Deployment too), 8 writes at a time."""

    def create(i: int) -> None:
        name = f"app-{i:04d}"
        manifests = [config_map(name, namespace, owner=name), service(name, namespace)]
        if i % AUTOSCALED_EVERY == 0:
            manifests += [
                deployment(name, namespace, "bench:1", replicas=0),
                autoscaler(name, namespace, 1, 3),
            ]
        api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, application(name, namespace, manifests, "bench")
        )

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


CHURN_S = 30.0
"""How long pods come and go on a member in :func:`pod_churn`."""


def pod_churn(member: Any, controller: Controller, count: int) -> dict[str, Any]:
    """Pods of someone else's coming and going on one member for :data:`CHURN_S` while the
    ``count`` applications rest (a Deployment there scaled between 0 and 3 replicas every
    2 s): the plans made, the MemberCluster status writes and the controller's CPU."""
    apps = k8s.AppsV1Api(member)
    apps.create_namespaced_deployment("default", deployment("churn", "default", "nginx:1.27", 0))  # type: ignore[arg-type]
    plans = 'propagator_propagation_duration_seconds_count{operation="reconcile"'
    writes = 'propagator_status_writes_total{kind="MemberCluster status"}'
    plans0, writes0, cpu0 = controller.metric(plans), controller.metric(writes), controller.cpu_s()
    member_writes0 = controller.metric("propagator_member_writes_total")
    start = time.perf_counter()
    replicas = 0
    while time.perf_counter() - start < CHURN_S:
        replicas = 3 - replicas
        apps.patch_namespaced_deployment_scale("churn", "default", {"spec": {"replicas": replicas}})
        time.sleep(2)
    wall = time.perf_counter() - start
    apps.delete_namespaced_deployment("churn", "default")
    made = controller.metric(plans) - plans0
    return {
        "wave": f"pods of others coming and going on a member, {count} apps at rest",
        "wall_s": wall,
        "reconciles_per_s": made / wall,
        "member_writes": controller.metric("propagator_member_writes_total") - member_writes0,
        "cluster_status_writes": controller.metric(writes) - writes0,
        "cpu_pct": (controller.cpu_s() - cpu0) / wall * 100,
        "rss_mib": controller.rss_mib(),
    }


def replan_everything(hub: Any) -> None:
    """Make the controller plan every application again: a TenantQuota created (its
    namespaces none of theirs: nothing changes for them)."""
    k8s.CustomObjectsApi(hub).create_cluster_custom_object(
        GROUP,
        VERSION,
        "tenantquotas",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TenantQuota",
            "metadata": {"name": "trigger"},
            "spec": {"namespaces": ["elsewhere"], "hard": {"pods": 10}},
        },
    )


def steady_state(
    hub: Any, members: list[Any], controller: Controller, count: int
) -> list[dict[str, Any]]:
    api = k8s.CustomObjectsApi(hub)
    writes_before = controller.metric("propagator_member_writes_total")
    start = time.perf_counter()
    _create_apps(api, "steady", count)
    _wait(lambda: _all_applied(api, count), f"{count} applications applied", every_s=1)
    initial = time.perf_counter() - start
    rows = [
        {
            "wave": f"initial: {count} apps created and applied on 3 members",
            "wall_s": initial,
            "reconciles_per_s": count / initial,
            "member_writes": controller.metric("propagator_member_writes_total") - writes_before,
            "cpu_pct": float("nan"),
            "rss_mib": controller.rss_mib(),
        }
    ]
    time.sleep(5)  # let the last status writes come back through the watch
    known = _wave(controller, count, lambda: replan_everything(hub))
    rows.append({"wave": "nothing to change, known applied", **known})
    rows.append(pod_churn(members[0], controller, count))
    controller.stop()
    restarted = time.perf_counter()
    controller.start()  # counters and CPU time start at 0: the wave counts from here
    rows.append(
        {
            "wave": "nothing to change, read back after a restart",
            **_wave(controller, count, lambda: None, since_start=restarted),
        }
    )
    return rows


def shutdown_under_load(hub: Any, controller: Controller, count: int = 50) -> dict[str, Any]:
    """SIGTERM while ``count`` new applications reconcile; then restart and wait for them."""
    api = k8s.CustomObjectsApi(hub)
    success = 'propagator_reconciles_total{result="success"}'
    before = controller.metric(success)
    _create_apps(api, "draining", count)
    _wait(lambda: controller.metric(success) > before, "the first reconcile", every_s=0.005)
    exit_s, code = controller.stop()
    restarted = time.perf_counter()
    controller.start()

    def all_applied() -> bool:
        listing: Any = api.list_namespaced_custom_object(GROUP, VERSION, "draining", PLURAL)
        return sum(_condition(a, "Applied") == "True" for a in listing["items"]) == count

    _wait(all_applied, f"{count} applications applied after the restart", every_s=0.1)
    return {
        "measure": f"SIGTERM with {count} applications reconciling",
        "exit_s": exit_s,
        "exit_code": code,
        "all_applied_after_restart_s": time.perf_counter() - restarted,
    }


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--runs", type=int, default=20)
        parser.add_argument("--apps", type=int, default=1000)

    args = arguments(__doc__, "5 runs, 100 applications", more)
    runs, apps = (5, 100) if args.quick else (args.runs, args.apps)
    with tempfile.TemporaryDirectory(prefix="bench-propagation-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        members = [local_cluster.api_client(m) for m in state.members]
        controller = Controller(state.hub.kubeconfig, Path(tmp) / "controller.log")
        try:
            _setup(state, hub)
            before = _bare_runs(state, hub, members, runs // 2)
            controller.start()
            ours = time_to_applied(hub, members, runs, _rest_waiter(state, controller.cpu_s))
            controller.stop()  # it would propagate the bare loop's applications too
            after = _bare_runs(state, hub, members, runs - runs // 2)
            latency = latency_rows(ours, _joined(before, after))
            controller.start()
            steady = steady_state(hub, members, controller, apps)
            draining = shutdown_under_load(hub, controller)
        finally:
            if controller.proc is not None:
                controller.stop()
            for client in [hub, *members]:
                client.close()
            local.down(state)
    emit(
        latency,
        [("measure", "measure"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms")],
        args.json,
    )
    print()
    emit(
        steady,
        [
            ("wave", "wave"),
            ("wall_s", "wall s"),
            ("reconciles_per_s", "reconciles/s"),
            ("member_writes", "member writes"),
            ("cluster_status_writes", "MemberCluster status writes"),
            ("cpu_pct", "controller CPU %"),
            ("rss_mib", "controller RSS MiB"),
        ],
        args.json,
    )
    print()
    emit(
        [draining],
        [
            ("measure", "measure"),
            ("exit_s", "SIGTERM to exit s"),
            ("exit_code", "exit code"),
            ("all_applied_after_restart_s", "all Applied after restart s"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
