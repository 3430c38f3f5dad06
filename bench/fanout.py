"""Fan-out efficiency: one application of 10 objects to 100 member clusters far away.

The 100 clusters are served by the local members (real API servers started here) through
latency-injecting loopback proxies (50 ms per request by default). The fan-out is the
controller's own: ``fan_out`` (per-application and controller-wide limits, retries,
circuit breakers) calling ``apply_objects`` (namespace check, read back, server-side apply)
then ``prune`` on each cluster, as a reconcile does. Each cluster gets its own namespace,
so every run really writes; the far clusters that share a member each
prune only their own objects.

For max concurrency 1, 10 and 50 it prints the wall time; the ideal time the issue
defines, ceil(clusters / concurrency) x objects x latency; the ideal for the requests
really made per cluster, ceil(clusters / concurrency) x requests x latency; the ratios
to both; and the speed-up over concurrency 1 measured in the same run.

    python -m bench.fanout [--quick] [--json] [--clusters N] [--latency-ms MS]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio

from bench.latency_proxy import LatencyProxy
from bench.report import arguments, emit
from fleet import local
from fleet.circuit import CircuitBreaker
from fleet.connection import ConnectionOptions, KubeConnection
from fleet.kubeconfig import load_kubeconfig
from propagator.propagation.apply import apply_objects
from propagator.propagation.fanout import RetryPolicy, fan_out
from propagator.propagation.prune import prune

OBJECTS = 10


class CountingConnection(KubeConnection):
    """A member connection that counts its requests."""

    requests = 0
    _lock = threading.Lock()

    def request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        with CountingConnection._lock:
            CountingConnection.requests += 1
        return super().request(*args, **kwargs)


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
    state: local.FleetState, clusters: int, latency_s: float
) -> tuple[dict[str, KubeConnection], list[LatencyProxy]]:
    members = [
        load_kubeconfig(m.kubeconfig.read_text(), source=m.name).credentials for m in state.members
    ]
    conns: dict[str, KubeConnection] = {}
    proxies: list[LatencyProxy] = []
    for i in range(clusters):
        creds = members[i % len(members)]
        url = urlparse(creds.server)
        proxy = LatencyProxy((url.hostname or "127.0.0.1", url.port or 443), latency_s)
        proxies.append(proxy)
        name = f"far-{i:03d}"
        conns[name] = CountingConnection(
            name,
            dataclasses.replace(creds, server=f"https://{url.hostname}:{proxy.port}"),
            ConnectionOptions(read_timeout_s=60),
        )
    return conns, proxies


def measure(
    conns: dict[str, KubeConnection], concurrency: int, run: str, latency_s: float
) -> dict[str, Any]:
    for conn in conns.values():
        conn.version()  # TLS handshakes and discovery outside the timing
        conn.discovery.kinds()
    targets = {name: _objects(f"bench-{run}-{name}") for name in conns}

    def sync(cluster: str, objects: Any) -> None:
        # Several far clusters share one real member: an application name of their own
        # keeps each one's pruning to its own objects, as on separate API servers.
        conn, app = conns[cluster], f"{run}-{cluster}"
        apply_objects(conn, objects, app_namespace="bench", app_name=app)
        prune(conn, set(), objects, "bench", app)

    breakers = {n: CircuitBreaker(n) for n in conns}
    retries: list[str] = []
    CountingConnection.requests = 0
    start = time.perf_counter()
    results = anyio.run(
        lambda: fan_out(
            targets,
            sync,
            per_app_limit=concurrency,
            global_limiter=anyio.CapacityLimiter(concurrency),
            retry=RetryPolicy(),
            breaker_for=breakers.__getitem__,
            timeout_s=300,
            on_retry=lambda c: retries.append(c),
        )
    )
    wall = time.perf_counter() - start
    failed = [r for r in results if not r.applied]
    if failed:
        raise SystemExit(f"bench.fanout: {len(failed)} clusters failed, e.g. {failed[0]}")
    per_cluster = CountingConnection.requests / len(conns)
    waves = math.ceil(len(conns) / concurrency)
    ideal = waves * OBJECTS * latency_s
    ideal_requests = waves * per_cluster * latency_s
    return {
        "concurrency": concurrency,
        "clusters": len(conns),
        "wall_s": wall,
        "requests_per_cluster": per_cluster,
        "ideal_s": ideal,
        "ratio": wall / ideal,
        "ideal_requests_s": ideal_requests,
        "ratio_requests": wall / ideal_requests,
        "retries": len(retries),
    }


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--clusters", type=int, default=100)
        parser.add_argument("--latency-ms", type=float, default=50.0)

    args = arguments(__doc__, "20 clusters (under a minute)", more)
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
            rows = []
            for concurrency in (1, 10, 50):
                rows.append(measure(conns, concurrency, f"c{concurrency}", latency_s))
                rows[-1]["speedup"] = rows[0]["wall_s"] / rows[-1]["wall_s"]
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
            ("ideal_s", "ideal s (objects)"),
            ("ratio", "ratio"),
            ("requests_per_cluster", "requests/cluster"),
            ("ideal_requests_s", "ideal s (requests)"),
            ("ratio_requests", "ratio"),
            ("speedup", "speed-up vs 1"),
            ("retries", "retries"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
