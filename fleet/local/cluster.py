"""One local Kubernetes cluster: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok on loopback, with fake nodes that really run pods.

``prepare`` is long: it writes each component's flags and files in the order they start,
a script rather than logic; the local fleet is for tests and demos and does not ship.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from pydantic import BaseModel

from fleet.local import kwok, process
from fleet.local.kubeconfig import write_kubeconfig
from fleet.local.pki import CertificateAuthority, write_service_account_keys
from fleet.local.process import ProcessRecord

LOOPBACK = "127.0.0.1"
# Order matters: start in this order, stop in the reverse one.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
_POLL_S = 0.25


class NodeShape(BaseModel):
    """Capacity and topology of a cluster's fake nodes."""

    count: int
    cpu: str
    memory: str
    pods: int
    region: str


class ClusterState(BaseModel):
    """Everything needed to use, restart or stop one local cluster."""

    name: str
    role: Literal["hub", "member"]
    directory: Path
    api_port: int
    etcd_port: int
    etcd_peer_port: int
    nodes: NodeShape
    kubeconfig: Path
    components: dict[str, ProcessRecord]

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"


class ComponentFailed(RuntimeError):
    """A component of a local cluster died or the cluster did not become ready in time."""

    def __init__(self, cluster: str, component: str, reason: str, log_tail: str) -> None:
        super().__init__(
            f"{cluster}/{component}: {reason}\n--- last lines of its log ---\n{log_tail.rstrip()}"
        )
        self.cluster = cluster
        self.component = component


def prepare(
    name: str,
    role: Literal["hub", "member"],
    directory: Path,
    binaries: Path,
    ports: tuple[int, int, int],
    nodes: NodeShape,
    admin_kubeconfig: Path,
) -> ClusterState:
    """Write certificates, kubeconfigs and configs, and lay out each component's command.

    The cluster-admin kubeconfig, the one users and tests get, goes to ``admin_kubeconfig``.
    """
    api_port, etcd_port, etcd_peer_port = ports
    pki_dir = directory / "pki"
    ca = CertificateAuthority(pki_dir, f"{name}-ca")
    serving = ca.issue(
        "apiserver",
        "kube-apiserver",
        server_hosts=[
            LOOPBACK,
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ],
    )
    sa = write_service_account_keys(pki_dir)
    server = f"https://{LOOPBACK}:{api_port}"
    kubeconfigs = directory / "kubeconfigs"

    def user_kubeconfig(
        user: str, cn: str, org: str | None = None, path: Path | None = None
    ) -> Path:
        pair = ca.issue(user, cn, organization=org)
        return write_kubeconfig(
            path or kubeconfigs / f"{user}.yaml",
            cluster=name,
            server=server,
            ca=ca.pair.cert,
            client=pair,
        )

    admin = user_kubeconfig("admin", "propagator-admin", "system:masters", admin_kubeconfig)
    kcm = user_kubeconfig("controller-manager", "system:kube-controller-manager")
    scheduler = user_kubeconfig("scheduler", "system:kube-scheduler")
    # kwok acts as every kubelet at once, so it needs the node and pod status of all of them.
    kwok_kc = user_kubeconfig("kwok", "kwok", "system:masters")
    kwok_config = directory / "kwok.yaml"
    kwok_config.write_text(kwok.config_yaml())

    logs = directory / "logs"
    etcd_url = f"http://{LOOPBACK}:{etcd_port}"
    peer_url = f"http://{LOOPBACK}:{etcd_peer_port}"
    argv: dict[str, list[str]] = {
        "etcd": [
            str(binaries / "etcd"),
            "--name",
            name,
            "--data-dir",
            str(directory / "etcd"),
            "--listen-client-urls",
            etcd_url,
            "--advertise-client-urls",
            etcd_url,
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            f"{name}={peer_url}",
            # Test clusters: durability is not worth the fsync latency.
            "--unsafe-no-fsync",
            "--quota-backend-bytes",
            str(2 << 30),
        ],
        "kube-apiserver": [
            str(binaries / "kube-apiserver"),
            "--etcd-servers",
            etcd_url,
            "--bind-address",
            LOOPBACK,
            "--advertise-address",
            LOOPBACK,
            "--secure-port",
            str(api_port),
            "--tls-cert-file",
            str(serving.cert),
            "--tls-private-key-file",
            str(serving.key),
            "--client-ca-file",
            str(ca.pair.cert),
            "--authorization-mode",
            "RBAC",
            "--service-account-key-file",
            str(sa.cert),
            "--service-account-signing-key-file",
            str(sa.key),
            "--service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range",
            "10.96.0.0/16",
            "--allow-privileged=true",
            # The endpoint reconciler refuses loopback addresses; nothing here needs it.
            "--endpoint-reconciler-type=none",
            # An APIService (e.g. a metrics API an autoscaler reads) is reached at its
            # endpoints' addresses: there is no kube-proxy for a Service's cluster IP.
            "--enable-aggregator-routing=true",
            "--cert-dir",
            str(pki_dir / "generated"),
            "--profiling=false",
        ],
        "kube-controller-manager": [
            str(binaries / "kube-controller-manager"),
            "--kubeconfig",
            str(kcm),
            "--leader-elect=false",
            "--secure-port",
            "0",
            "--service-account-private-key-file",
            str(sa.key),
            "--root-ca-file",
            str(ca.pair.cert),
            "--use-service-account-credentials=true",
            "--cluster-signing-cert-file",
            str(ca.pair.cert),
            "--cluster-signing-key-file",
            str(ca.pair.key),
            # Autoscalers act within seconds of their metric (15 s by default).
            "--horizontal-pod-autoscaler-sync-period=5s",
            "--profiling=false",
        ],
        "kube-scheduler": [
            str(binaries / "kube-scheduler"),
            "--kubeconfig",
            str(scheduler),
            "--leader-elect=false",
            "--secure-port",
            "0",
            "--profiling=false",
        ],
        "kwok": [
            str(binaries / "kwok"),
            "--kubeconfig",
            str(kwok_kc),
            "--config",
            str(kwok_config),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector",
            f"{kwok.NODE_ANNOTATION}=fake",
            "--node-ip",
            LOOPBACK,
            "--node-lease-duration-seconds",
            "40",
        ],
    }
    components = {c: ProcessRecord(name=c, argv=argv[c], log=logs / f"{c}.log") for c in COMPONENTS}
    return ClusterState(
        name=name,
        role=role,
        directory=directory,
        api_port=api_port,
        etcd_port=etcd_port,
        etcd_peer_port=etcd_peer_port,
        nodes=nodes,
        kubeconfig=admin,
        components=components,
    )


def api_client(state: ClusterState) -> Any:
    """A kubernetes ``ApiClient`` authenticated as the cluster's admin."""
    return k8s_config.new_client_from_config(config_file=str(state.kubeconfig))  # type: ignore[no-untyped-call]


def _ssl_context(state: ClusterState) -> ssl.SSLContext:
    pki = state.directory / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


def api_ready(state: ClusterState, timeout: float = 2.0) -> bool:
    """True when the cluster's API server answers ``/readyz`` with 200."""
    try:
        with urllib.request.urlopen(
            f"{state.server}/readyz", timeout=timeout, context=_ssl_context(state)
        ) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def metrics(state: ClusterState, timeout: float = 10.0) -> str:
    """The cluster's API server's own metrics (``/metrics``, Prometheus' text format),
    read as its admin."""
    with urllib.request.urlopen(
        f"{state.server}/metrics", timeout=timeout, context=_ssl_context(state)
    ) as resp:
        return str(resp.read().decode())


def counted(metrics_text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sum of counter ``name`` over its series whose labels include ``labels`` (each
    label exactly, as ``key="value"``), read from ``metrics_text`` in Prometheus' text
    format, as :func:`metrics` returns it; 0 where no series matches."""
    wanted = [f'{key}="{value}"' for key, value in (labels or {}).items()]

    def selected(series: str) -> bool:
        if series == name:
            return not wanted
        # Each after "{" or ",": resource="x" must not match subresource="x".
        return series.startswith(name + "{") and all(
            f"{{{w}" in series or f",{w}" in series for w in wanted
        )

    total = 0.0
    for line in metrics_text.splitlines():
        series, _, value = line.rpartition(" ")
        if selected(series):
            total += float(value)
    return total


def _check_alive(state: ClusterState, names: tuple[str, ...]) -> None:
    for name in names:
        record = state.components[name]
        if not process.is_running(record):
            raise ComponentFailed(
                state.name, name, "exited during start-up", process.log_tail(record)
            )


async def _wait(
    state: ClusterState, what: str, watched: tuple[str, ...], deadline: float, check: Any
) -> None:
    """Poll ``check`` (a blocking callable) until true; fail on a dead component or timeout."""
    while True:
        _check_alive(state, watched)
        if await anyio.to_thread.run_sync(check):
            return
        if time.monotonic() > deadline:
            culprit = watched[-1]
            raise ComponentFailed(
                state.name,
                culprit,
                f"timed out waiting for {what}",
                process.log_tail(state.components[culprit]),
            )
        await anyio.sleep(_POLL_S)


def _nodes_ready(core: Any, expected: int) -> bool:
    ready = 0
    for node in core.list_node().items:
        conditions = node.status.conditions or []
        ready += any(c.type == "Ready" and c.status == "True" for c in conditions)
    return bool(ready >= expected)


def _default_service_account(core: Any) -> bool:
    try:
        core.read_namespaced_service_account("default", "default")
    except k8s.ApiException:
        return False
    return True


def _create_nodes(core: Any, state: ClusterState) -> None:
    shape = state.nodes
    for i in range(shape.count):
        body = kwok.fake_node(
            f"{state.name}-node-{i + 1}",
            cpu=shape.cpu,
            memory=shape.memory,
            pods=shape.pods,
            region=shape.region,
            zone=f"{shape.region}{'abc'[i % 3]}",
        )
        try:
            core.create_node(body)
        except k8s.ApiException as exc:
            if exc.status != 409:  # already there: a restart of the same state
                raise


def start_component(state: ClusterState, name: str) -> None:
    """Start one component again (e.g. after :func:`stop_component`)."""
    record = state.components[name]
    if not process.is_running(record):
        state.components[name] = process.start(record)


def stop_component(state: ClusterState, name: str) -> None:
    """Stop one component; the others keep running."""
    process.stop(state.components[name])


# Deadlines are absolute (time.monotonic()) rather than anyio.fail_after scopes so that a
# timeout can name the component the cluster was waiting for.


async def wait_api_ready(state: ClusterState, deadline: float) -> None:
    """Wait until the API server answers ``/readyz``; fail fast if it or etcd dies."""
    await _wait(
        state,
        "kube-apiserver /readyz",
        ("etcd", "kube-apiserver"),
        deadline,
        lambda: api_ready(state),
    )


async def start(state: ClusterState, deadline: float) -> None:
    """Start every component and return once the API is ready and every fake node is Ready."""
    start_component(state, "etcd")
    start_component(state, "kube-apiserver")  # it retries etcd until etcd listens
    await wait_api_ready(state, deadline)
    for name in COMPONENTS[2:]:
        start_component(state, name)
    api = await anyio.to_thread.run_sync(api_client, state)
    try:
        core = k8s.CoreV1Api(api)
        await anyio.to_thread.run_sync(_create_nodes, core, state)
        await _wait(
            state,
            f"{state.nodes.count} Ready nodes",
            COMPONENTS,
            deadline,
            lambda: _nodes_ready(core, state.nodes.count),
        )
        await _wait(
            state,
            "the default service account",
            COMPONENTS[:3],
            deadline,
            lambda: _default_service_account(core),
        )
    finally:
        api.close()


def stop(state: ClusterState) -> None:
    """Stop every component, last started first."""
    for name in reversed(COMPONENTS):
        stop_component(state, name)


def rss_bytes(state: ClusterState) -> int:
    """Resident memory of all the cluster's processes."""
    return sum(process.rss_bytes(r) for r in state.components.values())


def cpu_seconds(state: ClusterState) -> float:
    """CPU time all the cluster's running processes have used."""
    return sum(process.cpu_seconds(r) for r in state.components.values())
