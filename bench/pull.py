"""Pull members against Push members on real clusters: a local hub and three members,
each member joined twice — as ``push-N`` (the hub writes to it with its kubeconfig) and as
``pull-N`` (its agent, ``propagator agent`` as a process of its own, takes Works from the
hub) — into the fleets ``push`` and ``pull``; ``propagator run`` as a child process.

1. Create → ``Applied`` on three members (a Deployment of one replica and a ConfigMap),
   Push and Pull in turns over the same runs (p50, p99), and the ratio of Pull to Push: a
   Pull member's write goes hub → Work → the agent's watch → the member, and its
   outcome back member → the agent → the Work's status → the controller's watch, where a
   Push member's is one round trip. Each run's application is in a namespace of its mode
   on the members (the two MemberClusters of one member write apart).
2. The agents at rest with those applications gone: CPU (% of a core) and RSS of each,
   over 30 s; and the controller's, beside them.

    python -m bench.pull [--quick] [--json] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s

from bench.propagation import ApplicationWatch, Controller, _setup_crds, _wait
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from fleet.local import process
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, config_map, deployment

MODES = ("push", "pull")


def _cli(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "propagator.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise SystemExit(f"bench.pull: propagator {' '.join(args[:3])}: {result.stderr}")
    return result.stdout


def _join(state: local.FleetState, work: Path) -> list[Path]:
    """Each member as push-N and pull-N; the pull agents' hub kubeconfigs."""
    hub = str(state.hub.kubeconfig)
    agents = []
    for i, member in enumerate(state.members, 1):
        _cli("fleet", "join", f"push-{i}", "--kubeconfig", str(member.kubeconfig),
             "--fleet", "push", "--hub-kubeconfig", hub)  # fmt: skip
        out = work / f"pull-{i}-hub.kubeconfig"
        _cli("fleet", "join", f"pull-{i}", "--mode", "Pull", "--fleet", "pull",
             "--agent-kubeconfig", str(out), "--hub-kubeconfig", hub)  # fmt: skip
        agents.append(out)
    return agents


def _agents(state: local.FleetState, configs: list[Path], work: Path) -> list[Any]:
    procs = []
    for i, (member, config) in enumerate(zip(state.members, configs, strict=True), 1):
        env = {
            **os.environ,
            "PROPAGATOR_AGENT_CLUSTER": f"pull-{i}",
            "PROPAGATOR_AGENT_HUB_KUBECONFIG": str(config),
            "PROPAGATOR_AGENT_MEMBER_KUBECONFIG": str(member.kubeconfig),
            "PROPAGATOR_AGENT_STATE_DIR": str(work / f"state-{i}"),
            "PROPAGATOR_METRICS_PORT": "0",
            "PROPAGATOR_HEALTH_PORT": "0",
        }
        with (work / f"agent-{i}.log").open("ab") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "propagator.cli.main", "agent"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
    return procs


def _ready(hub: Any) -> bool:
    listed: Any = k8s.CustomObjectsApi(hub).list_cluster_custom_object(
        GROUP, VERSION, "memberclusters"
    )
    members = listed["items"]
    ready = [
        m
        for m in members
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (m.get("status") or {}).get("conditions") or []
        )
        and (m.get("status") or {}).get("apiEnablements")
    ]
    return len(ready) == 6


def time_to_applied(hub: Any, runs: int) -> dict[str, list[float]]:
    """Create → Applied on three members, Push and Pull in turns, ``runs`` times each."""
    api = k8s.CustomObjectsApi(hub)
    watches = {mode: ApplicationWatch(hub, mode) for mode in MODES}
    time.sleep(1)
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for i in range(runs):
        for mode in MODES if i % 2 == 0 else reversed(MODES):
            name = f"{mode}-{i}"
            app = application(
                name,
                mode,
                [deployment(name, mode, "bench:1", replicas=1), config_map(name, mode, x="1")],
                mode,
            )
            start = time.perf_counter()
            api.create_namespaced_custom_object(GROUP, VERSION, mode, PLURAL, app)
            samples[mode].append(watches[mode].wait(name, "Applied") - start)
            api.delete_namespaced_custom_object(GROUP, VERSION, mode, PLURAL, name)
            watches[mode].wait(name, "gone")
    for watch in watches.values():
        watch.stop()
    return samples


def at_rest(agents: list[Any], controller: Controller, seconds: float) -> list[dict[str, Any]]:
    """CPU and RSS of each agent and of the controller over ``seconds``."""
    pids = {f"agent pull-{i}": p.pid for i, p in enumerate(agents, 1)}
    assert controller.proc is not None
    pids["controller"] = controller.proc.pid
    before = {who: process.cpu_seconds_of(pid) for who, pid in pids.items()}
    time.sleep(seconds)
    return [
        {
            "process": who,
            "cpu_pct": (process.cpu_seconds_of(pid) - before[who]) / seconds * 100,
            "rss_mib": process.rss_bytes_of(pid) / 2**20,
        }
        for who, pid in pids.items()
    ]


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--runs", type=int, default=20)

    args = arguments(__doc__, "5 runs, 10 s at rest", more)
    runs, rest_s = (5, 10.0) if args.quick else (args.runs, 30.0)
    with tempfile.TemporaryDirectory(prefix="bench-pull-") as tmp:
        work = Path(tmp)
        state = anyio.run(local.up, work, local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        controller = Controller(state.hub.kubeconfig, work / "controller.log")
        agents: list[Any] = []
        try:
            _setup_crds(hub)
            configs = _join(state, work)
            for mode in MODES:
                k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": mode}})  # type: ignore[arg-type]
            controller.start()
            agents = _agents(state, configs, work)
            _wait(lambda: _ready(hub), "six members Ready and described", limit_s=300)
            samples = time_to_applied(hub, runs)
            rest = at_rest(agents, controller, rest_s)
        finally:
            for agent in agents:
                agent.terminate()
                agent.wait(timeout=60)
            if controller.proc is not None:
                controller.stop()
            hub.close()
            local.down(state)
    rows: list[dict[str, Any]] = [
        {
            "measure": f"create -> Applied on 3 members, {mode} ({runs} runs)",
            "p50_ms": percentile(values, 50) * 1000,
            "p99_ms": percentile(values, 99) * 1000,
            "max_ms": max(values) * 1000,
        }
        for mode, values in samples.items()
    ]
    push, pull = (rows[MODES.index(m)] for m in ("push", "pull"))
    rows.append(
        {
            "measure": "  Applied: pull / push",
            "p50_ms": pull["p50_ms"] / push["p50_ms"],
            "p99_ms": pull["p99_ms"] / push["p99_ms"],
        }
    )
    emit(
        rows,
        [("measure", "measure"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("max_ms", "max ms")],
        args.json,
    )
    print()
    emit(
        rest,
        [
            ("process", f"at rest, {rest_s:g} s"),
            ("cpu_pct", "CPU % of a core"),
            ("rss_mib", "RSS MiB"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
