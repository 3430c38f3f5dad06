"""The controller's overhead at a wave boundary on real clusters: a local hub and three
members, ``propagator run`` as a child process, an application (a Deployment of one
replica and a ConfigMap) rolled out in three waves of one member each, no minimum healthy
time. For each boundary, the time from the wave's member running the new revision
healthy (its Deployment current, the new pod Ready: what the controller's health rules
wait for) to the next wave's first write (the next member's Deployment asking for the new
image) — the controller's reaction: the member's watch event, status refresh, plan,
render, member sync. The members' own pod start-up is outside it. Both ends are seen by
a watch of each member's Deployments (as the member's API server sends the events, to the
controller's watch as to the bench's). Against the baseline measured in the same run: an
application of the same objects without waves, created → ``Applied`` on all three
members (the hub polled every 10 ms).

    python -m bench.waves [--quick] [--json]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from kubernetes import client as k8s
from kubernetes import watch

from bench.propagation import Controller, _setup, _wait
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, config_map, deployment

WAVES = {"size": 1, "minHealthyTime": "0s", "progressDeadline": "10m"}


def _objects(namespace: str, image: str, name: str = "web") -> list[dict[str, Any]]:
    return [deployment(name, namespace, image, 1), config_map(name, namespace, v=image)]


def _status(api: Any, namespace: str, name: str) -> dict[str, Any]:
    found: Any = api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return found.get("status") or {}


class MemberWatch:
    """A watch of one member's Deployments in a thread: when each was first seen asking
    for an image, and first seen running it healthy (current, its pods updated and
    Ready) — as the member's API server sends it, to the controller's watch as to this."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.asked: dict[str, float] = {}
        self.healthy: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(client, namespace), daemon=True)
        self._thread.start()

    def _run(self, client: Any, namespace: str) -> None:
        apps = k8s.AppsV1Api(client)
        while not self._stop.is_set():
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                apps.list_namespaced_deployment,
                namespace,
                field_selector="metadata.name=web",
                timeout_seconds=5,
            )
            for event in stream:
                now = time.perf_counter()
                d = event["object"]
                image = d.spec.template.spec.containers[0].image
                self.asked.setdefault(image, now)
                status = d.status
                if (
                    (status.observed_generation or 0) >= (d.metadata.generation or 0)
                    and (status.updated_replicas or 0) == d.spec.replicas
                    and (status.ready_replicas or 0) == d.spec.replicas
                    and not (status.unavailable_replicas or 0)
                ):
                    self.healthy.setdefault(image, now)

    def stop(self) -> None:
        self._stop.set()


def one_release(watches: list[MemberWatch], api: Any, namespace: str, image: str) -> list[float]:
    """Change the image; the hand-over time at each wave boundary."""
    patch = {"spec": {"resources": {"manifests": _objects(namespace, image)}}}
    api.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web", patch)
    _wait(
        lambda: (
            all(image in w.healthy for w in watches)
            and (_status(api, namespace, "web").get("rollout") or {}).get("phase") == "Complete"
        ),
        "complete",
        every_s=0.1,
    )
    return [watches[i].asked[image] - watches[i - 1].healthy[image] for i in range(1, len(watches))]


def _applied(api: Any, namespace: str, name: str) -> bool:
    conditions = _status(api, namespace, name).get("conditions") or []
    return any(c["type"] == "Applied" and c["status"] == "True" for c in conditions)


def baseline(api: Any, namespace: str, count: int) -> list[float]:
    """Create → Applied on all three members, for ``count`` applications without waves."""
    out = []
    for i in range(count):
        name = f"base-{i}"
        start = time.perf_counter()
        objects = _objects(namespace, "nginx:1.0", name)
        app = application(name, namespace, objects, "bench")
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
        _wait(lambda n=name: _applied(api, namespace, n), f"{name} Applied")
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    args = arguments(__doc__, "three releases instead of ten")
    releases = 3 if args.quick else 10
    boundaries: list[float] = []
    created: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-waves-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        clients = [local_cluster.api_client(m) for m in state.members]
        controller = Controller(state.hub.kubeconfig, Path(tmp) / "controller.log")
        watches: list[MemberWatch] = []
        try:
            _setup(state, hub)
            controller.start()
            api = k8s.CustomObjectsApi(hub)
            namespace = "waves"
            k8s.CoreV1Api(hub).create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
            watches = [MemberWatch(c, namespace) for c in clients]
            app = application(
                "web",
                namespace,
                _objects(namespace, "nginx:1.0"),
                "bench",
                rollout={"waves": WAVES},
            )
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
            _wait(lambda: _applied(api, namespace, "web"), "the first revision", every_s=0.1)
            for r in range(releases):
                got = one_release(watches, api, namespace, f"nginx:1.{r + 1}")
                print(f"release {r + 1}: {[round(g * 1000) for g in got]} ms", file=sys.stderr)
                boundaries += got
            created = baseline(api, namespace, releases)
        finally:
            for w in watches:
                w.stop()
            controller.stop()
            for c in (hub, *clients):
                c.close()
            local.down(state)
    ms = sorted(s * 1000 for s in boundaries)
    base = sorted(s * 1000 for s in created)
    emit(
        [
            {
                "what": "wave boundary: healthy -> next wave's first write",
                "samples": len(ms),
                "p50_ms": round(percentile(ms, 50), 1),
                "p99_ms": round(percentile(ms, 99), 1),
                "max_ms": round(ms[-1], 1),
                "ratio_p50": round(percentile(ms, 50) / percentile(base, 50), 2),
            },
            {
                "what": "baseline: create -> Applied on 3 members",
                "samples": len(base),
                "p50_ms": round(percentile(base, 50), 1),
                "p99_ms": round(percentile(base, 99), 1),
                "max_ms": round(base[-1], 1),
                "ratio_p50": 1.0,
            },
        ],
        [
            ("what", "what"),
            ("samples", "samples"),
            ("p50_ms", "p50 ms"),
            ("p99_ms", "p99 ms"),
            ("max_ms", "max ms"),
            ("ratio_p50", "p50 / baseline p50"),
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
