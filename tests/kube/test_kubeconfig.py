"""Member kubeconfigs: one context, everything inline, nothing that runs a command."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from fleet.local.pki import CertificateAuthority
from kube.kubeconfig import (
    MAX_KUBECONFIG_BYTES,
    ExecConfig,
    KubeconfigError,
    check_not_expired,
    load_kubeconfig,
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority(tmp_path / "pki", "test-ca")


def _config(
    ca: CertificateAuthority, user: dict[str, Any] | None = None, **cluster: Any
) -> dict[str, Any]:
    client = ca.issue("client", "someone")
    return {
        "clusters": [
            {
                "name": "c1",
                "cluster": {
                    "server": "https://10.0.0.1:6443",
                    "certificate-authority-data": _b64(ca.pair.cert.read_bytes()),
                    **cluster,
                },
            }
        ],
        "users": [
            {
                "name": "u1",
                "user": user
                if user is not None
                else {
                    "client-certificate-data": _b64(client.cert.read_bytes()),
                    "client-key-data": _b64(client.key.read_bytes()),
                },
            }
        ],
        "contexts": [
            {"name": "one", "context": {"cluster": "c1", "user": "u1"}},
            {"name": "two", "context": {"cluster": "c1", "user": "u1"}},
        ],
        "current-context": "one",
    }


def test_flattens_to_the_chosen_context(ca: CertificateAuthority) -> None:
    loaded = load_kubeconfig(_config(ca), source="test", context="two")
    assert loaded.context == "two"
    assert [c["name"] for c in loaded.flattened["contexts"]] == ["two"]
    assert loaded.flattened["current-context"] == "two"
    assert loaded.credentials.server == "https://10.0.0.1:6443"
    assert loaded.credentials.client_key is not None
    assert "client-key-data" in loaded.flattened["users"][0]["user"]


def test_unknown_context_lists_the_known_ones(ca: CertificateAuthority) -> None:
    with pytest.raises(KubeconfigError, match=r"test: no context named 'x' \(known: one, two\)"):
        load_kubeconfig(_config(ca), source="test", context="x")


def test_exec_is_refused_unless_allowed(ca: CertificateAuthority) -> None:
    config = _config(ca, user={"exec": {"command": "aws", "args": ["eks", "get-token"]}})
    with pytest.raises(KubeconfigError, match="PROPAGATOR_ALLOW_EXEC_KUBECONFIGS=true"):
        load_kubeconfig(config, source="test")
    loaded = load_kubeconfig(config, source="test", allow_exec=True)
    assert loaded.credentials.exec is not None
    assert loaded.credentials.exec.command == "aws"


def test_auth_provider_and_basic_auth_are_refused(ca: CertificateAuthority) -> None:
    with pytest.raises(KubeconfigError, match="auth-provider 'gcp'"):
        load_kubeconfig(
            _config(ca, user={"auth-provider": {"name": "gcp"}}), source="t", allow_exec=True
        )
    with pytest.raises(KubeconfigError, match="basic auth"):
        load_kubeconfig(_config(ca, user={"username": "a", "password": "b"}), source="t")


@pytest.mark.parametrize("token", ["abc\ndef", "abc def", "tok\u00e9n", 12345])
def test_a_token_a_header_cannot_carry_is_refused_without_quoting_it(
    ca: CertificateAuthority, token: Any
) -> None:
    with pytest.raises(KubeconfigError, match="user 'u1': its token must be") as caught:
        load_kubeconfig(_config(ca, user={"token": token}), source="t")
    assert str(token) not in str(caught.value)
    good = load_kubeconfig(_config(ca, user={"token": "eyJ.a-b_c~+/="}), source="t")
    assert good.credentials.token == "eyJ.a-b_c~+/="


def test_tls_verification_cannot_be_turned_off(ca: CertificateAuthority) -> None:
    insecure: dict[str, Any] = {"insecure-skip-tls-verify": True}
    with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify"):
        load_kubeconfig(_config(ca, **insecure), source="t")
    with pytest.raises(KubeconfigError, match="must be an https:// URL"):
        load_kubeconfig(_config(ca, server="http://10.0.0.1:8080"), source="t")


def test_file_references_only_for_the_operators_own_kubeconfig(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    config = _config(ca, user={"tokenFile": "token"})
    (tmp_path / "token").write_text("s3cret\n")
    with pytest.raises(KubeconfigError, match="tokenFile points at a file"):
        load_kubeconfig(config, source="Secret")  # from a Secret: never read our files
    loaded = load_kubeconfig(config, source="file", base_dir=tmp_path)
    assert loaded.credentials.token == "s3cret"
    assert loaded.flattened["users"][0]["user"] == {"token": "s3cret"}


def test_credentials_never_show_in_repr(ca: CertificateAuthority) -> None:
    loaded = load_kubeconfig(_config(ca, user={"token": "s3cret"}), source="t")
    assert "s3cret" not in repr(loaded.credentials)


def test_expired_client_certificate_is_refused(ca: CertificateAuthority) -> None:
    loaded = load_kubeconfig(_config(ca), source="member-x")
    check_not_expired(loaded.credentials, "member-x")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    with pytest.raises(KubeconfigError, match="member-x: the client certificate expired on"):
        check_not_expired(loaded.credentials, "member-x", now=later)


@pytest.mark.parametrize("text", ["not: [valid", "- a list", "{}"])
def test_garbage_is_not_a_kubeconfig(text: str) -> None:
    with pytest.raises(KubeconfigError, match="src: not"):
        load_kubeconfig(text, source="src")


TOKEN = "Zq8pL3xW9vB2nK7mT4cR6yH1dF5gJ0sAe"  # 33 characters, as in the report


@pytest.mark.parametrize(
    "text",
    [
        f"users:\n- name: u\n  user:\n    token: [{TOKEN}\ncontexts: []\n",
        f"users:\n- name: u\n  user: {{token: {TOKEN}\n",
        f"users:\n- user:\n    token: {TOKEN}\n   bad: x\n",
        f"x: '{TOKEN}\n",
        f"{TOKEN}: [\n",
    ],
)
def test_a_yaml_error_says_where_and_never_quotes_a_line(text: str) -> None:
    """YAML errors quote the line they stopped at, from anywhere in it: a token cut from
    its key escaped redaction (32 of its 33 characters reached a MemberCluster's status)."""
    with pytest.raises(KubeconfigError) as caught:
        load_kubeconfig(text, source="kubeconfig Secret of MemberCluster m1")
    message = str(caught.value)
    assert "not valid YAML at line" in message
    assert not any(TOKEN[i : i + 6] in message for i in range(len(TOKEN) - 5))


def test_the_printed_credentials_show_what_is_set_never_a_credential(
    ca: CertificateAuthority,
) -> None:
    loaded = load_kubeconfig(_config(ca, user={"token": TOKEN}), source="t")
    creds = dataclasses.replace(loaded.credentials, server=f"https://admin:{TOKEN}@10.0.0.1")
    exec_creds = dataclasses.replace(
        creds, exec=ExecConfig("aws", ("--token", TOKEN), (("SECRET", TOKEN),))
    )
    for shown in (repr(creds), str(creds), repr(exec_creds), repr(loaded)):
        assert TOKEN not in shown
        assert "token=<set>" in shown


def test_a_server_address_with_credentials_is_refused_without_quoting_them(
    ca: CertificateAuthority,
) -> None:
    with pytest.raises(KubeconfigError, match="has credentials in its address") as caught:
        load_kubeconfig(_config(ca, server=f"https://admin:{TOKEN}@10.0.0.1:6443"), source="t")
    assert TOKEN not in str(caught.value)


def test_a_client_certificate_that_is_no_certificate_is_a_kubeconfig_error(
    ca: CertificateAuthority,
) -> None:
    """Before, its expiry check raised ValueError out of the fleet manager, and the
    controller stopped."""
    user = {"client-certificate-data": _b64(b"junk, not PEM"), "client-key-data": _b64(b"k")}
    loaded = load_kubeconfig(_config(ca, user=user), source="m1")
    with pytest.raises(KubeconfigError, match="client-certificate-data is not a PEM certificate"):
        check_not_expired(loaded.credentials, "m1")


@pytest.mark.parametrize(
    "change",
    [
        {"contexts": [{"name": "ctx", "context": "a string"}]},
        {"clusters": [{"name": "c1", "cluster": ["a", "list"]}]},
        {"users": [{"name": "u1", "user": {"exec": ["not", "a", "map"]}}]},
        {"users": [{"name": "u1", "user": {"exec": {"command": "x", "env": [{"name": 1}]}}}]},
        {"users": [{"name": "u1", "user": {"exec": {"command": "x", "args": 5}}}]},
        {"users": [{"name": "u1", "user": {"token": ["a"]}}]},
        {"clusters": [{"name": "c1", "cluster": {"server": 443}}]},
        {"current-context": ["ctx"]},
    ],
)
def test_fields_of_the_wrong_type_are_kubeconfig_errors(
    ca: CertificateAuthority, change: dict[str, Any]
) -> None:
    with pytest.raises(KubeconfigError, match="m1: "):
        load_kubeconfig({**_config(ca), **change}, source="m1", allow_exec=True)


def test_a_kubeconfig_past_its_size_is_refused_before_it_is_parsed() -> None:
    huge = "a: " + "x" * (MAX_KUBECONFIG_BYTES + 1)
    with pytest.raises(KubeconfigError, match="more than a kubeconfig may hold"):
        load_kubeconfig(huge, source="m1")
