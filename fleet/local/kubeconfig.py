"""Self-contained kubeconfig files (certificates embedded, so they can be copied into Secrets)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from fleet.local.pki import CertPair


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, *, cluster: str, server: str, ca: Path, client: CertPair) -> Path:
    """Write a kubeconfig whose only context, named after ``cluster``, is the current one."""
    user = f"{cluster}-{client.cert.stem}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
