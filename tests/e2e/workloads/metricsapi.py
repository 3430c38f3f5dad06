"""An external metrics API (``external.metrics.k8s.io``) for the members' real
HorizontalPodAutoscaler controllers: an HTTPS server in the test process, registered on
each member as an APIService whose Service's endpoint is this machine's address (the
API servers route to endpoints, there is no kube-proxy). A test sets a metric's value;
the autoscalers read it through their own API server, as they would from an adapter."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from fleet.local.pki import CertificateAuthority
from tests.e2e.conftest import Fleet

GROUP, VERSION = "external.metrics.k8s.io", "v1beta1"
NAMESPACE = "kube-system"
SERVICE = "external-metrics"


def host_address() -> str:
    """This machine's address on its network: an endpoint may not be a loopback one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.254.254.254", 9))  # no packet is sent: it picks the source
        address = str(probe.getsockname()[0])
    if address.startswith("127.") or address == "0.0.0.0":
        raise AssertionError(f"no non-loopback IPv4 address for the metrics API: {address}")
    return address


class ExternalMetrics:
    """The metrics' values, by (namespace, name), and the server that serves them."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}
        self.lock = threading.Lock()

    def set(self, namespace: str, name: str, value: str) -> None:
        with self.lock:
            self.values[namespace, name] = value

    def answer(self, path: str) -> tuple[int, Any]:
        base = f"/apis/{GROUP}/{VERSION}"
        if path == "/apis":
            group = {
                "name": GROUP,
                "versions": [{"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}],
            }
            return 200, {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [{**group, "preferredVersion": group["versions"][0]}],
            }
        if path == base:
            resource = {
                "name": "*",
                "singularName": "",
                "namespaced": True,
                "kind": "ExternalMetricValueList",
                "verbs": ["get"],
            }
            return 200, {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{VERSION}",
                "resources": [resource],
            }
        parts = path[len(base) :].strip("/").split("/")
        if path.startswith(base + "/") and len(parts) == 3 and parts[0] == "namespaces":
            with self.lock:
                value = self.values.get((parts[1], parts[2]))
            if value is None:
                return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            item = {"metricName": parts[2], "metricLabels": {}, "timestamp": now, "value": value}
            return 200, {
                "kind": "ExternalMetricValueList",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {},
                "items": [item],
            }
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[tuple[ExternalMetrics, str, int]]:
    """The metrics, the address and the port they are served at (HTTPS), until the end."""
    metrics = ExternalMetrics()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = metrics.answer(self.path.split("?", 1)[0])
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: Any) -> None:
            pass

    address = host_address()
    pair = CertificateAuthority(directory, "external-metrics").issue(
        "serving", "external-metrics", server_hosts=[address]
    )
    server = ThreadingHTTPServer((address, 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield metrics, address, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def register(fleet: Fleet, cluster: str, address: str, port: int) -> None:
    """The APIService on ``cluster`` that sends the external metrics to the server."""
    core = fleet.core(cluster)
    ports = [{"name": "https", "port": 443, "targetPort": port}]
    core.create_namespaced_service(
        NAMESPACE, {"metadata": {"name": SERVICE}, "spec": {"ports": ports}}
    )
    core.create_namespaced_endpoints(
        NAMESPACE,
        {
            "metadata": {"name": SERVICE},
            "subsets": [
                {"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port}]}
            ],
        },
    )
    k8s.DiscoveryV1Api(fleet.api(cluster)).create_namespaced_endpoint_slice(
        NAMESPACE,
        {  # type: ignore[arg-type]
            "metadata": {
                "name": SERVICE,
                "labels": {
                    "kubernetes.io/service-name": SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "e2e.propagator.io",
                },
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
    )
    k8s.ApiregistrationV1Api(fleet.api(cluster)).create_api_service(
        {  # type: ignore[arg-type]
            "metadata": {"name": f"{VERSION}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "service": {"name": SERVICE, "namespace": NAMESPACE, "port": 443},
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        }
    )


def unregister(fleet: Fleet, cluster: str) -> None:
    """Remove what :func:`register` made (what is gone already is fine)."""
    calls: list[Callable[[], Any]] = [
        lambda: k8s.ApiregistrationV1Api(fleet.api(cluster)).delete_api_service(
            f"{VERSION}.{GROUP}"
        ),
        lambda: k8s.DiscoveryV1Api(fleet.api(cluster)).delete_namespaced_endpoint_slice(
            SERVICE, NAMESPACE
        ),
        lambda: fleet.core(cluster).delete_namespaced_endpoints(SERVICE, NAMESPACE),
        lambda: fleet.core(cluster).delete_namespaced_service(SERVICE, NAMESPACE),
    ]
    for call in calls:
        try:
            call()
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
