"""Fleet management on the local fleet: join, health, capacity, taints, recovery, refusals.

Runs the real ``propagator fleet join`` and ``propagator run`` commands against the hub.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client as k8s

from api.taints import NOT_READY_TAINT, UNREACHABLE_TAINT
from fleet.local import HUB
from fleet.local import cluster as local_cluster
from tests.e2e.conftest import MEMBER_LAYERS, Fleet
from tests.e2e.controller import Controller, http_get, propagator, running
from tests.e2e.waiting import HANG_GUARD_S, eventually

NAMESPACE = "propagator-system"
LAYERS = MEMBER_LAYERS


def custom(fleet: Fleet) -> Any:
    return k8s.CustomObjectsApi(fleet.api(HUB))


def get_mc(fleet: Fleet, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom(fleet).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "memberclusters", name
    )
    return result


def ready(mc: dict[str, Any]) -> str | None:
    for c in (mc.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c["status"])
    return None


def wait_mc(
    fleet: Fleet, name: str, what: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The MemberCluster once ``predicate`` holds for it."""

    def probe() -> dict[str, Any] | None:
        mc = get_mc(fleet, name)
        return mc if predicate(mc) else None

    return eventually(probe, f"{name} {what}")


def taint_keys(mc: dict[str, Any]) -> list[str]:
    return sorted(t["key"] for t in mc["spec"].get("taints") or [])


@pytest.fixture(scope="module")
def controller(
    fleet: Fleet, joined: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    with running(fleet, tmp_path_factory.mktemp("controller")) as controller:
        yield controller


def test_joined_members_become_ready_with_their_kwok_capacity(
    fleet: Fleet, controller: Controller
) -> None:
    for name, layer in LAYERS.items():
        mc = wait_mc(
            fleet,
            name,
            "Ready with capacity",
            lambda m: ready(m) == "True" and "resources" in m["status"],
        )
        assert mc["spec"]["layer"] == layer
        status = mc["status"]
        # Two kwok nodes of 8 CPU, 32Gi and 110 pods each.
        assert status["resources"]["allocatable"] == {"cpu": "16", "memory": "64Gi", "pods": "220"}
        assert status["nodes"] == {"total": 2, "ready": 2}
        assert status["kubernetesVersion"] == "v1.37.2"
        served = {e["groupVersion"]: e["kinds"] for e in status["apiEnablements"]}
        assert "Deployment" in served["apps/v1"]
        assert taint_keys(mc) == []
        secret = fleet.core(HUB).read_namespaced_secret(f"{name}-kubeconfig", NAMESPACE)
        stored = yaml.safe_load(base64.b64decode(secret.data["kubeconfig"]))
        assert [c["name"] for c in stored["contexts"]] == [name]

    def fleet_status() -> dict[str, Any] | None:
        fl = custom(fleet).get_cluster_custom_object("propagator.io", "v1alpha1", "fleets", "local")
        status = fl.get("status") or {}
        return status if status.get("readyClusters") == 3 else None

    status = eventually(fleet_status, "fleet local with 3 ready clusters")
    assert status["clusters"] == 3
    assert status["layers"] == {"edge": 1, "high-performance": 2}


def test_allocated_follows_a_deployment_scaled_on_a_member(
    fleet: Fleet, controller: Controller
) -> None:
    member = "member-1"
    eventually(lambda: ready(get_mc(fleet, member)) == "True", f"{member} Ready")
    apps = fleet.apps(member)
    ns = "capacity"

    def allocated() -> dict[str, str]:
        return dict(get_mc(fleet, member)["status"]["resources"]["allocated"])

    def running(namespace: str | None = None) -> int:
        """Pods the member runs as capacity counts them (bound, not finished), in
        ``namespace`` or all."""
        core = fleet.core(member)
        pods = (
            core.list_namespaced_pod(namespace) if namespace else core.list_pod_for_all_namespaces()
        ).items
        return sum(
            1 for p in pods if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")
        )

    # Earlier tests' pods may still be going, at any time: the status is compared with
    # what the member runs now, not with a count taken before.
    def counts(ours: int) -> dict[str, str] | None:
        """The allocated resources once they count every pod the member runs, ``ours`` of
        them this test's."""
        if running(ns) != ours:
            return None
        counted = allocated()
        return counted if counted.get("pods") == str(running()) else None

    fleet.core(member).create_namespace({"metadata": {"name": ns}})
    labels = {"app": "load"}
    apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "load"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                            }
                        ]
                    },
                },
            },
        },
    )
    try:
        before = eventually(lambda: counts(2), "2 pods allocated")
    except AssertionError as exc:  # say what the member holds
        core = fleet.core(member)
        pods = [
            (p.metadata.name, p.status.phase, p.spec.node_name)
            for p in core.list_namespaced_pod(ns).items
        ]
        nodes = [
            (
                n.metadata.name,
                [(c.type, c.status) for c in n.status.conditions or []],
                n.spec.taints,
            )
            for n in core.list_node().items
        ]
        raise AssertionError(
            f"{exc}: allocated {allocated()}, the member runs {running()} pods; {pods}; {nodes}"
        ) from exc
    apps.patch_namespaced_deployment_scale("load", ns, {"spec": {"replicas": 6}})
    after = eventually(lambda: counts(6), "6 pods allocated")
    assert after != before
    resources = get_mc(fleet, member)["status"]["resources"]
    assert int(resources["available"]["pods"]) == 220 - int(resources["allocated"]["pods"])
    apps.delete_namespaced_deployment("load", ns)
    eventually(lambda: counts(0), "pods released")


def test_a_stopped_member_goes_not_ready_tainted_then_recovers(
    fleet: Fleet, controller: Controller
) -> None:
    name = "member-3"
    victim = fleet.state.cluster(name)
    eventually(lambda: ready(get_mc(fleet, name)) == "True", f"{name} Ready")
    local_cluster.stop_component(victim, "kube-apiserver")
    try:
        mc = wait_mc(fleet, name, "NotReady", lambda m: ready(m) == "False")
        assert NOT_READY_TAINT in taint_keys(mc)
        assert "probes fail:" in mc["status"]["conditions"][0]["message"]
        eventually(
            lambda: UNREACHABLE_TAINT in taint_keys(get_mc(fleet, name)),
            f"{name} tainted unreachable",
        )
        for other in ("member-1", "member-2"):
            assert ready(get_mc(fleet, other)) == "True"
    finally:
        local_cluster.start_component(victim, "kube-apiserver")
        anyio.run(local_cluster.wait_api_ready, victim, time.monotonic() + HANG_GUARD_S)
    eventually(lambda: ready(get_mc(fleet, name)) == "True", f"{name} Ready again")
    eventually(lambda: taint_keys(get_mc(fleet, name)) == [], f"{name} untainted")


def test_a_member_that_never_answers_delays_no_other_members_probes(
    fleet: Fleet, controller: Controller
) -> None:
    # A listener that never accepts: the kernel completes each connection, and then
    # nothing ever answers, so each of the member's probes waits for its 3 s timeout.
    with socket.create_server(("127.0.0.1", 0), backlog=128) as hung:
        core, name = fleet.core(HUB), "hung"
        good = core.read_namespaced_secret("member-1-kubeconfig", NAMESPACE)
        config = yaml.safe_load(base64.b64decode(good.data["kubeconfig"]))
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{hung.getsockname()[1]}"
        data = base64.b64encode(yaml.safe_dump(config).encode()).decode()
        core.create_namespaced_secret(
            NAMESPACE,
            {"metadata": {"name": f"{name}-kubeconfig"}, "data": {"kubeconfig": data}},
        )
        ref = {"namespace": NAMESPACE, "name": f"{name}-kubeconfig", "key": "kubeconfig"}
        custom(fleet).create_cluster_custom_object(
            "propagator.io",
            "v1alpha1",
            "memberclusters",
            {
                "apiVersion": "propagator.io/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": name},
                "spec": {"secretRef": ref},
            },
        )
        try:
            failed = f'propagator_member_probes_total{{cluster="{name}",result="failed"}}'
            ok = 'propagator_member_probes_total{cluster="member-1",result="ok"}'

            def after(probes: float) -> dict[str, float] | None:
                """The metrics once the hung member has had more than ``probes`` failed."""
                scraped = controller.scrape()
                return scraped if scraped.get(failed, 0) > probes else None

            first = eventually(lambda: after(0), f"a failed probe of {name}")
            last = eventually(lambda: after(first[failed] + 2), f"3 more failed probes of {name}")
            # Probed in rounds, member-1 would have had one probe per probe of the hung
            # member (a round waits for its slowest); on their own clocks (1 s interval,
            # 3 s timeout), about three.
            assert last[ok] - first[ok] >= 2 * (last[failed] - first[failed])
            mc = wait_mc(fleet, name, "NotReady", lambda m: ready(m) == "False")
            assert mc["status"]["conditions"][0]["reason"] == "ProbeFailed"
        finally:
            custom(fleet).delete_cluster_custom_object(
                "propagator.io", "v1alpha1", "memberclusters", name
            )
            core.delete_namespaced_secret(f"{name}-kubeconfig", NAMESPACE)


def test_a_changed_secret_rebuilds_the_members_connection(
    fleet: Fleet, controller: Controller
) -> None:
    name = "member-2"
    wait_mc(fleet, name, "Ready", lambda m: ready(m) == "True")
    core = fleet.core(HUB)
    secret_name = f"{name}-kubeconfig"
    good = core.read_namespaced_secret(secret_name, NAMESPACE).data["kubeconfig"]
    config = yaml.safe_load(base64.b64decode(good))
    config["users"][0]["user"] = {"exec": {"command": "steal-credentials"}}
    bad = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    core.patch_namespaced_secret(secret_name, NAMESPACE, {"data": {"kubeconfig": bad}})
    try:
        mc = wait_mc(
            fleet,
            name,
            "refusing the new kubeconfig",
            lambda m: m["status"]["conditions"][0]["reason"] == "InvalidKubeconfig",
        )
        assert "uses exec (command 'steal-credentials')" in mc["status"]["conditions"][0]["message"]
        wait_mc(fleet, name, "tainted not-ready", lambda m: NOT_READY_TAINT in taint_keys(m))
    finally:
        core.patch_namespaced_secret(secret_name, NAMESPACE, {"data": {"kubeconfig": good}})
    wait_mc(
        fleet,
        name,
        "Ready again",
        lambda m: ready(m) == "True" and NOT_READY_TAINT not in taint_keys(m),
    )


def test_metrics_and_health_endpoints(fleet: Fleet, controller: Controller) -> None:
    for name in LAYERS:
        wait_mc(fleet, name, "Ready", lambda m: ready(m) == "True")
    health = controller.health_port
    assert http_get(health, "/healthz") == (200, "ok\n")
    assert http_get(health, "/readyz") == (200, "ok\n")
    assert http_get(health, "/nothing")[0] == 404

    first = controller.scrape()
    for name in LAYERS:
        assert first[f'propagator_cluster_ready{{cluster="{name}"}}'] == 1.0
    assert first["propagator_fleet_snapshot_clusters"] >= 3
    probes = 'propagator_member_probes_total{cluster="member-1",result="ok"}'
    eventually(lambda: controller.scrape()[probes] > first[probes], "probes counted")


# -- refusals: nothing is written ---------------------------------------------------------


def _kubeconfig(fleet: Fleet, member: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(fleet.kubeconfig(member).read_text())
    return loaded


def _expired_client(fleet: Fleet, member: str) -> tuple[str, str]:
    pki = fleet.state.cluster(member).directory / "pki"
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "old"),
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(past - dt.timedelta(days=1))
        .not_valid_after(past)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return (
        base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode(),
        base64.b64encode(pem_key).decode(),
    )


def _bad_kubeconfigs(fleet: Fleet) -> dict[str, tuple[dict[str, Any], list[str], str]]:
    """name -> (kubeconfig, extra join args, what the error must say)."""
    wrong_ca = _kubeconfig(fleet, "member-1")
    wrong_ca["clusters"][0]["cluster"]["certificate-authority-data"] = _kubeconfig(
        fleet, "member-2"
    )["clusters"][0]["cluster"]["certificate-authority-data"]
    unreachable = _kubeconfig(fleet, "member-1")
    unreachable["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    expired = _kubeconfig(fleet, "member-1")
    cert, key = _expired_client(fleet, "member-1")
    expired["users"][0]["user"] = {"client-certificate-data": cert, "client-key-data": key}
    uses_exec = _kubeconfig(fleet, "member-1")
    uses_exec["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "aws",
            "args": ["eks", "get-token"],
        }
    }
    return {
        "unknown-context": (
            _kubeconfig(fleet, "member-1"),
            ["--context", "nope"],
            "no context named 'nope' (known: member-1)",
        ),
        "wrong-ca": (wrong_ca, [], "not signed by the kubeconfig's certificate-authority-data"),
        "unreachable": (unreachable, [], "cannot reach the API server"),
        "expired-cert": (expired, [], "the client certificate expired on"),
        "exec": (
            uses_exec,
            [],
            "uses exec (command 'aws'); Propagator refuses kubeconfigs "
            "that run a command unless the operator sets PROPAGATOR_ALLOW_EXEC_KUBECONFIGS",
        ),
        "bad-layer": (_kubeconfig(fleet, "member-1"), ["--layer", "Edge_1"], "--layer='Edge_1'"),
        "bad-label": (
            _kubeconfig(fleet, "member-1"),
            ["--label", "bad key=x"],
            "--label bad key=x: label key 'bad key'",
        ),
        "bad-namespace": (
            _kubeconfig(fleet, "member-1"),
            ["--member-namespace", "Shop_1"],
            "--member-namespace='Shop_1': ",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown-context",
        "wrong-ca",
        "unreachable",
        "expired-cert",
        "exec",
        "bad-layer",
        "bad-label",
        "bad-namespace",
    ],
)
def test_join_refuses_a_bad_kubeconfig_and_writes_nothing(
    case: str, fleet: Fleet, hub_crds: list[str], tmp_path: Path
) -> None:
    config, extra, says = _bad_kubeconfigs(fleet)[case]
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(config))
    name = f"refused-{case}"
    result = propagator(
        "fleet",
        "join",
        name,
        "--kubeconfig",
        str(path),
        "--fleet",
        "refused",
        "--hub-kubeconfig",
        str(fleet.kubeconfig(HUB)),
        *extra,
    )
    assert result.returncode == 1
    assert says in result.stderr, result.stderr
    with pytest.raises(k8s.ApiException) as missing:
        get_mc(fleet, name)
    assert missing.value.status == 404
    with pytest.raises(k8s.ApiException):
        fleet.core(HUB).read_namespaced_secret(f"{name}-kubeconfig", NAMESPACE)
    with pytest.raises(k8s.ApiException):
        custom(fleet).get_cluster_custom_object("propagator.io", "v1alpha1", "fleets", "refused")


def test_dry_run_then_join_then_unjoin(fleet: Fleet, hub_crds: list[str]) -> None:
    hub = ["--hub-kubeconfig", str(fleet.kubeconfig(HUB))]
    kubeconfig = ["--kubeconfig", str(fleet.kubeconfig("member-2"))]
    dry = propagator("fleet", "join", "extra", *kubeconfig, "--fleet", "extras", "--dry-run", *hub)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Would write:")
    with pytest.raises(k8s.ApiException):
        get_mc(fleet, "extra")

    done = propagator("fleet", "join", "extra", *kubeconfig, "--fleet", "extras", *hub)
    assert done.returncode == 0, done.stderr
    assert get_mc(fleet, "extra")["spec"]["secretRef"]["name"] == "extra-kubeconfig"
    extras = custom(fleet).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "fleets", "extras"
    )
    assert extras["spec"]["clusters"] == ["extra"]

    plan = propagator("fleet", "unjoin", "extra", "--dry-run", *hub)
    assert plan.returncode == 0, plan.stderr
    assert "Fleet extras: remove extra" in plan.stdout
    assert get_mc(fleet, "extra")

    gone = propagator("fleet", "unjoin", "extra", *hub)
    assert gone.returncode == 0, gone.stderr
    with pytest.raises(k8s.ApiException):
        get_mc(fleet, "extra")
    with pytest.raises(k8s.ApiException):
        fleet.core(HUB).read_namespaced_secret("extra-kubeconfig", NAMESPACE)
    extras = custom(fleet).get_cluster_custom_object(
        "propagator.io", "v1alpha1", "fleets", "extras"
    )
    assert extras["spec"]["clusters"] == []


def _app(cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "propagator.io/v1alpha1",
        "kind": "ApplicationPropagation",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "fleet": "local",
            "resources": {
                "manifests": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": "web"},
                        "spec": {
                            "replicas": 2,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "web",
                                            "image": "nginx",
                                            "resources": {
                                                "requests": {"cpu": cpu, "memory": "64Mi"}
                                            },
                                        }
                                    ]
                                }
                            },
                        },
                    }
                ]
            },
            "placement": {
                "layers": ["high-performance", "edge"],
                "clusterSelector": {"matchLabels": {"env": "test"}},
            },
        },
    }


def test_schedule_explains_a_decision_on_the_live_fleet_and_on_a_file(
    fleet: Fleet, controller: Controller, tmp_path: Path
) -> None:
    for name in LAYERS:
        wait_mc(fleet, name, "Ready", lambda m: ready(m) == "True" and not taint_keys(m))
    hub = ["--hub-kubeconfig", str(fleet.kubeconfig(HUB))]
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump(_app("500m")))

    live = propagator("schedule", "-f", str(app), "--explain", *hub)
    assert live.returncode == 0, live.stderr
    rows = {line.split()[0]: line for line in live.stdout.splitlines() if line.startswith("member")}
    assert rows["member-1"].split()[1:3] == ["selected", "2"]
    assert rows["member-2"].split()[1:3] == ["selected", "2"]
    assert "layer edge was not needed" in rows["member-3"]
    assert "Scheduled: layer high-performance: 2/2 clusters fit; placed on 2" in live.stdout

    dump = subprocess.run(
        [
            str(fleet.binaries / "kubectl"),
            "--kubeconfig",
            str(fleet.kubeconfig(HUB)),
            "get",
            "mc,fl",
            "-o",
            "yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (tmp_path / "fleet.yaml").write_text(dump)
    offline = propagator(
        "schedule", "-f", str(app), "--fleet-file", str(tmp_path / "fleet.yaml"), "--json"
    )
    assert offline.returncode == 0, offline.stderr
    decision = json.loads(offline.stdout)
    assert sorted(p["cluster"] for p in decision["placement"]) == ["member-1", "member-2"]

    app.write_text(yaml.safe_dump(_app("100")))  # 200 CPUs per member: nowhere
    full = propagator("schedule", "-f", str(app), *hub)
    assert full.returncode == 1
    assert (
        "Unschedulable: layer high-performance: 0/2 clusters fit: 2 insufficient cpu; "
        "layer edge: 0/1 clusters fit: 1 insufficient cpu"
    ) in full.stdout
