"""``bench.scale --pull``: the controller with N Pull members far away, their agents
simulated in one process (``bench.pullagents``), served by three real members.

A local hub and three members start; N Pull members are joined as ``propagator fleet
join --mode Pull`` joins them (each its hub namespace, ServiceAccount, Role, ClusterRole,
Lease and a bootstrap token), and their agents run as tasks of one process, each the real
agent with its own hub identity and its own connection to the hub through its own loopback
proxy adding a fixed latency (the hub is far from the members now; each agent is beside
its member), and to its member (i % 3), used only in its own namespace. ``propagator run``
runs as a child process and holds no connection to any member. For each N it prints:

- the time from the controller's start until all N members are Ready (from their
  heartbeats) and described (from their agents' reports);
- at rest, 60 s: the hub's API requests per second (its own counter), the controller's
  CPU and RSS, the agents' process's CPU and RSS and per agent;
- one application of 10 ConfigMaps on all N (an override puts each cluster's objects in
  its ``bench-<name>`` namespace): create → Applied, the Work writes it took, the hub's
  API requests meanwhile and per second; beside it the servers' limit — the same writes by
  a bare loop straight to the members at the same concurrency, in the same run — and the
  Push figure for the same N recorded by ``bench.scale --limited`` on this machine (its
  date and commit);
- the CPU seconds each part used during the bare loops and the rollout (members, hub,
  the bare loop or the controller, the agents' process, the latency proxies) and the
  cores they kept busy: what the rollout's time is spent on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import yaml
from kubernetes import client as k8s

from bench.cpu import CPU_COLUMNS, cpu_by_part, cpu_row
from bench.latency_proxy import LatencyProxy
from bench.propagation import Controller, _setup_crds
from bench.report import RESULTS
from bench.scale import (
    APP_NAMESPACE_PREFIX,
    CONCURRENCY,
    NAMESPACE,
    _application,
    _far_name,
    _make_app_namespaces,
    _make_far_fleet,
    _ready_and_described,
    _servers_limit,
)
from fleet import local
from fleet.local import cluster as local_cluster
from fleet.local import process
from fleet.pulljoin import plan_pull_join, pull_join
from kube.hub import hub_connection

AT_REST_S = 60.0
JOINS_AT_ONCE = 16


def _join_all(state: local.FleetState, count: int) -> list[str]:
    """N Pull members joined (label bench=far); their bootstrap tokens."""

    async def join() -> list[str]:
        hub = hub_connection(state.hub.kubeconfig)
        tokens = [""] * count
        limiter = anyio.CapacityLimiter(JOINS_AT_ONCE)

        async def one(i: int) -> None:
            async with limiter:
                plan = plan_pull_join(
                    _far_name(i), layer="edge", region="far", labels={"bench": "far"}
                )
                tokens[i] = await pull_join(hub, plan)

        try:
            async with anyio.create_task_group() as tg:
                for i in range(count):
                    tg.start_soon(one, i)
        finally:
            await hub.close()
        return tokens

    return anyio.run(join)


def _hub_requests(state: local.FleetState) -> float:
    return local_cluster.counted(local_cluster.metrics(state.hub), "apiserver_request_total")


def _cpu(agents: subprocess.Popen[bytes]) -> float:
    return process.cpu_seconds_of(agents.pid)


def _pushed(count: int) -> dict[str, Any] | None:
    """The Push figure ``bench.scale --limited`` recorded for ``count`` clusters."""
    path = RESULTS / "scale-clusters-1000-limited.json"
    if not path.exists():
        return None
    recorded = json.loads(path.read_text())
    for row in recorded["tables"][0]["rows"]:
        if row.get("clusters") == count:
            return {**row, "date": recorded["date"], "commit": recorded["commit"]}
    return None


def run_size(count: int, latency_s: float, tmp: Path) -> dict[str, Any]:
    """One fleet size's figures (see the module)."""
    state = anyio.run(
        local.up,
        tmp / f"pull{count}",
        local.testbin_dir(),
        local.FleetOptions(members=3, nodes_per_cluster=1),
    )
    hub = local_cluster.api_client(state.hub)
    controller: Controller | None = None
    agents: subprocess.Popen[bytes] | None = None
    proxies: list[LatencyProxy] = []
    try:
        _setup_crds(hub)
        for namespace in (NAMESPACE, "scale"):
            k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        tokens = _join_all(state, count)
        _make_app_namespaces(state, count)
        _make_far_fleet(hub)
        hub_config = yaml.safe_load(state.hub.kubeconfig.read_text())
        ca = hub_config["clusters"][0]["cluster"]["certificate-authority-data"]
        spec = []
        for i, token in enumerate(tokens):
            proxy = LatencyProxy(("127.0.0.1", state.hub.api_port), latency_s)
            proxies.append(proxy)
            name = _far_name(i)
            spec.append(
                {
                    "cluster": name,
                    "server": f"https://127.0.0.1:{proxy.port}",
                    "ca": ca,
                    "token": token,
                    "member_kubeconfig": str(state.members[i % 3].kubeconfig),
                    "namespace": APP_NAMESPACE_PREFIX + name,
                    "state_dir": str(tmp / f"pull{count}" / "agents" / name),
                }
            )
        spec_file = tmp / f"agents-{count}.json"
        spec_file.write_text(json.dumps(spec))
        alone = _servers_limit(state, count, "bare loop, members alone", limited=True)
        controller = Controller(state.hub.kubeconfig, tmp / f"controller-pull-{count}.log")
        controller.env.update(
            {
                "PROPAGATOR_MAX_CONCURRENCY": str(CONCURRENCY),
                "PROPAGATOR_NAMESPACE": NAMESPACE,
                "PROPAGATOR_PLATFORM_NAMESPACES": f"{NAMESPACE},scale",
            }
        )
        started = time.perf_counter()
        controller.start()
        with (tmp / f"agents-{count}.log").open("ab") as out:
            agents = subprocess.Popen(
                [sys.executable, "-m", "bench.pullagents", str(spec_file)],
                stdout=subprocess.PIPE,
                stderr=out,
            )
        assert agents.stdout is not None
        if agents.stdout.readline() != b"started\n":
            raise SystemExit("bench.scale --pull: the agents did not start")
        ready_s, described_s = _ready_and_described(hub, count, started)
        requests = _hub_requests(state)
        cpu = (controller.cpu_s(), _cpu(agents))
        time.sleep(AT_REST_S)
        rest = {
            "rest_hub_rps": (_hub_requests(state) - requests) / AT_REST_S,
            "controller_cpu_pct": (controller.cpu_s() - cpu[0]) / AT_REST_S * 100,
            "controller_rss_mib": controller.rss_mib(),
            "agents_cpu_pct": (_cpu(agents) - cpu[1]) / AT_REST_S * 100,
            "agents_rss_mib": process.rss_bytes_of(agents.pid) / 2**20,
        }
        requests = _hub_requests(state)
        work_writes = controller.metric("propagator_work_writes_total")
        before = {**cpu_by_part(state, controller.cpu_s), "agents": _cpu(agents)}
        applied_s = _application(hub, count)
        after = {**cpu_by_part(state, controller.cpu_s), "agents": _cpu(agents)}
        rollout_requests = _hub_requests(state) - requests
        servers = _servers_limit(state, count, "bare loop, after the rollout", limited=True)
        push = _pushed(count)
        return {
            "clusters": count,
            "all_ready_s": ready_s,
            "all_described_s": described_s,
            **rest,
            "agent_rss_kib": rest["agents_rss_mib"] * 1024 / count,
            "applied_s": applied_s,
            "work_writes": controller.metric("propagator_work_writes_total") - work_writes,
            "rollout_hub_requests": rollout_requests,
            "rollout_hub_rps": rollout_requests / applied_s,
            "servers_s": min(alone["wall_s"], servers["wall_s"]),
            "ratio": applied_s / min(alone["wall_s"], servers["wall_s"]),
            "push_applied_s": push["applied_s"] if push else None,
            "push_recorded": f"{push['date']} {push['commit']}" if push else "not recorded",
            "cpu": [
                {**alone, "agents_cpu_s": 0.0},
                cpu_row(before, after, applied_s, clusters=count, phase="rollout"),
                {**servers, "agents_cpu_s": 0.0},
            ],
        }
    finally:
        if agents is not None:
            agents.terminate()
            agents.wait(timeout=120)
        if controller is not None and controller.proc is not None:
            controller.stop()
        for proxy in proxies:
            proxy.close()
        hub.close()
        local.down(state)


CPU = [
    ("clusters", "clusters"),
    ("phase", "phase"),
    *CPU_COLUMNS[:3],
    ("own_cpu_s", "own (bare loop or controller)"),
    ("agents_cpu_s", "agents"),
    *CPU_COLUMNS[4:],
]
"""CPU seconds by part (bench.cpu's, and the agents' process)."""

COLUMNS = [
    ("clusters", "Pull clusters"),
    ("all_ready_s", "all Ready s"),
    ("all_described_s", "all described s"),
    ("rest_hub_rps", "hub requests/s at rest"),
    ("controller_cpu_pct", "controller CPU % at rest"),
    ("controller_rss_mib", "controller RSS MiB"),
    ("agents_cpu_pct", "agents CPU % at rest"),
    ("agent_rss_kib", "RSS per agent KiB"),
    ("applied_s", "app Applied s"),
    ("work_writes", "Work writes"),
    ("rollout_hub_rps", "hub requests/s in rollout"),
    ("servers_s", "servers limit s"),
    ("ratio", "ratio to it"),
    ("push_applied_s", "Push app Applied s"),
    ("push_recorded", "Push recorded"),
]
