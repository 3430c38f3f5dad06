"""The controller's overhead per canary step on real clusters: a local hub and three
members, ``propagator run`` as a child process, an application of 10 replicas on all
three (every member a canary cluster) with ten steps (weight 10, 20, ... 100, no pause).
For each step, the time from the step passed (the canary copy at that weight Ready on
every member: its replicas ready, its status current) to the next weight applied on
every member (the canary copy asking for the next count). What the members' own
controllers take (pods starting) is outside the figure: it is the controller's
reaction — status refresh, plan, render, member syncs. The members are polled every 10 ms
(the figure's resolution).

    python -m bench.canary [--quick] [--json]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s

from bench.propagation import Controller, _setup, _wait
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from propagator.canary.split import split
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, deployment

REPLICAS = 10


def _phase(api: Any, namespace: str) -> str | None:
    found: Any = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    return ((found.get("status") or {}).get("canary") or {}).get("phase")


WEIGHTS = list(range(10, 101, 10))


def _canary_copy(member: Any, namespace: str) -> tuple[int, int] | None:
    """(replicas asked, replicas ready and current) of the member's canary copy."""
    apps: Any = k8s.AppsV1Api(member)
    try:
        d = apps.read_namespaced_deployment("web-canary", namespace)
    except k8s.ApiException:
        return None
    current = (d.status.observed_generation or 0) >= (d.metadata.generation or 0)
    ready = (d.status.ready_replicas or 0) if current else -1
    return d.spec.replicas or 0, ready


def one_release(clients: dict[str, Any], api: Any, namespace: str, image: str) -> list[float]:
    """Change the image and time every step's hand-over."""
    found: Any = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    found["spec"]["resources"]["manifests"][0]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = image
    # a merge patch of the manifests: no resourceVersion, so no conflict with status writes
    patch = {"spec": {"resources": found["spec"]["resources"]}}
    api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web", patch)
    counts = [split(REPLICAS, w)[1] for w in WEIGHTS]
    passed: dict[int, float] = {}
    applied: dict[int, float] = {}
    deadline = time.monotonic() + 600
    while len(applied) < len(counts) - 1 and time.monotonic() < deadline:
        now = time.perf_counter()
        seen = [_canary_copy(c, namespace) for c in clients.values()]
        for i, count in enumerate(counts):
            if i not in passed and all(s == (count, count) for s in seen):
                passed[i] = now
            if i > 0 and i not in applied and all(s is not None and s[0] == count for s in seen):
                applied[i] = now
        time.sleep(0.01)
    if len(applied) < len(counts) - 1:
        raise SystemExit(f"bench.canary: steps not all seen (applied: {sorted(applied)})")
    _wait(
        lambda: _phase(api, namespace) == "Succeeded",
        "Succeeded",
        every_s=0.1,
    )
    return [applied[i] - passed[i - 1] for i in range(1, len(counts)) if i - 1 in passed]


def main() -> None:
    args = arguments(__doc__, "two releases instead of five")
    releases = 2 if args.quick else 5
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        clients = {m.name: local_cluster.api_client(m) for m in state.members}
        controller = Controller(state.hub.kubeconfig, Path(tmp) / "controller.log")
        try:
            _setup(state, hub)
            controller.start()
            api = k8s.CustomObjectsApi(hub)
            namespace = "canary"
            k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
            web = deployment("web", namespace, "nginx:1.0", REPLICAS)
            steps = [{"weight": w} for w in WEIGHTS]
            api.create_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                application("web", namespace, [web], "bench", canary={"steps": steps}),
            )
            _wait(
                lambda: _phase(api, namespace) == "Succeeded",
                "the first release",
                every_s=0.1,
            )
            for r in range(releases):
                got = one_release(clients, api, namespace, f"nginx:1.{r + 1}")
                print(f"release {r + 1}: {len(got)} steps", file=sys.stderr)
                samples += got
        finally:
            controller.stop()
            for c in (hub, *clients.values()):
                c.close()
            local.down(state)
    ms = sorted(s * 1000 for s in samples)
    emit(
        [
            {
                "steps": len(ms),
                "p50_ms": round(percentile(ms, 50), 1),
                "p99_ms": round(percentile(ms, 99), 1),
                "max_ms": round(ms[-1], 1),
            }
        ],
        [
            ("steps", "steps timed"),
            ("p50_ms", "step passed -> next weight on every member, p50 ms"),
            ("p99_ms", "p99 ms"),
            ("max_ms", "max ms"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
