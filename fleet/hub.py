"""The connection to the hub: the way kubectl finds it, or in-cluster when deployed."""

from __future__ import annotations

import os
from pathlib import Path

from fleet.connection import ConnectionOptions, KubeConnection
from fleet.kubeconfig import Credentials, KubeconfigError, load_kubeconfig

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def default_kubeconfig_path() -> Path:
    """``$KUBECONFIG`` (its first file) or ``~/.kube/config``, as kubectl does."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path.home() / ".kube" / "config"


def _in_cluster() -> Credentials | None:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token = _SA_DIR / "token"
    if not (host and port and token.exists()):
        return None
    return Credentials(
        server=f"https://{host}:{port}",
        ca_data=(_SA_DIR / "ca.crt").read_bytes(),
        token=token.read_text().strip(),
    )


def hub_connection(
    kubeconfig: Path | None = None,
    context: str | None = None,
    options: ConnectionOptions | None = None,
) -> KubeConnection:
    """Connect to the hub: ``kubeconfig`` if given, else in-cluster config when running in a
    pod, else ``$KUBECONFIG`` / ``~/.kube/config``. The hub kubeconfig is the operator's own,
    so it may reference files and use credential plugins, like kubectl."""
    options = options or ConnectionOptions()
    if kubeconfig is None and context is None and (creds := _in_cluster()):
        return KubeConnection("hub", creds, options)
    path = kubeconfig or default_kubeconfig_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise KubeconfigError(f"hub kubeconfig {path}: {exc.strerror or exc}") from exc
    loaded = load_kubeconfig(
        text,
        source=f"hub kubeconfig {path}",
        context=context,
        base_dir=path.parent,
        allow_exec=True,
    )
    return KubeConnection("hub", loaded.credentials, options)
