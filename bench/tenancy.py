"""What the tenant boundary on what a tenant runs costs (docs/tenancy.md).

1. The hub's check of rendered objects, in process: 3,000 objects (a Deployment of two
   containers, a Service and a ConfigMap per application, 1,000 applications) through the
   whole boundary of a ``restricted`` tenant — where they go, their pod templates at the
   Pod Security level, their Services' exposure — against the same objects through the
   placement rules alone (where they go: the boundary before this issue), best of 5
   passes each; objects/s and the ratio. Then one pod template's Pod Security check alone,
   p50 and p99 over 10,000 checks; and one reconcile's check of an application rendered
   alike for 1,000 clusters (3 objects each), judged once per revision as the reconcile
   does, against every cluster judged (best of 5).
2. On a local hub and three members, ``propagator run`` as a child process: create →
   ``Applied`` on all three members of an application of a ``restricted`` tenant whose
   namespace is new on the members (so the platform's part is written first: the Pod
   Security and tenant labels, a default LimitRange and NetworkPolicy, then the
   application's objects), against the same application from a platform namespace (no
   check, nothing written first), each into a namespace of its own, runs interleaved;
   p50/p99 and the ratio of the medians.

    python -m bench.tenancy [--quick] [--json] [--runs N]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import anyio
from kubernetes import client as k8s

from bench.propagation import ApplicationWatch, Controller, _setup
from bench.report import arguments, emit, percentile
from fleet import local
from fleet.local import cluster as local_cluster
from kube.connection import KubeConnection
from kube.discovery import ResourceInfo
from propagator.settings import Settings
from propagator.tenancy.boundary import check_rendered
from propagator.tenancy.podsecurity import violations
from propagator.tenancy.policy import TenantPolicy, misplaced, policy_for, refusals
from propagator.work.objects import revision_of
from tests.e2e.manifests import GROUP, PLURAL, VERSION, application, config_map, service

TENANT = "tenant"
PLATFORM_NS = "propagator-system"


def _deployment(name: str, namespace: str) -> dict[str, Any]:
    container = {
        "image": "bench:1",
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
    }
    pod = {
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "main", **container}, {"name": "side", **container}],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


def hub_check(apps: int, passes: int = 5) -> list[dict[str, Any]]:
    """Objects/s through the whole boundary and through the placement rules alone."""
    platform = Settings().platform()
    quota = {
        "metadata": {"name": "bench"},
        "spec": {"namespaces": ["shop"], "podSecurity": {"level": "restricted"}},
    }
    policy = policy_for("shop", quota, platform)
    objects = [
        o
        for i in range(apps)
        for o in (
            _deployment(f"web-{i}", "shop"),
            service(f"web-{i}", "shop"),
            config_map(f"web-{i}", "shop", a="1"),
        )
    ]

    def scope(api_version: str, kind: str) -> bool:
        return True

    def whole() -> None:
        assert refusals(objects, policy, platform, scope, "shop") == []

    def placement() -> None:
        assert all(misplaced(o, policy, platform, scope, "shop") is None for o in objects)

    rows = []
    best: dict[str, float] = {}
    for name, run in (("placement rules alone", placement), ("whole boundary", whole)):
        took = []
        for _ in range(passes):
            start = time.perf_counter()
            run()
            took.append(time.perf_counter() - start)
        best[name] = min(took)
        rows.append({"measure": name, "objects_per_s": len(objects) / best[name]})
    rows[-1]["ratio"] = best["whole boundary"] / best["placement rules alone"]
    template = objects[0]["spec"]["template"]
    samples = []
    for _ in range(10_000):
        start = time.perf_counter()
        violations("restricted", template["metadata"], template["spec"])
        samples.append(time.perf_counter() - start)
    rows.append(
        {
            "measure": "one pod template, restricted",
            "p50_us": percentile(samples, 50) * 1e6,
            "p99_us": percentile(samples, 99) * 1e6,
        }
    )
    rows.extend(_fleet_check(policy, objects[:3], passes))
    return rows


class _Served:
    """The hub's discovery, as check_rendered asks it: every kind namespaced."""

    async def resource(self, api_version: str, kind: str) -> ResourceInfo:
        group, _, version = api_version.rpartition("/")
        return ResourceInfo(group, version, kind, kind.lower() + "s", True)


def _fleet_check(
    policy: TenantPolicy, objects: list[dict[str, Any]], passes: int
) -> list[dict[str, Any]]:
    """One reconcile's check of ``objects`` rendered alike for 1,000 clusters."""
    platform = Settings().platform()
    rendered = {f"member-{i:04}": copy.deepcopy(objects) for i in range(1000)}
    revisions = {c: revision_of(o) for c, o in rendered.items()}
    hub = cast(KubeConnection, _Served())
    out: dict[str, float] = {}
    for name, by_revision in (("every cluster judged", None), ("once per revision", revisions)):
        took = []
        for _ in range(passes):
            start = time.perf_counter()
            anyio.run(check_rendered, hub, policy, platform, rendered, "shop", by_revision)
            took.append(time.perf_counter() - start)
        out[name] = min(took)
    return [
        {"measure": f"1,000 clusters, {name}", "ms": seconds * 1e3} for name, seconds in out.items()
    ]


def _tenant_setup(hub: Any, runs: int) -> None:
    core = k8s.CoreV1Api(hub)
    for namespace in (TENANT, PLATFORM_NS):
        try:
            core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        except k8s.ApiException as exc:
            if exc.status != 409:  # the platform namespace may be there already
                raise
    k8s.CustomObjectsApi(hub).create_cluster_custom_object(
        GROUP,
        VERSION,
        "tenantquotas",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TenantQuota",
            "metadata": {"name": "bench"},
            "spec": {
                "namespaces": [TENANT],
                "destinations": [f"t-{i}" for i in range(runs)],
                "podSecurity": {"level": "restricted"},
                "namespaceDefaults": {
                    "limits": [{"type": "Container", "defaultRequest": {"cpu": "10m"}}],
                    "networkPolicy": {"ingressFrom": "SameTenant"},
                },
            },
        },
    )


def first_apply(hub: Any, runs: int) -> list[dict[str, Any]]:
    """Create → Applied, a tenant's application against a platform one, interleaved."""
    api = k8s.CustomObjectsApi(hub)
    watches = {ns: ApplicationWatch(hub, ns) for ns in (TENANT, PLATFORM_NS)}
    time.sleep(1)  # the watches' requests on their way
    samples: dict[str, list[float]] = {TENANT: [], PLATFORM_NS: []}
    for i in range(runs):
        for hub_ns, prefix in ((PLATFORM_NS, "p"), (TENANT, "t")):
            name, target = f"{prefix}-{i}", f"{prefix}-{i}"
            manifests = [_deployment(name, target), config_map(name, target, a="1")]
            app = application(name, hub_ns, copy.deepcopy(manifests), "bench")
            start = time.perf_counter()
            api.create_namespaced_custom_object(GROUP, VERSION, hub_ns, PLURAL, app)
            samples[hub_ns].append(watches[hub_ns].wait(name, "Applied") - start)
    for watch in watches.values():
        watch.stop()
    medians = {ns: percentile(s, 50) for ns, s in samples.items()}
    rows: list[dict[str, Any]] = []
    for hub_ns, what in ((PLATFORM_NS, "platform application"), (TENANT, "restricted tenant")):
        rows.append(
            {
                "measure": f"create -> Applied, {what}, new namespace",
                "p50_ms": medians[hub_ns] * 1e3,
                "p99_ms": percentile(samples[hub_ns], 99) * 1e3,
            }
        )
    rows[-1]["ratio"] = medians[TENANT] / medians[PLATFORM_NS]
    return rows


def main() -> None:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--runs", type=int, default=20)

    args = arguments(__doc__, "300 applications in process, 5 runs each way", more)
    apps, runs = (300, 5) if args.quick else (1000, min(args.runs, 100))
    in_process = hub_check(apps)
    with tempfile.TemporaryDirectory(prefix="bench-tenancy-") as tmp:
        state = anyio.run(local.up, Path(tmp), local.testbin_dir(), local.FleetOptions(members=3))
        hub = local_cluster.api_client(state.hub)
        controller = Controller(state.hub.kubeconfig, Path(tmp) / "controller.log")
        try:
            _setup(state, hub)
            _tenant_setup(hub, runs)
            controller.start()
            fleet = first_apply(hub, runs)
        finally:
            if controller.proc is not None:
                controller.stop()
            hub.close()
            local.down(state)
    emit(
        in_process,
        [
            ("measure", "hub check"),
            ("objects_per_s", "objects/s"),
            ("ratio", "ratio"),
            ("p50_us", "p50 µs"),
            ("p99_us", "p99 µs"),
            ("ms", "ms"),
        ],
        args.json,
    )
    print()
    emit(
        fleet,
        [("measure", "measure"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("ratio", "ratio")],
        args.json,
    )


if __name__ == "__main__":
    main()
