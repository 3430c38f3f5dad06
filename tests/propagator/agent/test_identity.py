"""The agent's hub token: kept from run to run, readable by the agent alone, never an
expired bootstrap."""

from __future__ import annotations

import base64
import json
import stat
import time
from pathlib import Path

import pytest

from kube.kubeconfig import Credentials
from propagator.agent.identity import TOKEN_FILE, HubIdentity, IdentityError, expiry_of


def _jwt(exp: float | None) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    claims: dict[str, object] = {"sub": "system:serviceaccount:propagator-cluster-e:agent"}
    if exp is not None:
        claims["exp"] = int(exp)
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def _bootstrap(token: str | None) -> Credentials:
    return Credentials(server="https://hub:6443", ca_data=b"CA", token=token)


def test_a_jwts_expiry_is_read_and_anything_else_has_none() -> None:
    assert expiry_of(_jwt(1234)) == 1234.0
    assert expiry_of(_jwt(None)) is None
    assert expiry_of("not-a-jwt") is None
    assert expiry_of("a.!!!.c") is None
    assert expiry_of("a." + "A" * 20000 + ".c") is None


def test_the_bootstrap_is_kept_readable_by_the_agent_alone(tmp_path: Path) -> None:
    token = _jwt(time.time() + 600)
    identity = HubIdentity("e", _bootstrap(token), tmp_path / "state", 3600)
    kept = tmp_path / "state" / TOKEN_FILE
    assert kept.read_text() == token
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert identity.credentials.token_file == str(kept)
    assert identity.credentials.server == "https://hub:6443"
    assert 0 < identity.next_rotation_in() <= 300


def test_a_token_kept_from_an_earlier_run_wins_over_an_expired_bootstrap(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text(_jwt(time.time() + 3000))
    identity = HubIdentity("e", _bootstrap(_jwt(time.time() - 10)), tmp_path, 3600)
    assert identity.credentials.token == (tmp_path / TOKEN_FILE).read_text()


def test_an_expired_bootstrap_and_nothing_kept_says_to_join_again(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text(_jwt(time.time() - 5))  # kept, but expired too
    with pytest.raises(IdentityError, match=r"bootstrap token .* has expired.*--mode Pull"):
        HubIdentity("e", _bootstrap(_jwt(time.time() - 10)), tmp_path, 3600)
    with pytest.raises(IdentityError, match="holds no token"):
        HubIdentity("e", _bootstrap(None), tmp_path / "x", 3600)


def test_a_state_dir_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(IdentityError, match=f"--agent-state-dir {blocker}/s"):
        HubIdentity("e", _bootstrap(_jwt(None)), blocker / "s", 3600)
