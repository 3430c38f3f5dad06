"""The agent's hub identity: a ServiceAccount in its cluster's hub namespace, made by
``propagator fleet join --mode Pull``, which may read that namespace's Works, write their
status, renew its Lease, write its MemberCluster's ``status.agent`` and ask tokens for
itself — nothing else.

The agent starts from the short-lived token the join printed (the bootstrap), and at once
exchanges it for a token of its own (a TokenRequest for its ServiceAccount), kept in its
state directory and asked again at half its lifetime: the bootstrap token may expire
unused, and a stolen token ends with its lifetime. Deleting the ServiceAccount (``fleet
unjoin``) ends every token it was given.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from api.work import pull_namespace
from kube.connection import KubeConnection
from kube.errors import ApiError
from kube.kubeconfig import Credentials, token_problem
from kube.session import ConnectionOptions

log = logging.getLogger(__name__)

AGENT_SERVICE_ACCOUNT = "agent"
"""The agent's ServiceAccount in its cluster's hub namespace."""
TOKEN_FILE = "hub-token"
RETRY_S = 30.0
"""A failed rotation is asked again this soon (the current token stays valid meanwhile)."""
MAX_TOKEN_BYTES = 16 * 1024


class IdentityError(RuntimeError):
    """The agent has no usable hub credential (the message says which and why)."""


def expiry_of(token: str) -> float | None:
    """When a service account token (a JWT) expires (epoch seconds), if it says."""
    parts = token.split(".")
    if len(parts) != 3 or len(token) > MAX_TOKEN_BYTES:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the owner only, whole or not at all."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    os.replace(tmp, path)


class HubIdentity:
    """The agent's current hub token, in ``state_dir`` (see the module)."""

    def __init__(
        self,
        cluster: str,
        bootstrap: Credentials,
        state_dir: Path,
        ttl_s: int,
        kept: str | None = None,
        persist: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """``kept``: a token kept elsewhere (the member's Secret) from an earlier run;
        ``persist``: where each new token is kept besides ``state_dir``."""
        self.cluster, self.state_dir, self.ttl_s = cluster, state_dir, ttl_s
        self.persist = persist
        self.path = state_dir / TOKEN_FILE
        self.credentials = self._initial(bootstrap, kept)
        self.expires_at = expiry_of(self.credentials.token or "")

    def _initial(self, bootstrap: Credentials, elsewhere: str | None) -> Credentials:
        """The token to start with: one kept from an earlier run while it is valid (in
        the state directory, else ``elsewhere``), else the bootstrap's."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise IdentityError(
                f"PROPAGATOR_AGENT_STATE_DIR / --agent-state-dir {self.state_dir}: "
                f"{exc.strerror or exc}"
            ) from exc
        kept = None
        try:
            kept = self.path.read_text().strip()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise IdentityError(f"{self.path}: {exc.strerror or exc}") from exc
        now = time.time()
        usable = [
            t
            for t in (kept, elsewhere)
            if t and token_problem(t) is None and (expiry_of(t) or 0) > now + 60
        ]
        if usable:
            token = usable[0]
        elif bootstrap.token:
            expires = expiry_of(bootstrap.token)
            if expires is not None and expires <= now:
                raise IdentityError(
                    "the bootstrap token of the agent's hub kubeconfig has expired and no "
                    f"valid token of its own is kept (in {self.state_dir} or its hub Secret): "
                    f"run `propagator fleet join {self.cluster} --mode Pull` again for a new one"
                )
            token = bootstrap.token
        else:
            raise IdentityError(
                "the agent's hub kubeconfig holds no token (expected the join's bootstrap)"
            )
        _write_private(self.path, token)
        return dataclasses.replace(bootstrap, token=token, token_file=str(self.path))

    def connection(self, options: ConnectionOptions) -> KubeConnection:
        """The hub connection, with whatever token the state directory holds now."""
        return KubeConnection("hub", self.credentials, options)

    async def rotate(self, hub: KubeConnection) -> None:
        """Ask a new token for the agent's ServiceAccount and keep it."""
        answer = await hub.request(
            "POST",
            f"/api/v1/namespaces/{pull_namespace(self.cluster)}/serviceaccounts/"
            f"{AGENT_SERVICE_ACCOUNT}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": self.ttl_s},
            },
        )
        token = str((answer.get("status") or {}).get("token") or "")
        if not token or token_problem(token) is not None or len(token) > MAX_TOKEN_BYTES:
            raise ApiError("hub", "the hub's TokenRequest answer holds no usable token")
        _write_private(self.path, token)
        self.expires_at = expiry_of(token) or time.time() + self.ttl_s
        if self.persist is not None:
            await self.persist(token)
        log.info("hub token rotated; valid for %d s", int(self.expires_at - time.time()))

    def next_rotation_in(self) -> float:
        """Seconds until the token is to be replaced: at half of what is left of it."""
        if self.expires_at is None:
            return 0.0
        return max(0.0, (self.expires_at - time.time()) / 2)

    async def keep(self, hub: KubeConnection) -> None:
        """Rotate now, then at half of each token's lifetime, until cancelled."""
        while True:
            try:
                await self.rotate(hub)
            except ApiError as exc:
                log.warning("hub token not rotated (retried in %g s): %s", RETRY_S, exc)
                await anyio.sleep(RETRY_S)
                continue
            await anyio.sleep(max(self.next_rotation_in(), RETRY_S))
