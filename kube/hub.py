"""The connection to the hub: the way kubectl finds it, or in-cluster when deployed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kube.connection import KubeConnection
from kube.kubeconfig import (
    MAX_KUBECONFIG_BYTES,
    Credentials,
    KubeconfigError,
    load_kubeconfig,
    parse_yaml,
)
from kube.session import ConnectionOptions

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service-account token and the cluster's CA."""

_PATH_KEYS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}
"""Fields of a kubeconfig that name files, per section: relative to their own file."""


def kubeconfig_paths() -> list[Path]:
    """``$KUBECONFIG`` (every file it lists, in order) or ``~/.kube/config``, as kubectl."""
    env = os.environ.get("KUBECONFIG")
    if env:
        paths = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
        if paths:
            return paths
    return [Path.home() / ".kube" / "config"]


def _absolute(doc: dict[str, Any], base: Path) -> dict[str, Any]:
    """``doc`` with the file paths it names made absolute against ``base`` (its own
    directory), so that merged files still find theirs."""
    for section, (kind, keys) in _PATH_KEYS.items():
        for item in doc.get(section) or []:
            inner = item.get(kind) if isinstance(item, dict) else None
            if not isinstance(inner, dict):
                continue
            for key in keys:
                value = inner.get(key)
                if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
                    inner[key] = str(base / value)
    return doc


def merged_kubeconfig(paths: list[Path]) -> tuple[dict[str, Any], str]:
    """Merge kubeconfig files as kubectl does: clusters, users and contexts by name (the
    first file that names one wins), ``current-context`` from the first file that sets it;
    files that do not exist are skipped. Returns the merged config and a description of
    its source for messages; raises KubeconfigError when no file can be read."""
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    seen: dict[str, set[str]] = {"clusters": set(), "users": set(), "contexts": set()}
    read = []
    for path in paths:
        try:
            with path.open("rb") as file:
                raw = file.read(MAX_KUBECONFIG_BYTES + 1)
        except FileNotFoundError:
            continue  # kubectl skips files of the list that do not exist
        except OSError as exc:
            raise KubeconfigError(f"hub kubeconfig {path}: {exc.strerror or exc}") from exc
        if len(raw) > MAX_KUBECONFIG_BYTES:
            raise KubeconfigError(
                f"hub kubeconfig {path}: larger than a kubeconfig may be "
                f"({MAX_KUBECONFIG_BYTES >> 20} MiB)"
            )
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            raise KubeconfigError(
                f"hub kubeconfig {path}: not UTF-8 text (byte {exc.start}); is it a kubeconfig?"
            ) from None
        doc = parse_yaml(text, f"hub kubeconfig {path}") or {}
        if not isinstance(doc, dict):
            raise KubeconfigError(f"hub kubeconfig {path}: not a kubeconfig")
        read.append(path)
        _absolute(doc, path.parent)
        for section in ("clusters", "users", "contexts"):
            for item in doc.get(section) or []:
                name = item.get("name") if isinstance(item, dict) else None
                if isinstance(name, str) and name not in seen[section]:
                    seen[section].add(name)
                    merged[section].append(item)
        if "current-context" not in merged and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
    if not read:
        listed = ", ".join(str(p) for p in paths)
        raise KubeconfigError(f"hub kubeconfig: none of {listed} exists")
    source = "hub kubeconfig " + ":".join(str(p) for p in read)
    return merged, source


def context_namespace(kubeconfig: Path | None = None, context: str | None = None) -> str | None:
    """The namespace the kubeconfig's context (``context``, else its current one) names,
    as kubectl reads it (``kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``);
    None when it names none."""
    doc, _ = merged_kubeconfig([kubeconfig] if kubeconfig else kubeconfig_paths())
    name = context or doc.get("current-context")
    for entry in doc.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            namespace = (entry.get("context") or {}).get("namespace")
            return namespace if isinstance(namespace, str) and namespace else None
    return None


def _in_cluster(service_account_dir: Path) -> Credentials | None:
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    token = service_account_dir / "token"
    if not (host and port and token.exists()):
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return Credentials(
        server=f"https://{host}:{port}",
        ca_data=(service_account_dir / "ca.crt").read_bytes(),
        token=token.read_text().strip(),
        token_file=str(token),
        ca_file=str(service_account_dir / "ca.crt"),
    )


def hub_connection(
    kubeconfig: Path | None = None,
    context: str | None = None,
    options: ConnectionOptions | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    name: str = "hub",
) -> KubeConnection:
    """Connect to the hub: ``kubeconfig`` if given, else in-cluster config when running in a
    pod (its token and CA re-read as the kubelet rotates them), else the files of
    ``$KUBECONFIG`` merged, or ``~/.kube/config``. The hub kubeconfig is the operator's own,
    so it may reference files and use credential plugins, like kubectl. ``name``: what
    messages call it (a Pull member's agent connects to its own cluster so)."""
    options = options or ConnectionOptions()
    if kubeconfig is None and context is None and (creds := _in_cluster(service_account_dir)):
        return KubeConnection(name, creds, options)
    doc, source = merged_kubeconfig([kubeconfig] if kubeconfig else kubeconfig_paths())
    base = (kubeconfig or kubeconfig_paths()[0]).parent
    loaded = load_kubeconfig(doc, source=source, context=context, base_dir=base, allow_exec=True)
    return KubeConnection(name, loaded.credentials, options)
