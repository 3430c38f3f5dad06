"""A real OCI registry for the chart tests (go-containerregistry's, built from its pinned
module by hack/registry.sh: in memory, over TLS or plain HTTP, with or without basic
authentication), and charts written and pushed with the real helm."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import signal
import ssl
import subprocess
import tarfile
import textwrap
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleet.local.pki import CertificateAuthority
from tests.e2e.tools import built, terminate


@dataclass
class Registry:
    """One running registry."""

    process: subprocess.Popen[str]
    host: str
    """127.0.0.1:<port>"""
    tls: bool
    user: tuple[str, str] | None
    ca: Path | None

    @property
    def charts(self) -> str:
        """The ``oci://`` repository the tests push charts under."""
        return f"oci://{self.host}/charts"

    @property
    def allowed(self) -> str:
        """Its PROPAGATOR_CHART_SOURCES entry."""
        return f"{'https' if self.tls else 'http'}://{self.host}/charts"

    def pause(self) -> None:
        """It stops answering (connections are accepted by the kernel, nothing more)."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def _request(self, method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
        url = f"{'https' if self.tls else 'http'}://{self.host}{path}"
        request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
        if self.user is not None:
            token = base64.b64encode(f"{self.user[0]}:{self.user[1]}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        context = ssl.create_default_context(cafile=str(self.ca)) if self.ca else None
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            location = answer.headers.get("Location")
            data: bytes = answer.read()
            return location.encode() if method == "POST" and location else data

    def push_raw(self, name: str, tag: str, layer: bytes) -> str:
        """Push ``layer`` as a chart artifact without helm (a chart helm would refuse to
        push); returns the manifest's digest."""
        digests = []
        config = json.dumps({"name": name, "version": tag}).encode()
        for blob in (config, layer):
            digest = "sha256:" + hashlib.sha256(blob).hexdigest()
            location = self._request("POST", f"/v2/charts/{name}/blobs/uploads/").decode()
            separator = "&" if "?" in location else "?"
            self._request(
                "PUT",
                f"{location}{separator}digest={digest}",
                blob,
                **{"Content-Type": "application/octet-stream"},
            )
            digests.append((digest, len(blob)))
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.cncf.helm.config.v1+json",
                    "digest": digests[0][0],
                    "size": digests[0][1],
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                        "digest": digests[1][0],
                        "size": digests[1][1],
                    }
                ],
            }
        ).encode()
        self._request(
            "PUT",
            f"/v2/charts/{name}/manifests/{tag}",
            manifest,
            **{"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        )
        return "sha256:" + hashlib.sha256(manifest).hexdigest()


@contextmanager
def registry(
    directory: Path, *, tls: bool, user: tuple[str, str] | None = None
) -> Iterator[Registry]:
    """A registry on a free loopback port, stopped on exit."""
    program = built("registry.sh") / "registry"
    args = [str(program), "--addr", "127.0.0.1:0"]
    ca_path = None
    if tls:
        ca = CertificateAuthority(directory / "pki", "chart-registry-ca")
        pair = ca.issue("registry", "registry", server_hosts=["127.0.0.1"])
        args += ["--cert", str(pair.cert), "--key", str(pair.key)]
        ca_path = ca.pair.cert
    if user is not None:
        args += ["--user", f"{user[0]}:{user[1]}"]
    log = (directory / "registry.log").open("w")
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "listening on 127.0.0.1:<port>"
        assert line.startswith("listening on "), line
        yield Registry(process, line.split()[-1], tls, user, ca_path)
    finally:
        os.kill(process.pid, signal.SIGCONT)
        terminate(process)
        log.close()


class Helm:
    """The real helm, with its registry logins kept in a directory of the test's."""

    def __init__(self, directory: Path) -> None:
        self.binary = built("helm.sh") / "helm"
        self.directory = directory
        self.env = {
            **os.environ,
            "HELM_REGISTRY_CONFIG": str(directory / "registry.json"),
            "HELM_CACHE_HOME": str(directory / "cache"),
            "HELM_CONFIG_HOME": str(directory / "config"),
            "HELM_DATA_HOME": str(directory / "data"),
        }

    def run(self, *args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            input=stdin,
            env=self.env,
            check=False,
        )
        assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"
        return result.stdout + result.stderr

    def push(self, chart: Path, registry: Registry) -> str:
        """Package ``chart`` and push it; returns the pushed manifest's digest."""
        packaged = self.run("package", str(chart), "-d", str(self.directory))
        archive = packaged.strip().rsplit(" ", 1)[-1]
        flags = ["--plain-http"] if not registry.tls else ["--ca-file", str(registry.ca)]
        if registry.user is not None:
            self.run(
                "registry",
                "login",
                registry.host,
                "-u",
                registry.user[0],
                "--password-stdin",
                *flags,
                stdin=registry.user[1],
            )
        said = self.run("push", archive, registry.charts, *flags)
        return next(w for w in said.split() if w.startswith("sha256:"))


def web_chart(root: Path, name: str, version: str, image: str, **templates: str) -> Path:
    """A chart of a Deployment (replicas and image from values), a Service, a ConfigMap
    telling what the render saw (the cluster value, ``.Capabilities``, the chart version)
    and a test hook; ``templates``: more templates by file name."""
    chart = root / f"{name}-{version}"
    (chart / "templates" / "tests").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: {name}\nversion: {version}\nappVersion: '{image}'\n"
    )
    (chart / "values.yaml").write_text(f"replicaCount: 1\nimage: {image}\ncluster: none\n")
    files = {
        "deployment.yaml": """
            apiVersion: apps/v1
            kind: Deployment
            metadata:
              name: {{ .Release.Name }}
            spec:
              replicas: {{ .Values.replicaCount }}
              selector:
                matchLabels: {app: {{ .Release.Name }}}
              template:
                metadata:
                  labels: {app: {{ .Release.Name }}}
                spec:
                  containers:
                    - name: web
                      image: {{ .Values.image }}
                      resources:
                        requests: {cpu: 10m, memory: 16Mi}
            """,
        "service.yaml": """
            apiVersion: v1
            kind: Service
            metadata:
              name: {{ .Release.Name }}
            spec:
              selector: {app: {{ .Release.Name }}}
              ports: [{port: 80}]
            """,
        "info.yaml": """
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: {{ .Release.Name }}-info
            data:
              cluster: {{ .Values.cluster | quote }}
              kube: {{ .Capabilities.KubeVersion.Version | quote }}
              widgets: {{ .Capabilities.APIVersions.Has "example.com/v1/Widget" | quote }}
              chart: {{ .Chart.Version | quote }}
              namespace: {{ .Release.Namespace | quote }}
            """,
        "tests/test-connection.yaml": """
            apiVersion: v1
            kind: Pod
            metadata:
              name: {{ .Release.Name }}-test
              annotations: {"helm.sh/hook": test}
            spec:
              containers: [{name: probe, image: busybox}]
              restartPolicy: Never
            """,
        **templates,
    }
    for file, text in files.items():
        (chart / "templates" / file).write_text(textwrap.dedent(text).lstrip())
    return chart


def bomb(name: str, unpacked: int) -> bytes:
    """A chart archive that unpacks to ``unpacked`` bytes of zeros in files of 3 MiB (each
    within the per-file bound; its gzip is a thousandth of that)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        meta = f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n".encode()
        info = tarfile.TarInfo(f"{name}/Chart.yaml")
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
        part = 3 << 20
        for index in range(0, unpacked, part):
            info = tarfile.TarInfo(f"{name}/templates/zeros-{index // part}.yaml")
            info.size = min(part, unpacked - index)
            tar.addfile(info, _Zeros(info.size))
    return gzip.compress(raw.getvalue(), compresslevel=9)


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.left -= size
        return b"\0" * size
