"""How the hub is found: $KUBECONFIG files merged as kubectl merges them, and the
in-cluster token and CA re-read as the kubelet rotates them."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleet.local.pki import CertificateAuthority
from kube.credentials import ServiceAccountFiles
from kube.hub import _in_cluster, hub_connection, kubeconfig_paths, merged_kubeconfig
from kube.kubeconfig import KubeconfigError


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "pki", "test-ca")


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def _cluster(name: str, server: str, ca_file: str) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server, "certificate-authority": ca_file}}


def test_kubeconfig_files_merge_as_kubectl_merges_them(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first file names the context; the context and its cluster live in the second,
    # whose CA file is relative to the second file's own directory
    second_dir = tmp_path / "b"
    second_dir.mkdir()
    (second_dir / "ca.crt").write_bytes(ca.pair.cert.read_bytes())
    first = _write(
        tmp_path / "a" / "config",
        {
            "current-context": "hub",
            "clusters": [_cluster("other", "https://10.0.0.9:6443", "missing.crt")],
            "users": [{"name": "me", "user": {"token": "first-wins"}}],
            "contexts": [{"name": "other", "context": {"cluster": "other", "user": "me"}}],
        },
    )
    second = _write(
        second_dir / "config",
        {
            "current-context": "other",  # the first file's wins
            "clusters": [_cluster("hub", "https://10.0.0.1:6443", "ca.crt")],
            "users": [{"name": "me", "user": {"token": "second-loses"}}],
            "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "me"}}],
        },
    )
    missing = tmp_path / "nowhere" / "config"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(first), str(second)]))
    assert kubeconfig_paths() == [missing, first, second]
    doc, source = merged_kubeconfig(kubeconfig_paths())
    assert doc["current-context"] == "hub"
    assert source == f"hub kubeconfig {first}:{second}"
    hub = hub_connection()
    assert hub.server == "https://10.0.0.1:6443"
    assert hub._creds.token == "first-wins"
    assert hub._creds.ca_data == ca.pair.cert.read_bytes()


def test_no_kubeconfig_file_says_which_were_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'x'}{os.pathsep}{tmp_path / 'y'}")
    with pytest.raises(KubeconfigError, match=r"none of .*x, .*y exists"):
        hub_connection()


def _service_account(directory: Path, ca: CertificateAuthority, token: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca.pair.cert.read_bytes())


def test_in_cluster_token_is_read_again_when_the_kubelet_rotates_it(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = tmp_path / "sa"
    _service_account(sa, ca, "first\n")
    creds = _in_cluster(sa)
    assert creds is not None
    assert creds.server == "https://10.96.0.1:443"
    files = ServiceAccountFiles(creds, ssl.create_default_context())
    monkeypatch.setattr(ServiceAccountFiles, "CHECK_EVERY_S", 0.0)

    def sent() -> str:
        request = httpx.Request("GET", "https://10.96.0.1/api")
        return str(next(files.auth_flow(request)).headers["Authorization"])

    assert sent() == "Bearer first"
    # the kubelet writes a new token (a new file swapped in: a new mtime)
    replacement = sa / "token.new"
    replacement.write_text("second\n")
    os.utime(replacement, (1, 1))
    replacement.replace(sa / "token")
    assert sent() == "Bearer second"
    # an empty or missing file mid-rotation keeps the last good token
    (sa / "token").unlink()
    assert sent() == "Bearer second"


def test_an_ipv6_service_address_is_bracketed(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    _service_account(tmp_path / "sa", ca, "t")
    creds = _in_cluster(tmp_path / "sa")
    assert creds is not None
    assert creds.server == "https://[fd00::1]:443"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\xff\xfe binary", "not UTF-8 text (byte 0); is it a kubeconfig?"),
        (b"a: " + b"x" * (5 << 20), "larger than a kubeconfig may be (4 MiB)"),
        (b"users:\n- user:\n    token: [abcdefghijklmnopqrstuvwxyz012345\n", "not valid YAML at"),
    ],
)
def test_a_hub_kubeconfig_that_cannot_be_one_is_a_one_line_error(
    tmp_path: Path, content: bytes, says: str
) -> None:
    """What ``propagator schedule --hub-kubeconfig`` printed a traceback for, or took
    ~20 s over (50 MiB), or quoted a token of."""
    path = tmp_path / "hub.yaml"
    path.write_bytes(content)
    with pytest.raises(KubeconfigError, match=f"hub kubeconfig {path}: ") as caught:
        merged_kubeconfig([path])
    assert says in str(caught.value)
    assert "abcdefgh" not in str(caught.value)
